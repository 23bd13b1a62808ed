import {
  callModel,
  classifyModelError,
  ModelCallError,
  retryDelayMs,
  sleep,
  type ModelCallResult,
  type ModelDelta,
} from '../model/index.ts';
import type { ContentBlob, RequestHeader, ToolSchema } from './events.ts';
import { newId } from './ids.ts';
import { contentHash, promptFingerprint } from './prompt-hash.ts';
import type { Tool } from './tools.ts';
import { settingsRecord, type TurnState } from './turn-state.ts';

export type ModelRequestResult =
  { ok: true; result: ModelCallResult; messageId: string } | { ok: false; error: ModelCallError; messageId: string };

interface Content {
  hash: string;
  blob: ContentBlob;
}

// A tool set changes only at step boundaries: its schemas and their content hash are built once.
const toolContent = new WeakMap<Map<string, Tool>, { schemas: ToolSchema[]; content: Content | undefined }>();
function toolsOf(tools: Map<string, Tool>): { schemas: ToolSchema[]; content: Content | undefined } {
  let r = toolContent.get(tools);
  if (!r) {
    const schemas = [...tools.values()].map((t) => t.schema);
    const data = JSON.stringify(schemas);
    const hash = contentHash(data);
    toolContent.set(tools, (r = { schemas, content: schemas.length > 0 ? { hash, blob: { hash, data } } : undefined }));
  }
  return r;
}

// A system prompt function may render a new text per step: the last text's hash is kept.
let lastSystem: { text: string; content: Content } | undefined;
function systemContent(text: string): Content {
  if (lastSystem?.text !== text) {
    const data = JSON.stringify(text);
    const hash = contentHash(data);
    lastSystem = { text, content: { hash, blob: { hash, data } } };
  }
  return lastSystem.content;
}

/**
 * The request header of the next model call: constant in size (ADR-0008). The system prompt and
 * tool schemas go by content hash, their text attached once per turn so the log stores it once;
 * the context goes by reference; the fingerprint extends the previous step's running hash.
 */
function requestHeader(
  t: TurnState,
  attempt: number,
  messageId: string,
): { header: RequestHeader; system: string | undefined; schemas: ToolSchema[]; blobs: ContentBlob[] } {
  const system = typeof t.system === 'function' ? t.system({ turn: t.turnNo, step: t.stepNo }) : t.system;
  const settings = settingsRecord(t.settings);
  const tools = toolsOf(t.tools);
  const sys = system !== undefined ? systemContent(system) : undefined;
  const blobs: ContentBlob[] = [];
  for (const c of [sys, tools.content]) {
    if (c && !t.attached.has(c.hash)) {
      t.attached.add(c.hash);
      blobs.push(c.blob);
    }
  }
  const parts = { system: sys?.hash ?? null, tools: tools.content?.hash ?? null, settings };
  const conversation = t.conversation;
  return {
    system,
    schemas: tools.schemas,
    blobs,
    header: {
      provider: t.model.provider,
      modelId: t.model.modelId,
      attempt,
      messageId,
      // In the order of the stored schema: live subscribers see what readers of the log see.
      settings,
      system: parts.system,
      tools: parts.tools,
      context: {
        messages: conversation.length,
        first: conversation[0]?.id ?? null,
        last: conversation.at(-1)?.id ?? null,
      },
      promptHash: promptFingerprint(parts, t.chain.of(conversation)),
    },
  };
}

/**
 * One model call of a step, with retries for transient errors and one compaction retry on
 * overflow. Each attempt's header is reported first; a request in flight at a crash is simply
 * made again, so the header needs no durable point of its own: it rides in the step's commit.
 */
export async function requestModel(t: TurnState): Promise<ModelRequestResult> {
  let overflowRetried = false;
  for (let attempt = 1; ; attempt++) {
    const messageId = newId();
    const { header, system, schemas, blobs } = requestHeader(t, attempt, messageId);
    await t.emit('request/header', header, { blobs });
    const ctl = new AbortController();
    const onTurnAbort = () => ctl.abort(t.turnCtl.signal.reason);
    t.turnCtl.signal.addEventListener('abort', onTurnAbort, { once: true });
    t.callCtl = ctl;
    const step = t.stepNo;
    const sink = t.sink;
    const onDelta = sink.delta
      ? (d: ModelDelta) => {
          const base = { turn: t.turnNo, step, messageId };
          sink.delta!(
            d.kind === 'tool-input'
              ? { type: 'tool-input/delta', ...base, toolCallId: d.toolCallId, toolName: d.toolName, delta: d.delta }
              : { type: d.kind === 'text' ? 'text/delta' : 'reasoning/delta', ...base, delta: d.delta },
          );
        }
      : undefined;
    try {
      const result = await callModel(
        t.model,
        {
          prompt: t.prompt.build(system, t.conversation),
          ...(t.tools.size > 0
            ? {
                tools: schemas.map((s) => ({
                  type: 'function' as const,
                  name: s.name,
                  description: s.description,
                  inputSchema: s.inputSchema as object,
                })),
              }
            : {}),
          ...t.settings,
        },
        ctl.signal,
        onDelta,
      );
      return { ok: true, result, messageId };
    } catch (e) {
      const error = classifyModelError(e, ctl.signal.aborted);
      if (error.kind === 'aborted') return { ok: false, error, messageId };
      const delayMs = retryDelayMs(t.agent.retry, attempt, error);
      if (delayMs !== undefined) {
        await t.emit('model/retry', { attempt, delayMs, error: error.toJSON(), abandonedMessageId: messageId });
        try {
          // The attempt's own signal: both cancel() and cancelModelCall() end the wait.
          await sleep(delayMs, ctl.signal);
        } catch {
          return {
            ok: false,
            error: new ModelCallError(
              { kind: 'aborted', message: 'model call aborted during retry backoff' },
              { cause: error },
            ),
            messageId,
          };
        }
        continue;
      }
      const willCompact = error.kind === 'context_overflow' && !overflowRetried && t.hooks.some((h) => h.compact);
      await t.emit('model/error', { attempt, error: error.toJSON(), willCompact });
      if (willCompact && (await t.compact('overflow'))) {
        overflowRetried = true;
        continue;
      }
      return { ok: false, error, messageId };
    } finally {
      t.callCtl = undefined;
      t.turnCtl.signal.removeEventListener('abort', onTurnAbort);
    }
  }
}
