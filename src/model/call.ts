import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { classifyModelError, ModelCallError } from './errors.ts';
import type {
  AssistantMessage,
  JsonValue,
  ProviderMetadata,
  ReasoningPart,
  TextPart,
  ToolCallPart,
} from './messages.ts';
import { normalizeUsage, type Usage } from './usage.ts';

/** Ephemeral output of a model call as it streams. Never persisted: the final result is. */
export type ModelDelta =
  | { kind: 'text'; delta: string }
  | { kind: 'reasoning'; delta: string }
  | { kind: 'tool-input'; toolCallId: string; toolName: string; delta: string };

export interface ModelCallResult {
  content: AssistantMessage['content'];
  usage: Usage;
  finishReason: string;
  rawFinishReason?: string;
  responseId?: string;
  /** The model id the provider reports having used. */
  responseModelId?: string;
  warnings: unknown[];
  timing: { startedAt: number; firstChunkMs?: number; durationMs: number };
}

export type ModelCallOptions = Omit<LanguageModelV4CallOptions, 'abortSignal'>;

function parseToolInput(raw: string): JsonValue {
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw) as JsonValue;
  } catch {
    // Kept verbatim so the model sees what it sent; tool execution reports it as invalid input.
    return raw;
  }
}

function mergeMetadata(target: { providerMetadata?: ProviderMetadata }, md: unknown): void {
  if (!md || typeof md !== 'object') return;
  const into = (target.providerMetadata ??= {});
  for (const [provider, values] of Object.entries(md as ProviderMetadata)) {
    into[provider] = { ...(into[provider] ?? {}), ...values };
  }
}

/**
 * Assembles stream parts into the final assistant content, in the order parts started,
 * and reports deltas as they arrive.
 */
class ContentAssembler {
  readonly content: AssistantMessage['content'] = [];
  private readonly texts = new Map<string, TextPart>();
  private readonly reasonings = new Map<string, ReasoningPart>();
  private readonly toolNames = new Map<string, string>();
  private readonly onDelta: ((d: ModelDelta) => void) | undefined;

  constructor(onDelta?: (d: ModelDelta) => void) {
    this.onDelta = onDelta;
  }

  private text(id: string): TextPart {
    let p = this.texts.get(id);
    if (!p) {
      p = { type: 'text', text: '' };
      this.texts.set(id, p);
      this.content.push(p);
    }
    return p;
  }

  private reasoning(id: string): ReasoningPart {
    let p = this.reasonings.get(id);
    if (!p) {
      p = { type: 'reasoning', text: '' };
      this.reasonings.set(id, p);
      this.content.push(p);
    }
    return p;
  }

  accept(part: LanguageModelV4StreamPart): void {
    switch (part.type) {
      case 'text-start':
        this.text(part.id);
        break;
      case 'text-delta':
        this.text(part.id).text += part.delta;
        if (part.delta) this.onDelta?.({ kind: 'text', delta: part.delta });
        break;
      case 'reasoning-start':
      case 'reasoning-end':
        mergeMetadata(this.reasoning(part.id), part.providerMetadata);
        break;
      case 'reasoning-delta': {
        const r = this.reasoning(part.id);
        r.text += part.delta;
        mergeMetadata(r, part.providerMetadata);
        if (part.delta) this.onDelta?.({ kind: 'reasoning', delta: part.delta });
        break;
      }
      case 'tool-input-start':
        this.toolNames.set(part.id, part.toolName);
        break;
      case 'tool-input-delta':
        this.onDelta?.({
          kind: 'tool-input',
          toolCallId: part.id,
          toolName: this.toolNames.get(part.id) ?? '',
          delta: part.delta,
        });
        break;
      case 'tool-call':
        // Tools the provider executed itself are not Keel's to run or replay.
        if (!part.providerExecuted) {
          const call: ToolCallPart = {
            type: 'tool-call',
            toolCallId: part.toolCallId,
            toolName: part.toolName,
            input: parseToolInput(part.input),
          };
          this.content.push(call);
        }
        break;
      default:
        break;
    }
  }

  /** Drops empty text/reasoning parts that only opened. Reasoning with a signature is kept even when empty. */
  finalContent(): AssistantMessage['content'] {
    return this.content.filter((p) =>
      p.type === 'text'
        ? p.text.length > 0
        : p.type === 'reasoning'
          ? p.text.length > 0 || p.providerMetadata !== undefined
          : true,
    );
  }
}

/**
 * One model call: exactly one provider request, streamed. Resolves with the normalized result;
 * rejects with a classified ModelCallError carrying whatever content arrived before the failure.
 */
export async function callModel(
  model: LanguageModelV4,
  options: ModelCallOptions,
  signal: AbortSignal,
  onDelta?: (d: ModelDelta) => void,
): Promise<ModelCallResult> {
  const startedAt = Date.now();
  const t0 = performance.now();
  const assembler = new ContentAssembler(onDelta);
  let firstChunkMs: number | undefined;
  let finish: Extract<LanguageModelV4StreamPart, { type: 'finish' }> | undefined;
  let responseId: string | undefined;
  let responseModelId: string | undefined;
  let warnings: unknown[] = [];

  try {
    signal.throwIfAborted();
    const { stream } = await model.doStream({ ...options, abortSignal: signal });
    const reader = stream.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        firstChunkMs ??= performance.now() - t0;
        switch (value.type) {
          case 'error':
            throw classifyModelError(value.error, signal.aborted);
          case 'finish':
            finish = value;
            break;
          case 'response-metadata':
            responseId = value.id ?? responseId;
            responseModelId = value.modelId ?? responseModelId;
            break;
          case 'stream-start':
            warnings = value.warnings;
            break;
          default:
            assembler.accept(value);
        }
        if (signal.aborted) throw classifyModelError(signal.reason, true);
      }
    } catch (error) {
      // Stop the provider request too: nothing after an error or an abort is wanted.
      await reader.cancel().catch(() => {});
      throw error;
    } finally {
      // Let go of the stream, read to its end or not: nothing here reads it again.
      reader.releaseLock();
    }
    // Providers synthesize a finish with reason 'interrupted' when the stream ends without their
    // completion signal (no [DONE] / finish_reason, response.completed or message_stop): the
    // output is truncated exactly as when no finish part arrives at all.
    if (!finish || finish.finishReason.unified === 'interrupted') {
      throw new ModelCallError({
        kind: signal.aborted ? 'aborted' : 'transient',
        message: 'model stream ended without a finish part',
      });
    }
  } catch (error) {
    const e = classifyModelError(error, signal.aborted);
    e.partial = assembler.finalContent();
    throw e;
  }

  return {
    content: assembler.finalContent(),
    usage: normalizeUsage(finish.usage),
    finishReason: finish.finishReason.unified,
    ...(finish.finishReason.raw !== undefined ? { rawFinishReason: finish.finishReason.raw } : {}),
    ...(responseId !== undefined ? { responseId } : {}),
    ...(responseModelId !== undefined ? { responseModelId } : {}),
    warnings,
    timing: {
      startedAt,
      ...(firstChunkMs !== undefined ? { firstChunkMs: Math.round(firstChunkMs) } : {}),
      durationMs: Math.round(performance.now() - t0),
    },
  };
}
