/**
 * Configuration: model ids (`modelFromId`), config files (`loadConfig`: JSON and TS, found or
 * named, and every way one can be wrong), the built-in demo agent through a real runtime, and
 * `keel serve` starting on it (the DEMO MODE banner, the refusals).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Io } from '../../src/cli/args.ts';
import { main } from '../../src/cli/main.ts';
import {
  agentsFromConfig,
  ConfigError,
  createRuntime,
  defineAgent,
  defineConfig,
  loadConfig,
  MemorySink,
  modelFromId,
  ModelIdError,
  openSqliteStore,
  runTurn,
  ScriptedModel,
  SqliteStore,
  type AgentDefinition,
  type KeelConfig,
  type Message,
  type Runtime,
} from '../../src/index.ts';
import { sink, until } from '../cli/io.ts';
import { sse, startWireServer, type SseEvent } from '../support/wire-server.ts';

const SRC_INDEX = fileURLToPath(new URL('../../src/index.ts', import.meta.url));
const ZOD_URL = import.meta.resolve('zod');

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(prefix = 'keel-config-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function write(dir: string, name: string, content: unknown): string {
  const path = join(dir, name);
  mkdirSync(resolve(path, '..'), { recursive: true });
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return path;
}

/** Runs `fn`, expects it to throw (or reject) an instance of `type`, and returns the error. */
async function failure<E extends Error>(type: new (...a: never[]) => E, fn: () => unknown): Promise<E> {
  let thrown: unknown;
  try {
    await fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'expected a failure').toBeInstanceOf(type);
  return thrown as E;
}

function withEnv(name: string, value: string | undefined): void {
  const before = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
  cleanups.push(() => {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  });
}

const textOf = (m: Message | undefined): string =>
  !m || m.role === 'tool'
    ? ''
    : m.role === 'summary'
      ? m.text
      : m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');

// ---------------------------------------------------------------------------------------------
// modelFromId
// ---------------------------------------------------------------------------------------------

describe('modelFromId', () => {
  it('builds each provider model from its prefix without calling it', () => {
    for (const [id, provider, modelId] of [
      ['openai:gpt-4.1-mini', /^openai\b/, 'gpt-4.1-mini'],
      ['anthropic:claude-sonnet-4-5', /^anthropic\b/, 'claude-sonnet-4-5'],
      ['google:gemini-2.5-flash', /^google\b/, 'gemini-2.5-flash'],
      ['openai-compatible:http://localhost:11434/v1#llama3.2:3b', /^openai-compatible\b/, 'llama3.2:3b'],
    ] as const) {
      const m = modelFromId(id);
      expect(m.specificationVersion, id).toBe('v4');
      expect(m.provider, id).toMatch(provider);
      expect(m.modelId, id).toBe(modelId);
    }
  });

  it('refuses ids it cannot read, naming the id', async () => {
    const cases: Array<[string, RegExp]> = [
      ['gpt-4.1-mini', /expected <provider>:<model>/],
      [':gpt-4', /expected <provider>:<model>/],
      ['openai:', /model name is missing/],
      ['scripted:', /model name is missing/],
      ['mistral:large', /unknown provider "mistral".*openai, anthropic, google, openai-compatible, scripted/],
      ['openai-compatible:http://localhost:11434/v1', /expected openai-compatible:<baseURL>#<model>/],
      ['openai-compatible:http://localhost:11434/v1#', /expected openai-compatible:<baseURL>#<model>/],
      ['openai-compatible:#llama3', /expected openai-compatible:<baseURL>#<model>/],
      ['openai-compatible:not a url#llama3', /not a URL/],
      // Looks like a host and port, parses as a URL with the scheme "localhost:": not an HTTP endpoint.
      ['openai-compatible:localhost:11434/v1#llama3', /not a URL/],
      ['openai-compatible:ftp://example.com/v1#llama3', /not a URL/],
    ];
    for (const [id, why] of cases) {
      const e = await failure(ModelIdError, () => modelFromId(id));
      expect(e.name).toBe('ModelIdError');
      expect(e.message, id).toContain(`model "${id}"`);
      expect(e.message, id).toMatch(why);
    }
  });

  it('scripted:<file> loads a JSON script relative to the base dir, in array form', async () => {
    const dir = tempDir();
    write(dir, 'scripts/hello.json', [{ text: 'Hello from a file' }, { text: 'second' }]);
    const model = modelFromId('scripted:scripts/hello.json', { baseDir: dir });
    expect(model).toBeInstanceOf(ScriptedModel);
    expect(model.provider).toBe('scripted');
    expect(model.modelId).toBe('scripts/hello.json');
    const agent = { name: 'a', model } as const;
    const first = await runTurn(defineAgent(agent), { sink: new MemorySink(), input: 'hi' });
    expect(first.reason).toBe('completed');
    expect(textOf(first.conversation.at(-1))).toBe('Hello from a file');
    const second = await runTurn(defineAgent(agent), { sink: new MemorySink(), input: 'again' });
    expect(textOf(second.conversation.at(-1))).toBe('second');
    // Not looping: the script is spent.
    expect((model as ScriptedModel).remaining).toBe(0);
  });

  it('scripted:<file> in { loop, responses } form starts over when it loops', async () => {
    const dir = tempDir();
    write(dir, 'loop.json', { loop: true, responses: [{ text: 'again and again' }] });
    const model = modelFromId('scripted:loop.json', { baseDir: dir }) as ScriptedModel;
    expect(model.remaining).toBe(Infinity);
    for (let i = 0; i < 3; i++) {
      const r = await runTurn(defineAgent({ name: 'a', model }), { sink: new MemorySink(), input: `turn ${i}` });
      expect(textOf(r.conversation.at(-1))).toBe('again and again');
    }
    write(dir, 'once.json', { responses: [{ text: 'once' }] });
    expect((modelFromId('scripted:once.json', { baseDir: dir }) as ScriptedModel).remaining).toBe(1);
  });

  it('scripted:<absolute file> ignores the base dir', () => {
    const dir = tempDir();
    const path = write(dir, 'abs.json', [{ text: 'x' }]);
    expect(modelFromId(`scripted:${path}`, { baseDir: '/nonexistent' }).modelId).toBe(path);
  });

  it('scripted:<file> refuses a missing file, invalid JSON and an invalid script with a clear message', async () => {
    const dir = tempDir();
    const missing = await failure(ModelIdError, () => modelFromId('scripted:nope.json', { baseDir: dir }));
    expect(missing.message).toContain(`cannot read the script ${join(dir, 'nope.json')}`);

    write(dir, 'broken.json', '[{ "text": ');
    const broken = await failure(ModelIdError, () => modelFromId('scripted:broken.json', { baseDir: dir }));
    expect(broken.message).toContain(
      `model "scripted:broken.json": cannot read the script ${join(dir, 'broken.json')}`,
    );

    write(dir, 'bad.json', [{ text: 'ok' }, { txet: 'typo' }]);
    const bad = await failure(ModelIdError, () => modelFromId('scripted:bad.json', { baseDir: dir }));
    expect(bad.message).toContain(`model "scripted:bad.json": invalid script ${join(dir, 'bad.json')}`);
    expect(bad.message).toMatch(/txet/);

    write(dir, 'calls.json', [{ toolCalls: [{ name: '', input: {} }] }]);
    const calls = await failure(ModelIdError, () => modelFromId('scripted:calls.json', { baseDir: dir }));
    expect(calls.message).toMatch(/invalid script/);

    write(dir, 'object.json', { loop: 'yes', responses: [] });
    expect((await failure(ModelIdError, () => modelFromId('scripted:object.json', { baseDir: dir }))).message).toMatch(
      /invalid script/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// openai-compatible end to end
// ---------------------------------------------------------------------------------------------

function chatChunk(delta: Record<string, unknown>, finishReason: string | null = null): SseEvent {
  return {
    data: {
      id: 'chatcmpl-local',
      object: 'chat.completion.chunk',
      created: 1_735_000_000,
      model: 'llama3.2',
      choices: [{ index: 0, delta, finish_reason: finishReason }],
    },
  };
}

describe('openai-compatible models', () => {
  it('run a turn against a local chat-completions server, with the key from OPENAI_COMPATIBLE_API_KEY', async () => {
    const wire = await startWireServer();
    cleanups.push(() => wire.close());
    withEnv('OPENAI_COMPATIBLE_API_KEY', 'sk-local-test');
    wire.respond(
      sse([
        chatChunk({ role: 'assistant', content: '' }),
        chatChunk({ content: 'Hello' }),
        chatChunk({ content: ' from the local model' }),
        chatChunk({}, 'stop'),
        {
          data: {
            id: 'chatcmpl-local',
            object: 'chat.completion.chunk',
            created: 1_735_000_000,
            model: 'llama3.2',
            choices: [],
            usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
          },
        },
        { data: '[DONE]' },
      ]),
    );
    const id = `openai-compatible:${wire.url}/custom/v1#llama3.2`;
    const model = modelFromId(id);
    expect(model.modelId).toBe('llama3.2');
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 'local', model, system: 'Be brief.' }), {
      sink,
      input: 'Say hello',
    });

    expect(result.reason).toBe('completed');
    expect(textOf(result.conversation.at(-1))).toBe('Hello from the local model');
    expect(
      sink.deltas
        .filter((d) => d.type === 'text/delta')
        .map((d) => d.delta)
        .join(''),
    ).toBe('Hello from the local model');

    expect(wire.requests).toHaveLength(1);
    const req = wire.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/custom/v1/chat/completions');
    expect(req.headers.authorization).toBe('Bearer sk-local-test');
    expect(req.body).toMatchObject({
      model: 'llama3.2',
      stream: true,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
    });
  });

  it('send no Authorization header when OPENAI_COMPATIBLE_API_KEY is not set (a local server needs none)', async () => {
    const wire = await startWireServer();
    cleanups.push(() => wire.close());
    withEnv('OPENAI_COMPATIBLE_API_KEY', undefined);
    wire.respond(sse([chatChunk({ role: 'assistant', content: 'ok' }), chatChunk({}, 'stop'), { data: '[DONE]' }]));
    const result = await runTurn(
      defineAgent({ name: 'local', model: modelFromId(`openai-compatible:${wire.url}/v1#m`) }),
      { sink: new MemorySink(), input: 'hi' },
    );
    expect(result.reason).toBe('completed');
    expect(textOf(result.conversation.at(-1))).toBe('ok');
    expect(wire.requests[0]!.path).toBe('/v1/chat/completions');
    expect(wire.requests[0]!.headers.authorization).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// loadConfig
// ---------------------------------------------------------------------------------------------

const toolNames = (a: AgentDefinition) => a.tools.map((t) => t.name);

describe('loadConfig', () => {
  it('with no configuration file serves the built-in demo agent', async () => {
    const dir = tempDir();
    const loaded = await loadConfig(undefined, dir);
    expect(loaded.demo).toBe(true);
    expect(loaded.source).toBeNull();
    expect(loaded.compaction).toEqual({});
    expect(loaded.agents.map((a) => `${a.name}@${a.version}`)).toEqual(['demo@1', 'demo@2']);
    const [demo] = loaded.agents;
    expect(demo).toMatchObject({ name: 'demo', version: '1' });
    expect(demo!.model.provider).toBe('scripted');
    expect(toolNames(demo!)).toEqual(['get_weather', 'send_report', 'ask_user']);
    expect(demo!.tools.find((t) => t.name === 'send_report')!.approval).toBe('always');
  });

  it('reads experiment scorers: a model as judge by model id; a built-in name or a bad one is refused', async () => {
    const dir = tempDir();
    write(dir, 'judge.json', { loop: true, responses: [{ text: '{"score": 0.75}' }] });
    const agents = [{ name: 'a', model: 'scripted:judge.json' }];
    write(dir, 'keel.config.json', {
      agents,
      scorers: { polite: { judge: { model: 'scripted:judge.json', rubric: 'Polite?' } } },
    });
    const loaded = await loadConfig(undefined, dir);
    const judge = loaded.scorers!.polite!;
    const outcome = {
      status: 'completed',
      finalText: 'hi',
      toolCalls: [],
      usage: { inputTokens: 0, outputTokens: 0 },
      cost: 0,
      latencyMs: 0,
    };
    expect(await judge({ id: 'i', sourceRunId: 'r', expected: null, notes: null }, outcome, outcome)).toBe(0.75);

    write(dir, 'keel.config.json', {
      agents,
      scorers: { final_text: { judge: { model: 'scripted:judge.json', rubric: 'x' } } },
    });
    expect((await failure(ConfigError, () => loadConfig(undefined, dir))).message).toContain(
      "final_text is a built-in scorer's name",
    );
    write(dir, 'keel.config.json', {
      agents,
      scorers: { 'Bad Name': { judge: { model: 'scripted:judge.json', rubric: 'x' } } },
    });
    expect((await failure(ConfigError, () => loadConfig(undefined, dir))).message).toContain('scorers["Bad Name"]');
    write(dir, 'keel.config.json', { agents, scorers: { polite: { judge: { model: 'nope', rubric: 'x' } } } });
    expect((await failure(ConfigError, () => loadConfig(undefined, dir))).message).toContain('scorers.polite');
  });

  it('reads keel.config.json: agents, ask_user, limits, settings, approvals, compaction and pricing', async () => {
    const dir = tempDir();
    write(dir, 'scripts/assistant.json', [{ text: 'scripted answer' }]);
    write(dir, 'scripts/summarizer.json', { loop: true, responses: [{ text: 'SUMMARY' }] });
    const source = write(dir, 'keel.config.json', {
      agents: [
        {
          name: 'assistant',
          version: '2',
          model: 'scripted:scripts/assistant.json',
          system: 'You are helpful.',
          tools: ['ask_user'],
          limits: { maxSteps: 7, maxTokens: 50_000, maxCostUsd: 0.5 },
          settings: { maxOutputTokens: 512, temperature: 0.2 },
          approvals: { ask_user: 'always' },
          compaction: {
            contextWindow: 32_000,
            reserveTokens: 4000,
            keepRecentTokens: 8000,
            model: 'scripted:scripts/summarizer.json',
          },
          pricing: { inputPerMTok: 1, outputPerMTok: 4 },
          toolConcurrency: 2,
        },
        { name: 'cloud', model: 'openai:gpt-4.1-mini', tools: ['ask_user'], compaction: { contextWindow: 128_000 } },
        { name: 'plain', model: 'anthropic:claude-sonnet-4-5' },
      ],
    });
    const loaded = await loadConfig(undefined, dir);
    expect(loaded.demo).toBe(false);
    expect(loaded.source).toBe(source);
    expect(loaded.agents.map((a) => `${a.name}@${a.version}`)).toEqual(['assistant@2', 'cloud@1', 'plain@1']);

    const [assistant, cloud, plain] = loaded.agents as [AgentDefinition, AgentDefinition, AgentDefinition];
    expect(assistant.system).toBe('You are helpful.');
    expect(assistant.model.provider).toBe('scripted');
    expect(assistant.model.modelId).toBe('scripts/assistant.json');
    expect(toolNames(assistant)).toEqual(['ask_user']);
    // The approval policy is overridden on the named tool only; the tool is otherwise unchanged.
    expect(assistant.tools[0]!.approval).toBe('always');
    expect(assistant.tools[0]!.interactive).toBe(true);
    expect(cloud.tools[0]!.approval).toBe('never');
    expect(assistant.limits).toEqual({ maxSteps: 7, maxTokens: 50_000, maxCostUsd: 0.5 });
    expect(assistant.settings).toEqual({ maxOutputTokens: 512, temperature: 0.2 });
    expect(assistant.pricing).toEqual({ inputPerMTok: 1, outputPerMTok: 4 });
    expect(assistant.toolConcurrency).toBe(2);

    expect(cloud.model.provider).toMatch(/^openai\b/);
    expect(cloud.limits.maxSteps).toBe(50);
    expect(plain.model.provider).toMatch(/^anthropic\b/);
    expect(plain.tools).toEqual([]);
    expect(plain.system).toBeUndefined();

    // Compaction settings by agent name, with the agent's pricing; none for an agent without them.
    expect(Object.keys(loaded.compaction).sort()).toEqual(['assistant', 'cloud']);
    expect(loaded.compaction.assistant).toMatchObject({
      contextWindow: 32_000,
      reserveTokens: 4000,
      keepRecentTokens: 8000,
      pricing: { inputPerMTok: 1, outputPerMTok: 4 },
    });
    expect(loaded.compaction.assistant!.model?.modelId).toBe('scripts/summarizer.json');
    expect(loaded.compaction.cloud).toEqual({ contextWindow: 128_000 });

    // The scripted model found its script relative to the config file, and runs.
    const r = await runTurn(assistant, { sink: new MemorySink(), input: 'hello' });
    expect(textOf(r.conversation.at(-1))).toBe('scripted answer');
  });

  it('reads keel.config.ts with a tool defined in code (zod, defineConfig), and the tool executes', async () => {
    const dir = tempDir();
    write(dir, 'script.json', [
      { toolCalls: [{ id: 'c1', name: 'add', input: { a: 2, b: 40 } }] },
      { text: 'The sum is 42.' },
    ]);
    const source = write(
      dir,
      'keel.config.ts',
      `import { z } from ${JSON.stringify(ZOD_URL)};
import { defineConfig, tool } from ${JSON.stringify(pathToFileURL(SRC_INDEX).href)};

const add = tool({
  name: 'add',
  description: 'Adds two numbers',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }: { a: number; b: number }) => ({ sum: a + b }),
});
const guarded = tool({ name: 'guarded', description: 'Needs approval in this config', input: z.object({}), execute: () => 'done' });

export default defineConfig({
  agents: [
    { name: 'calc', model: 'scripted:script.json', system: 'You add.', tools: [add, guarded, 'ask_user'], approvals: { guarded: 'always' }, limits: { maxSteps: 4 } },
  ],
});
`,
    );
    // Found by name in the directory (the .ts file comes first).
    write(dir, 'keel.config.json', { agents: [{ name: 'ignored', model: 'openai:gpt-4.1-mini' }] });
    const loaded = await loadConfig(undefined, dir);
    expect(loaded.source).toBe(source);
    expect(loaded.demo).toBe(false);
    const [calc] = loaded.agents as [AgentDefinition];
    expect(calc.name).toBe('calc');
    expect(toolNames(calc)).toEqual(['add', 'guarded', 'ask_user']);
    expect(calc.tools.find((t) => t.name === 'add')!.approval).toBe('never');
    expect(calc.tools.find((t) => t.name === 'guarded')!.approval).toBe('always');
    expect(calc.tools.find((t) => t.name === 'add')!.schema.inputSchema).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
    });
    expect(calc.limits.maxSteps).toBe(4);

    // The tool executes, both directly and in a turn the scripted model drives.
    const ctx = { signal: new AbortController().signal, toolCallId: 't', idempotencyKey: 'k', turn: 1, step: 1 };
    expect(await calc.tools[0]!.execute({ a: 1, b: 2 }, ctx)).toEqual({ sum: 3 });
    const sink = new MemorySink();
    const r = await runTurn(calc, { sink, input: 'add 2 and 40' });
    expect(r.reason).toBe('completed');
    expect(sink.ofType('tool/result').map((e) => e.data.output)).toEqual([{ type: 'json', value: { sum: 42 } }]);
    expect(textOf(r.conversation.at(-1))).toBe('The sum is 42.');
  });

  it('loads an explicit path relative to cwd, whatever it is named', async () => {
    const dir = tempDir();
    write(dir, 'keel.config.json', { agents: [{ name: 'not-this-one', model: 'openai:gpt-4.1-mini' }] });
    const source = write(dir, 'configs/prod.json', { agents: [{ name: 'prod', model: 'google:gemini-2.5-flash' }] });
    const loaded = await loadConfig('configs/prod.json', dir);
    expect(loaded.source).toBe(source);
    expect(loaded.agents.map((a) => a.name)).toEqual(['prod']);
    expect((await loadConfig(source, '/')).agents.map((a) => a.name)).toEqual(['prod']);
    // An .mjs config, named explicitly.
    const mjs = write(
      dir,
      'other.mjs',
      `export default { agents: [{ name: 'from-mjs', model: 'anthropic:claude-sonnet-4-5' }] };\n`,
    );
    expect((await loadConfig('other.mjs', dir)).agents.map((a) => a.name)).toEqual(['from-mjs']);
    expect((await loadConfig('other.mjs', dir)).source).toBe(mjs);
  });

  describe('refuses a bad configuration with a ConfigError naming the file and the problem', () => {
    async function configError(
      file: string,
      content: unknown,
      path?: string,
    ): Promise<{ message: string; source: string }> {
      const dir = tempDir();
      const source = write(dir, file, content);
      const e = await failure(ConfigError, () => loadConfig(path, dir));
      expect(e.name).toBe('ConfigError');
      expect(e.message.startsWith(`${source}: `), e.message).toBe(true);
      return { message: e.message, source };
    }

    it('a missing explicit path', async () => {
      const dir = tempDir();
      const e = await failure(ConfigError, () => loadConfig('nope/keel.config.json', dir));
      expect(e.message).toBe(`${join(dir, 'nope/keel.config.json')}: no such file`);
    });

    it('invalid JSON', async () => {
      const { message } = await configError('keel.config.json', '{ "agents": [ }');
      expect(message).toMatch(/cannot load it: .*JSON/);
    });

    it('a JS config that throws, or has no default export', async () => {
      expect((await configError('keel.config.mjs', `throw new Error('boom at import');\n`)).message).toMatch(
        /cannot load it: boom at import/,
      );
      expect((await configError('keel.config.mjs', `export const agents = [];\n`)).message).toMatch(
        /no default export/,
      );
    });

    it('an unknown field, at the top or in an agent', async () => {
      expect(
        (await configError('keel.config.json', { agents: [{ name: 'a', model: 'openai:gpt-4.1-mini' }], agent: [] }))
          .message,
      ).toMatch(/agent\b/);
      const { message } = await configError('keel.config.json', {
        agents: [{ name: 'a', model: 'openai:gpt-4.1-mini', temprature: 0.2 }],
      });
      expect(message).toMatch(/temprature/);
      expect(message).toMatch(/agents/);
    });

    it('no agents', async () => {
      expect((await configError('keel.config.json', { agents: [] })).message).toMatch(/agents/);
      expect((await configError('keel.config.json', {})).message).toMatch(/agents/);
    });

    it('a bad agent name', async () => {
      const { message } = await configError('keel.config.json', {
        agents: [{ name: 'my agent!', model: 'openai:gpt-4.1-mini' }],
      });
      expect(message).toMatch(/letters, digits, dots, dashes, underscores/);
      expect(message).toMatch(/name/);
    });

    it('an unknown tool name in JSON', async () => {
      const { message } = await configError('keel.config.json', {
        agents: [{ name: 'a', model: 'openai:gpt-4.1-mini', tools: ['get_weather'] }],
      });
      expect(message).toMatch(/tools/);
    });

    it('an approvals entry naming a tool the agent does not have', async () => {
      const { message } = await configError('keel.config.json', {
        agents: [{ name: 'a', model: 'openai:gpt-4.1-mini', tools: ['ask_user'], approvals: { send_email: 'always' } }],
      });
      expect(message).toMatch(/agent a: .*approvals: .*no tool send_email/);
    });

    it('a bad model id, naming the agent and the id', async () => {
      const { message } = await configError('keel.config.json', { agents: [{ name: 'a', model: 'mistral:large' }] });
      expect(message).toMatch(/agent a: model "mistral:large": unknown provider/);
      const scripted = await configError('keel.config.json', {
        agents: [{ name: 'b', model: 'scripted:missing.json' }],
      });
      expect(scripted.message).toMatch(/agent b: model "scripted:missing.json": cannot read the script/);
    });

    it('limits.maxCostUsd without pricing', async () => {
      const { message } = await configError('keel.config.json', {
        agents: [{ name: 'a', model: 'openai:gpt-4.1-mini', limits: { maxCostUsd: 1 } }],
      });
      expect(message).toMatch(/maxCostUsd needs pricing/);
    });

    it('the same agent name and version twice (a new version of one name is fine)', async () => {
      const { message } = await configError('keel.config.json', {
        agents: [
          { name: 'a', model: 'openai:gpt-4.1-mini' },
          { name: 'a', version: '1', model: 'anthropic:claude-sonnet-4-5' },
        ],
      });
      expect(message).toMatch(/agent a@1 is defined twice/);
      const dir = tempDir();
      write(dir, 'keel.config.json', {
        agents: [
          { name: 'a', model: 'openai:gpt-4.1-mini' },
          { name: 'a', version: '2', model: 'openai:gpt-4.1' },
        ],
      });
      expect((await loadConfig(undefined, dir)).agents.map((a) => `${a.name}@${a.version}`)).toEqual(['a@1', 'a@2']);
    });
  });

  it('agentsFromConfig and defineConfig work on a config object built in code', () => {
    const model = new ScriptedModel([{ text: 'x' }]);
    const config: KeelConfig = defineConfig({
      agents: [{ name: 'inline', model, tools: ['ask_user'], compaction: { contextWindow: 1000, model } }],
    });
    const { agents, compaction } = agentsFromConfig(config, 'inline-config', '/');
    expect(agents[0]!.model).toBe(model);
    expect(compaction.inline).toEqual({ contextWindow: 1000, model });
    const e = (() => {
      try {
        agentsFromConfig({ agents: [{ name: 'x', model: 42 as never }] }, 'inline-config', '/');
      } catch (err) {
        return err as Error;
      }
      return undefined;
    })();
    expect(e).toBeInstanceOf(ConfigError);
    expect(e!.message).toMatch(/^inline-config: /);
  });

  it('largePayloads passes through to the runtime; a bad setting is refused, naming it', () => {
    const model = new ScriptedModel([{ text: 'x' }]);
    const loaded = agentsFromConfig(
      { agents: [{ name: 'a', model }], largePayloads: { thresholdBytes: 65536, modelView: { truncateTo: 4096 } } },
      'inline-config',
      '/',
    );
    expect(loaded.largePayloads).toEqual({ thresholdBytes: 65536, modelView: { truncateTo: 4096 } });
    expect(() =>
      agentsFromConfig(
        { agents: [{ name: 'a', model }], largePayloads: { modelView: { truncateTo: 0 } } },
        'inline-config',
        '/',
      ),
    ).toThrow(/inline-config: [\s\S]*largePayloads\.modelView/);
  });
});

// ---------------------------------------------------------------------------------------------
// The demo agent through a real runtime
// ---------------------------------------------------------------------------------------------

describe('the demo agent in a runtime', () => {
  async function demoRuntime(): Promise<Runtime> {
    const loaded = await loadConfig(undefined, tempDir());
    const store = openSqliteStore({ path: ':memory:' });
    const rt = createRuntime({ store, agents: loaded.agents, compaction: loaded.compaction });
    rt.startWorker();
    cleanups.push(async () => {
      await rt.close({ graceMs: 1000 });
      await store.close();
    });
    return rt;
  }

  async function lastAssistantText(rt: Runtime, sessionId: string): Promise<string> {
    const { messages } = await rt.sessions.context(sessionId);
    return textOf(messages.findLast((m) => m.role === 'assistant'));
  }

  async function toWaitingApproval(rt: Runtime, text: string) {
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, text);
    const parked = await rt.runs.wait(run.id);
    expect(parked.status).toBe('waiting_approval');
    expect(parked.waiting).toMatchObject({
      kind: 'approval',
      calls: [{ toolName: 'send_report', kind: 'approval', input: { to: 'team@example.com' } }],
    });
    const events = await rt.sessions.events(s.id, { limit: 1000 });
    const results = events.flatMap((e) =>
      e.type === 'tool/result' ? [e.data as { toolName: string; output: unknown }] : [],
    );
    return {
      s,
      run: parked,
      results,
      toolCallId: (parked.waiting as unknown as { calls: Array<{ toolCallId: string }> }).calls[0]!.toolCallId,
    };
  }

  it('looks up the weather, asks to send a report, asks a question, then answers with the city', async () => {
    const rt = await demoRuntime();
    const { s, run, results, toolCallId } = await toWaitingApproval(rt, 'What is the weather in Tokyo?');
    expect(results).toEqual([
      expect.objectContaining({
        toolName: 'get_weather',
        output: { type: 'json', value: { city: 'tokyo', celsius: 24 } },
      }),
    ]);

    await rt.runs.approve(run.id, toolCallId);
    const asking = await rt.runs.wait(run.id);
    expect(asking.id).toBe(run.id);
    expect(asking.status).toBe('waiting_for_user');
    expect(asking.waiting).toMatchObject({
      kind: 'input',
      calls: [
        {
          toolName: 'ask_user',
          kind: 'input',
          input: {
            questions: [{ id: 'units', question: 'Celsius or Fahrenheit?', choices: ['celsius', 'fahrenheit'] }],
          },
        },
      ],
    });

    await rt.runs.input(run.id, { units: 'fahrenheit' });
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('completed');
    const final = await lastAssistantText(rt, s.id);
    expect(final).toMatch(/tokyo/i);
    expect(final).toContain('75°F');
    expect(final).toContain('The report was sent.');
    const events = await rt.sessions.events(s.id, { limit: 1000 });
    const sent = events.find(
      (e) => e.type === 'tool/result' && (e.data as { toolName: string }).toolName === 'send_report',
    );
    expect(sent?.data).toMatchObject({ output: { type: 'json', value: { sent: true, to: 'team@example.com' } } });
  });

  it('a denied report is not sent, and the final answer says so', async () => {
    const rt = await demoRuntime();
    const { s, run, toolCallId } = await toWaitingApproval(rt, 'How warm is it in Berlin?');
    await rt.runs.deny(run.id, toolCallId, { reason: 'not now' });
    const asking = await rt.runs.wait(run.id);
    expect(asking.status).toBe('waiting_for_user');
    await rt.runs.input(run.id, { units: 'celsius' });
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const final = await lastAssistantText(rt, s.id);
    expect(final).toMatch(/berlin/i);
    expect(final).toContain('15°C');
    expect(final).toContain('The report was not sent.');
  });
});

// ---------------------------------------------------------------------------------------------
// keel serve
// ---------------------------------------------------------------------------------------------

describe('keel serve', () => {
  function io(env: NodeJS.ProcessEnv = {}) {
    const out = sink();
    const err = sink();
    const stop = new AbortController();
    const value: Io = { out, err, env, signal: stop.signal };
    return { io: value, out, err, stop };
  }

  /** Runs `fn` with the working directory set to `dir`. */
  async function inDir<T>(dir: string, fn: () => Promise<T>): Promise<T> {
    const before = process.cwd();
    // Restored after the test even if `fn` never settles (a hang must not strand later tests in a removed dir).
    cleanups.push(() => process.chdir(before));
    process.chdir(dir);
    try {
      return await fn();
    } finally {
      process.chdir(before);
    }
  }

  it('with no configuration serves the demo agent and prints the DEMO MODE banner; an abort stops it with exit 0', async () => {
    const dir = tempDir();
    const db = join(tempDir('keel-serve-db-'), 'keel.db');
    const { io: cliIo, out, err, stop } = io();
    let done!: Promise<number>;
    await inDir(dir, async () => {
      done = main(['serve', '--port', '0', '--db', db], cliIo);
      await until(() => out.text().includes('DEMO MODE') || err.text() !== '', 'the serve banner');
    });
    let code: number | undefined;
    try {
      expect(err.text()).toBe('');
      const text = out.text();
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
      expect(url, text).toBeDefined();
      expect(text).toContain(`database ${db}`);
      expect(text).toContain('auth off (loopback)');
      expect(text).toMatch(/DEMO MODE: no keel\.config\.\{ts,mjs,js,json\} here/);
      expect(text).toContain(`curl -s -XPOST ${url}/v1/sessions`);
      expect(text).toContain(`npx keel chat --url ${url}`);
      expect(text).toContain('keel.config.json');
      expect(text).toContain('OPENAI_API_KEY');
      // It really serves.
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      const created = await fetch(`${url}/v1/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(created.status).toBeLessThan(300);
    } finally {
      stop.abort();
      code = await done;
    }
    expect(code).toBe(0);
    expect(out.text()).toContain('shutting down');
  });

  it('names the agents of a configuration file instead of the banner', async () => {
    const dir = tempDir();
    const source = write(dir, 'keel.config.json', {
      agents: [{ name: 'assistant', model: 'openai:gpt-4.1-mini', tools: ['ask_user'] }],
    });
    const db = join(dir, 'keel.db');
    const { io: cliIo, out, err, stop } = io();
    const done = main(['serve', '--port', '0', '--db', db, '--config', source, '--workers', '0'], cliIo);
    try {
      await until(() => out.text().includes('agents from') || err.text() !== '', 'the serve banner');
      expect(err.text()).toBe('');
      expect(out.text()).toContain(`agents from ${source}: assistant@1 (openai.`);
      expect(out.text()).toContain('no worker');
      expect(out.text()).not.toContain('DEMO MODE');
    } finally {
      stop.abort();
      expect(await done).toBe(0);
    }
  });

  it('stops at once when the signal is already aborted as it starts', async () => {
    const dir = tempDir();
    const { io: cliIo, out, stop } = io();
    stop.abort();
    const code = await inDir(dir, () => main(['serve', '--port', '0', '--db', join(dir, 'keel.db')], cliIo));
    expect(code).toBe(0);
    expect(out.text()).toContain('shutting down');
  });

  it('refuses a non-loopback host without API keys (exit 1, mentions --insecure), and closes its database', async () => {
    const dir = tempDir();
    const close = vi.spyOn(SqliteStore.prototype, 'close');
    cleanups.push(() => close.mockRestore());
    const { io: cliIo, out, err } = io();
    const code = await inDir(dir, () =>
      main(['serve', '--host', '0.0.0.0', '--port', '0', '--db', join(dir, 'keel.db')], cliIo),
    );
    expect(code).toBe(1);
    expect(err.text()).toMatch(/^keel: refusing to listen on 0\.0\.0\.0 without API keys/);
    expect(err.text()).toContain('--insecure');
    expect(out.text()).not.toContain('listening');
    expect(close).toHaveBeenCalledTimes(1);
  });

  it('refuses a bad --port or --workers with a clear message', async () => {
    const dir = tempDir();
    const db = join(dir, 'keel.db');
    for (const port of ['abc', '70000', '-1', '80.5', '', ' ']) {
      const { io: cliIo, out, err } = io();
      const code = await inDir(dir, () => main(['serve', `--port=${port}`, '--db', db], cliIo));
      expect(code, `--port ${JSON.stringify(port)}`).toBe(1);
      expect(err.text()).toContain('--port must be 0-65535');
      expect(out.text()).toBe('');
    }
    {
      const { io: cliIo, err } = io({ PORT: 'http' });
      expect(await inDir(dir, () => main(['serve', '--db', db], cliIo))).toBe(1);
      expect(err.text()).toContain('--port must be 0-65535');
    }
    {
      const { io: cliIo, err } = io();
      expect(await inDir(dir, () => main(['serve', '--port', '0', '--workers', 'many', '--db', db], cliIo))).toBe(1);
      expect(err.text()).toContain('--workers must be a whole number');
    }
    {
      const { io: cliIo, err } = io();
      expect(await inDir(dir, () => main(['serve', '--port'], cliIo))).toBe(2);
      expect(err.text()).toMatch(/^keel: serve: .*--port/);
    }
  });

  it('reports a configuration that does not exist (exit 1, naming the file)', async () => {
    const dir = tempDir();
    const { io: cliIo, out, err } = io();
    const code = await inDir(dir, () =>
      main(['serve', '--port', '0', '--db', join(dir, 'keel.db'), '--config', 'missing.json'], cliIo),
    );
    expect(code).toBe(1);
    expect(err.text()).toBe(`keel: ${join(dir, 'missing.json')}: no such file\n`);
    expect(out.text()).toBe('');
  });
});

describe('provider limits in keel.config', () => {
  it('reads providerLimits and each agent’s priority, refuses bad ones, and keel serve holds them (a limited model’s waits show in /metrics)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-limits-config-'));
    try {
      const file = join(dir, 'keel.config.json');
      writeFileSync(
        file,
        JSON.stringify({
          agents: [{ name: 'batcher', model: 'scripted:script.json', priority: 'batch' }],
          providerLimits: { 'scripted:*': { concurrency: 1, requestsPerMinute: 600 } },
        }),
      );
      writeFileSync(join(dir, 'script.json'), JSON.stringify([{ text: 'ok' }]));
      const loaded = await loadConfig(file);
      expect(loaded.providerLimits).toEqual({ 'scripted:*': { concurrency: 1, requestsPerMinute: 600 } });
      expect(loaded.priorities).toEqual({ batcher: 'batch' });

      writeFileSync(
        file,
        JSON.stringify({
          agents: [{ name: 'a', model: 'scripted:script.json' }],
          providerLimits: { 'scripted:*': { concurrency: 0 } },
        }),
      );
      await expect(loadConfig(file)).rejects.toThrow(/providerLimits.*concurrency/s);
      writeFileSync(
        file,
        JSON.stringify({ agents: [{ name: 'a', model: 'scripted:script.json', priority: 'urgent' }] }),
      );
      await expect(loadConfig(file)).rejects.toThrow(/priority/);

      // keel serve with a limited model: two runs at once, one call at a time (each takes 300 ms).
      writeFileSync(
        join(dir, 'script.json'),
        JSON.stringify({ loop: true, responses: [{ text: 'ok', delayMs: 300 }] }),
      );
      writeFileSync(
        file,
        JSON.stringify({
          agents: [{ name: 'a', model: 'scripted:script.json' }],
          providerLimits: { 'scripted:*': { concurrency: 1 } },
        }),
      );
      const out = sink();
      const stop = new AbortController();
      const io: Io = { out, err: sink(), env: { KEEL_LOG_LEVEL: 'silent' }, signal: stop.signal };
      const done = main(['serve', '--port', '0', '--db', join(dir, 'keel.db'), '--config', file], io);
      try {
        await until(() => /listening on (\S+)/.test(out.text()), 'the banner');
        const url = /listening on (\S+)/.exec(out.text())![1]!;
        const post = async (path: string, body: unknown) =>
          (
            await fetch(`${url}${path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(body),
            })
          ).json() as Promise<{ id: string; run: { id: string } }>;
        const runs = await Promise.all(
          [1, 2].map(
            async () =>
              (await post(`/v1/sessions/${(await post('/v1/sessions', {})).id}/messages`, { content: 'hi' })).run.id,
          ),
        );
        for (const id of runs) {
          await until(
            async () =>
              ((await (await fetch(`${url}/v1/runs/${id}`)).json()) as { status: string }).status === 'completed',
            `run ${id} completed`,
          );
        }
        // The second call waited for the first one's slot.
        expect(await (await fetch(`${url}/metrics`)).text()).toMatch(
          /^keel_model_limit_wait_seconds_count\{model="scripted:\*"\} [1-9]\d*$/m,
        );
      } finally {
        stop.abort();
        await done;
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
