import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';
import { ScriptedModel, scriptSchema } from '../model/index.ts';

export class ModelIdError extends Error {
  constructor(id: string, why: string) {
    super(`model "${id}": ${why}`);
    this.name = 'ModelIdError';
  }
}

const scriptFile = z.union([scriptSchema, z.strictObject({ loop: z.boolean().optional(), responses: scriptSchema })]);

/**
 * Turns a model id into an AI SDK model. Keys come from the providers' usual environment
 * variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY, …).
 *   openai:<model>  anthropic:<model>  google:<model>
 *   openai-compatible:<baseURL>#<model>   (Ollama, vLLM, llama.cpp, …; key from OPENAI_COMPATIBLE_API_KEY)
 *   scripted:<file>   a JSON script (an array of responses, or { loop, responses })
 */
export function modelFromId(id: string, options: { baseDir?: string } = {}): LanguageModelV4 {
  const i = id.indexOf(':');
  if (i <= 0) throw new ModelIdError(id, 'expected <provider>:<model>, e.g. openai:gpt-4.1-mini');
  const provider = id.slice(0, i);
  const rest = id.slice(i + 1);
  if (!rest) throw new ModelIdError(id, 'the model name is missing');
  switch (provider) {
    case 'openai':
      return createOpenAI()(rest);
    case 'anthropic':
      return createAnthropic()(rest);
    case 'google':
      return createGoogleGenerativeAI()(rest);
    case 'openai-compatible': {
      const hash = rest.lastIndexOf('#');
      if (hash <= 0 || hash === rest.length - 1)
        throw new ModelIdError(id, 'expected openai-compatible:<baseURL>#<model>');
      const baseURL = rest.slice(0, hash);
      // "localhost:11434/v1" parses too (as a URL with the scheme "localhost:"): require http(s).
      const protocol = URL.canParse(baseURL) ? new URL(baseURL).protocol : undefined;
      if (protocol !== 'http:' && protocol !== 'https:')
        throw new ModelIdError(id, `${baseURL} is not a URL (expected http:// or https://)`);
      const apiKey = process.env.OPENAI_COMPATIBLE_API_KEY;
      return createOpenAICompatible({ name: 'openai-compatible', baseURL, ...(apiKey ? { apiKey } : {}) })(
        rest.slice(hash + 1),
      );
    }
    case 'scripted': {
      const path = resolve(options.baseDir ?? process.cwd(), rest);
      let raw: unknown;
      try {
        raw = JSON.parse(readFileSync(path, 'utf8'));
      } catch (e) {
        throw new ModelIdError(id, `cannot read the script ${path}: ${(e as Error).message}`);
      }
      const parsed = scriptFile.safeParse(raw);
      if (!parsed.success) throw new ModelIdError(id, `invalid script ${path}: ${z.prettifyError(parsed.error)}`);
      const file = Array.isArray(parsed.data) ? { responses: parsed.data, loop: false } : parsed.data;
      return new ScriptedModel(file.responses, { modelId: rest, loop: file.loop ?? false });
    }
    default:
      throw new ModelIdError(
        id,
        `unknown provider "${provider}" (known: openai, anthropic, google, openai-compatible, scripted)`,
      );
  }
}
