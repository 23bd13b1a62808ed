import { createHash } from 'node:crypto';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { createUIMessageStreamResponse, type UIMessageChunk } from 'ai';
import type { DeltaEvent, UserInput } from '../../core/index.ts';
import type {
  AssistantMessage,
  JsonValue,
  ReasoningPart,
  TextPart,
  ToolOutput,
  UserMessage,
} from '../../model/index.ts';
import { SETTLED_STATUSES, WAITING_FOR_PEOPLE, type RecordedSend, type Waiting } from '../../runs/index.ts';
import { FeedOverflowError, follow, type SessionEvent } from '../../session/index.ts';
import type { RunRecord, RunStatus } from '../../store/index.ts';
import { traceOfRequest } from '../../telemetry/trace-context.ts';
import type { AppContext, AppEnv } from '../app.ts';
import { HttpProblem, toProblem } from '../problems.ts';
import { LIMITS, plainText, ProblemSchema } from '../schemas.ts';
import { sessionFor } from './sessions.ts';

/**
 * The AI SDK UI message stream protocol (v1, as spoken by `ai` v7's `useChat` / `Chat` with
 * `DefaultChatTransport`), on top of Keel's sessions and runs.
 *
 * One run is one assistant UI message, whose id is the run id: its steps are `step-start` parts,
 * text and reasoning stream from the live deltas, tool calls are tool parts, an approval is the
 * tool part's `approval` (its id is the tool call id), and an `ask_user` question is an
 * `ask_user` tool part the client answers with `addToolOutput`. A stream ends with `finish` when
 * the run settles: completed (`stop`), waiting for an approval or an answer (`tool-calls`),
 * paused or cancelled (`other`); a failed or timed-out run sends `error`.
 *
 * A client (the chat id can be anything; the session id is a natural choice):
 *
 *   useChat({
 *     id: sessionId,
 *     transport: new DefaultChatTransport({
 *       api: `${base}/v1/sessions/${sessionId}/chat`,
 *       headers: { authorization: `Bearer ${apiKey}` },
 *       // optional: the server reads only the last message
 *       prepareSendMessagesRequest: ({ messages, id, trigger, messageId }) => ({ body: { id, trigger, messageId, messages: messages.slice(-1) } }),
 *     }),
 *     sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses, // optional
 *     resume: true, // optional: reattach to a running run on mount
 *   })
 *
 * `resumeStream()` GETs the transport's default reconnect URL, `${api}/${chatId}/stream`, served
 * here for any chat id (as is `${api}/stream`).
 */

/** How often an idle stream re-reads the log (events written by workers in other processes). */
const POLL_MS = 1000;

type Chunk = UIMessageChunk;
type Streamed = { kind: 'text' | 'reasoning'; id: string; text: string };

const isBlank = (p: TextPart | ReasoningPart) => p.text === '';

function uiParts(
  m: UserMessage,
): Array<{ type: 'text'; text: string } | { type: 'file'; mediaType: string; url: string; filename?: string }> {
  return m.content.map((p) =>
    p.type === 'text'
      ? { type: 'text' as const, text: p.text }
      : {
          type: 'file' as const,
          mediaType: p.mediaType,
          url: /^https?:\/\//.test(p.data) ? p.data : `data:${p.mediaType};base64,${p.data}`,
          ...(p.filename ? { filename: p.filename } : {}),
        },
  );
}

/**
 * Translates one run's durable events and live deltas into UI message chunks, in order. Deltas
 * stream text as it is generated; the durable `assistant/message` then completes what they
 * started (or, when they were not seen, e.g. in a replay, sends the message whole).
 */
export class UiChunkMapper {
  /** The run's status as of the last `run/status` event seen (or as given). */
  status: RunStatus | undefined;
  private readonly runId: string;
  private readonly sessionId: string;
  private error: string | undefined;
  /** The model message being streamed: its parts as the deltas made them, and its tool inputs. */
  private cur: { messageId: string; parts: Streamed[]; open: Streamed | undefined; tools: Set<string> } | undefined;
  /** Messages whose streamed parts were ended (another message started) before their durable version came. */
  private readonly ended = new Map<string, Streamed[]>();
  private readonly finished = new Set<string>();
  private stepOpen = false;
  /** The open step was opened by the deltas of its message, before its step/start was published. */
  private stepOpenedByDeltas = false;

  constructor(o: { runId: string; sessionId: string; status?: RunStatus }) {
    this.runId = o.runId;
    this.sessionId = o.sessionId;
    this.status = o.status;
  }

  start(messageId: string): Chunk[] {
    return [{ type: 'start', messageId, messageMetadata: { runId: this.runId, sessionId: this.sessionId } }];
  }

  delta(d: DeltaEvent): Chunk[] {
    if (this.finished.has(d.messageId)) return [];
    const out: Chunk[] = [];
    // A step's durable events are published when it commits, after the deltas of its message
    // (ADR-0008): the deltas open the step.
    if (!this.stepOpen) {
      this.stepOpen = true;
      this.stepOpenedByDeltas = true;
      out.push({ type: 'start-step' });
    }
    if (this.cur?.messageId !== d.messageId) {
      if (this.cur) this.ended.set(this.cur.messageId, this.cur.parts);
      out.push(...this.closeParts());
      this.cur = { messageId: d.messageId, parts: [], open: undefined, tools: new Set() };
    }
    const cur = this.cur!;
    if (d.type === 'tool-input/delta') {
      cur.open = undefined;
      if (!cur.tools.has(d.toolCallId)) {
        cur.tools.add(d.toolCallId);
        out.push({ type: 'tool-input-start', toolCallId: d.toolCallId, toolName: d.toolName });
      }
      out.push({ type: 'tool-input-delta', toolCallId: d.toolCallId, inputTextDelta: d.delta });
      return out;
    }
    const kind = d.type === 'text/delta' ? 'text' : 'reasoning';
    let part = cur.open;
    if (part?.kind !== kind) {
      part = { kind, id: `${d.messageId}:${cur.parts.length}`, text: '' };
      cur.parts.push(part);
      cur.open = part;
      out.push(kind === 'text' ? { type: 'text-start', id: part.id } : { type: 'reasoning-start', id: part.id });
    }
    part.text += d.delta;
    out.push(
      kind === 'text'
        ? { type: 'text-delta', id: part.id, delta: d.delta }
        : { type: 'reasoning-delta', id: part.id, delta: d.delta },
    );
    return out;
  }

  event(e: SessionEvent): Chunk[] {
    switch (e.type) {
      case 'step/start':
        if (this.stepOpenedByDeltas) {
          // Its deltas opened it already.
          this.stepOpenedByDeltas = false;
          return [];
        }
        this.stepOpen = true;
        return [...this.closeParts(), { type: 'start-step' }];
      case 'step/end':
        this.stepOpen = false;
        this.stepOpenedByDeltas = false;
        return [...this.closeParts(), { type: 'finish-step' }];
      case 'assistant/message':
        return this.assistant(e.data.message);
      case 'model/retry':
        this.finished.add(e.data.abandonedMessageId);
        this.ended.delete(e.data.abandonedMessageId);
        return this.discard();
      case 'model/error':
        // A retry after compaction streams the step again; otherwise the step ends failed.
        return e.data.willCompact ? this.discard() : [];
      case 'run/interrupted':
        // The worker was lost mid-call: the call is made again when the run is resumed.
        return this.discard();
      case 'tool/approval':
        return [{ type: 'tool-approval-request', approvalId: e.data.toolCallId, toolCallId: e.data.toolCallId }];
      case 'tool/decision':
        return [
          {
            type: 'tool-approval-response',
            approvalId: e.data.toolCallId,
            approved: e.data.approved,
            ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
          },
        ];
      case 'tool/result':
        return [this.result(e.data.toolCallId, e.data.output)];
      case 'user/message':
        // The trigger message is the client's own; steering joins the run as it runs.
        return e.data.via === 'steer'
          ? [{ type: 'steering-message', id: e.data.message.id, parts: uiParts(e.data.message) }]
          : [];
      case 'turn/end':
        if (e.data.error) this.error = e.data.error.message;
        return [];
      case 'run/status': {
        this.status = e.data.to;
        const msg = (e.data.error as { message?: unknown } | undefined)?.message;
        if (typeof msg === 'string') this.error = msg;
        return [];
      }
      default:
        return [];
    }
  }

  /** The closing chunks once the run has settled. */
  finish(): Chunk[] {
    const out = this.closeParts();
    if (this.stepOpen) out.push({ type: 'finish-step' });
    this.stepOpen = false;
    const metadata = { runId: this.runId, sessionId: this.sessionId, status: this.status };
    switch (this.status) {
      case 'failed':
      case 'timed_out':
        out.push({
          type: 'error',
          errorText: this.error ?? (this.status === 'failed' ? 'the run failed' : 'the run timed out'),
        });
        out.push({ type: 'finish', finishReason: 'error', messageMetadata: metadata });
        break;
      case 'completed':
        out.push({ type: 'finish', finishReason: 'stop', messageMetadata: metadata });
        break;
      case 'waiting_approval':
      case 'waiting_for_user':
        out.push({ type: 'finish', finishReason: 'tool-calls', messageMetadata: metadata });
        break;
      default:
        out.push({ type: 'finish', finishReason: 'other', messageMetadata: metadata });
    }
    return out;
  }

  /** Ends the parts the deltas opened (their message will not complete them). */
  private closeParts(): Chunk[] {
    const cur = this.cur;
    this.cur = undefined;
    if (!cur) return [];
    return cur.parts.map((p): Chunk =>
      p.kind === 'text' ? { type: 'text-end', id: p.id } : { type: 'reasoning-end', id: p.id },
    );
  }

  /** Takes back what the deltas of an abandoned model call added to the step. */
  private discard(): Chunk[] {
    const cur = this.cur;
    this.cur = undefined;
    return cur && (cur.parts.length > 0 || cur.tools.size > 0) ? [{ type: 'reset-step' }] : [];
  }

  private assistant(m: AssistantMessage): Chunk[] {
    const out: Chunk[] = [];
    const cur = this.cur?.messageId === m.id ? this.cur : undefined;
    const ended = cur ? undefined : this.ended.get(m.id);
    this.ended.delete(m.id);
    this.finished.add(m.id);
    const finals = m.content.filter((p): p is TextPart | ReasoningPart => p.type !== 'tool-call' && !isBlank(p));
    if (ended) {
      // Its parts streamed and were ended when the next message started: send only what they lacked, as new parts.
      const covered =
        ended.length <= finals.length && ended.every((s, i) => s.kind === finals[i]!.type && finals[i]!.text === s.text)
          ? ended.length
          : 0;
      return [...wholeParts(m, finals, covered, `${m.id}:final`)];
    }
    if (!cur) out.push(...this.closeParts());
    this.cur = undefined;
    let streamed = cur?.parts ?? [];
    const matches =
      streamed.length <= finals.length &&
      streamed.every((s, i) => s.kind === finals[i]!.type && finals[i]!.text.startsWith(s.text));
    if (!matches) {
      // The deltas do not add up to the message (should not happen): send the message instead.
      out.push({ type: 'reset-step' });
      streamed = [];
    }
    streamed.forEach((s, i) => {
      const rest = finals[i]!.text.slice(s.text.length);
      if (s.kind === 'text')
        out.push(...(rest ? [{ type: 'text-delta' as const, id: s.id, delta: rest }] : []), {
          type: 'text-end',
          id: s.id,
        });
      else
        out.push(...(rest ? [{ type: 'reasoning-delta' as const, id: s.id, delta: rest }] : []), {
          type: 'reasoning-end',
          id: s.id,
        });
    });
    out.push(...wholeParts(m, finals, streamed.length, m.id));
    return out;
  }

  private result(toolCallId: string, output: ToolOutput): Chunk {
    if (output.type !== 'error') return { type: 'tool-output-available', toolCallId, output: output.value };
    if (output.code === 'denied') return { type: 'tool-output-denied', toolCallId };
    return { type: 'tool-output-error', toolCallId, errorText: output.message };
  }
}

interface RunStreamOptions {
  sessionId: string;
  runId: string;
  /** Stream the run's events after this session seq (0: the whole run, a replay). */
  after: number;
  /** The id of the assistant UI message the stream writes (`start.messageId`). */
  messageId: string;
  /** The run's status before the events after `after` (for a continuation). */
  status?: RunStatus;
}

/**
 * The UI message chunks of one run: its feed (`follow`, the one live feed) from `after`, mapped
 * to the AI SDK's chunks, until the run settles. Cancelling it (the client went away) only ends the
 * stream: the run goes on. A client that leaves `sseQueueLimit` chunks unread loses the connection
 * (it resumes).
 */
function runChunks(ctx: AppContext, o: RunStreamOptions, errorText: (e: unknown) => string): ReadableStream<Chunk> {
  const closed = new AbortController();
  let open = false;
  const opened = () => {
    open = true;
    ctx.metrics.sseConnections.inc();
    ctx.metrics.sseConnectionsTotal.inc();
  };
  const cleanup = () => {
    if (!open) return;
    open = false;
    ctx.metrics.sseConnections.dec();
  };

  const pump = async (controller: ReadableStreamDefaultController<Chunk>) => {
    const mapper = new UiChunkMapper({
      runId: o.runId,
      sessionId: o.sessionId,
      ...(o.status ? { status: o.status } : {}),
    });
    const settled = () => mapper.status !== undefined && SETTLED_STATUSES.includes(mapper.status);
    const emit = (chunks: Chunk[]) => {
      if (closed.signal.aborted) return;
      for (const c of chunks) controller.enqueue(c);
      // desiredSize goes below zero by the chunks the client has not read yet (the response
      // body pulls only as fast as the socket drains).
      if ((controller.desiredSize ?? 0) < -ctx.options.sseQueueLimit) throw new FeedOverflowError();
    };
    emit(mapper.start(o.messageId));
    const feed = follow(ctx.rt.sessions.log, o.sessionId, {
      after: { seq: o.after, n: 0 },
      runId: o.runId,
      endAt: (e) => e.type === 'run/status' && SETTLED_STATUSES.includes(e.data.to),
      isDone: settled,
      pollMs: POLL_MS,
      queueLimit: ctx.options.sseQueueLimit,
      signal: closed.signal,
    });
    for await (const item of feed) emit(item.kind === 'event' ? mapper.event(item.event) : mapper.delta(item.delta));
    if (!closed.signal.aborted) emit(mapper.finish());
  };

  return new ReadableStream<Chunk>({
    start(controller) {
      opened();
      pump(controller).then(
        () => {
          cleanup();
          if (!closed.signal.aborted) controller.close();
        },
        (e: unknown) => {
          cleanup();
          if (closed.signal.aborted) return;
          // A client too far behind loses the connection (it resumes); other errors are told.
          if (e instanceof FeedOverflowError) {
            ctx.metrics.sseDropped.inc();
            return controller.error(e);
          }
          controller.enqueue({ type: 'error', errorText: errorText(e) });
          controller.close();
        },
      );
    },
    cancel() {
      closed.abort();
      cleanup();
    },
  });
}

/**
 * The response: the AI SDK's SSE framing (`data: <chunk>`, `data: [DONE]`), its headers and
 * keep-alive comments. The chunk stream is handed over directly (not merged through
 * `createUIMessageStream`, which buffers without limit), so a client that stops reading holds
 * back the stream and is dropped once `sseQueueLimit` chunks are waiting for it.
 */
function streamResponse(ctx: AppContext, c: Context<AppEnv>, o: RunStreamOptions): Response {
  const stream = runChunks(ctx, o, (e) => {
    const p = toProblem(e);
    if (p.type === 'internal')
      process.emitWarning(
        `keel server: ${c.req.method} ${c.req.path}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`,
      );
    return p.detail;
  });
  return createUIMessageStreamResponse({ stream, keepAliveMs: ctx.options.heartbeatMs });
}

// What the chat client sends: AI SDK UI messages. Only the last message is read, so a client may
// send just that one (see prepareSendMessagesRequest); other fields are ignored.
const UIPart = z.looseObject({ type: z.string() });
// A user message's id is kept as text (its idempotency key): never NUL.
const UIMessageSchema = z.looseObject({
  id: plainText(LIMITS.id),
  role: z.enum(['system', 'user', 'assistant']),
  parts: z.array(UIPart),
});
const ChatRequest = z
  .looseObject({
    id: z.string().optional().describe('The chat id (ignored: the session is the chat)'),
    messages: z.array(UIMessageSchema).min(1),
    trigger: z.enum(['submit-message', 'regenerate-message']).default('submit-message'),
    messageId: z.string().optional(),
  })
  .openapi('ChatRequest');
type UIMessageIn = z.infer<typeof UIMessageSchema>;
type UIPartIn = z.infer<typeof UIPart>;

/** A user UI message as Keel input: its text and file parts. */
function userInputOf(m: UIMessageIn): UserInput {
  const content: Exclude<UserInput, string> = [];
  for (const p of m.parts) {
    if (p.type === 'text' && typeof p.text === 'string') {
      if (p.text !== '') content.push({ type: 'text', text: p.text });
    } else if (p.type === 'file' && typeof p.url === 'string' && typeof p.mediaType === 'string') {
      const filename = typeof p.filename === 'string' ? { filename: p.filename } : {};
      if (/^https?:\/\//i.test(p.url)) {
        content.push({ type: 'file', mediaType: p.mediaType, data: p.url, ...filename });
        continue;
      }
      const data = /^data:([^,]*?)(;base64)?,(.*)$/s.exec(p.url);
      if (!data) throw new HttpProblem('validation', 'messages: a file part needs an http(s) URL or a data: URL');
      let base64 = data[3]!;
      if (!data[2]) {
        try {
          base64 = Buffer.from(decodeURIComponent(base64), 'utf8').toString('base64');
        } catch {
          throw new HttpProblem('validation', 'messages: a file part has a malformed data: URL');
        }
      }
      content.push({ type: 'file', mediaType: p.mediaType, data: base64, ...filename });
    }
  }
  if (content.length === 0)
    throw new HttpProblem('validation', 'messages: the last user message has no text or file part');
  return content;
}

type ToolPartIn = UIPartIn & {
  toolCallId: string;
  state: string;
  approval?: { id?: unknown; approved?: unknown; reason?: unknown };
  output?: unknown;
  errorText?: unknown;
};
const isToolPart = (p: UIPartIn): p is ToolPartIn =>
  (p.type.startsWith('tool-') || p.type === 'dynamic-tool') &&
  typeof p.toolCallId === 'string' &&
  typeof p.state === 'string';

/**
 * Applies what the last assistant message answers: approval responses (`addToolApprovalResponse`)
 * and ask_user outputs (`addToolOutput`) for the session's waiting run. Returns the run as it was
 * before (what the continuation streams on from).
 */
async function applyAnswers(ctx: AppContext, sessionId: string, m: UIMessageIn): Promise<RunRecord> {
  const { rt } = ctx;
  const run = await ctx.rt.runs.active(sessionId);
  if (!run || !WAITING_FOR_PEOPLE.includes(run.status)) {
    throw new HttpProblem(
      'conflict',
      `session ${sessionId} has no run waiting for an approval or an answer`,
      run ? { active_run_id: run.id, status: run.status } : {},
    );
  }
  const waiting = run.waiting as unknown as Waiting | null;
  const open = new Map((waiting?.calls ?? []).map((c) => [c.toolCallId, c]));
  const tools = m.parts.filter(isToolPart);
  const approvals = tools.filter(
    (p) =>
      p.state === 'approval-responded' &&
      open.get(typeof p.approval?.id === 'string' ? p.approval.id : p.toolCallId)?.kind === 'approval',
  );
  const answers = tools.filter(
    (p) => (p.state === 'output-available' || p.state === 'output-error') && open.get(p.toolCallId)?.kind === 'input',
  );
  if (approvals.length === 0 && answers.length === 0) {
    throw new HttpProblem('validation', `messages: the last message answers none of what run ${run.id} waits for`, {
      run_id: run.id,
      pending: [...open.values()].map((c) => ({ tool_call_id: c.toolCallId, tool: c.toolName, kind: c.kind })),
    });
  }
  let current = run;
  for (const p of approvals) {
    const id = typeof p.approval?.id === 'string' ? p.approval.id : p.toolCallId;
    const reason = typeof p.approval?.reason === 'string' ? { reason: p.approval.reason } : {};
    current =
      p.approval?.approved === true ? await rt.runs.approve(run.id, id) : await rt.runs.deny(run.id, id, reason);
  }
  // Questions are answered once every approval is decided (the run says which it waits for).
  if (current.status === 'waiting_for_user') {
    for (const p of answers) {
      const answer =
        p.state === 'output-available'
          ? ((p.output ?? null) as JsonValue)
          : { error: typeof p.errorText === 'string' ? p.errorText : 'no answer' };
      await rt.runs.input(run.id, answer, { toolCallId: p.toolCallId });
    }
  }
  return run;
}

const problems = {
  400: { description: 'Invalid request', content: { 'application/problem+json': { schema: ProblemSchema } } },
  401: {
    description: 'Missing or invalid API key',
    content: { 'application/problem+json': { schema: ProblemSchema } },
  },
  404: {
    description: 'No such session (or not yours)',
    content: { 'application/problem+json': { schema: ProblemSchema } },
  },
  409: {
    description: 'The session has an active run (a new message), or nothing waits for this answer',
    content: { 'application/problem+json': { schema: ProblemSchema } },
  },
} as const;
const IdParam = z.object({
  id: z
    .string()
    .min(1)
    .openapi({ param: { name: 'id', in: 'path' } }),
});
const STREAM_DESCRIPTION =
  'An AI SDK UI message stream (SSE, `x-vercel-ai-ui-message-stream: v1`): `start` (messageId = run id), `start-step`/`finish-step` per step, text and reasoning parts, tool parts (`tool-input-*`, `tool-approval-request` with approvalId = tool call id, `tool-output-*`), then `finish` when the run settles (or `error` when it failed)';

/** The AI SDK UI message stream endpoints (POST /v1/sessions/{id}/chat, GET …/chat/stream). */
export function chatRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/chat',
      tags: ['chat'],
      summary:
        'AI SDK chat: send the next user message, or approval responses and ask_user answers, and stream the run',
      description:
        'The body `DefaultChatTransport` sends (`{ id, messages, trigger, messageId }`); only the last message is read. A user message starts a run (409 if one is active); an assistant message carrying approval responses (`addToolApprovalResponse`) or ask_user outputs (`addToolOutput`) decides the waiting run. The response streams that run until it settles.',
      request: { params: IdParam, body: { content: { 'application/json': { schema: ChatRequest } }, required: true } },
      responses: {
        200: { description: STREAM_DESCRIPTION, content: { 'text/event-stream': { schema: z.string() } } },
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const b = c.req.valid('json');
      if (b.trigger === 'regenerate-message')
        throw new HttpProblem(
          'validation',
          'trigger: regenerating a message is not supported; fork the session at an entry instead (POST /v1/sessions/{id}/fork)',
        );
      const last = b.messages.at(-1)!;
      if (last.role === 'user') {
        if (b.messageId !== undefined)
          throw new HttpProblem(
            'validation',
            'messageId: editing a sent message is not supported; fork the session at an entry instead (POST /v1/sessions/{id}/fork)',
          );
        // The client's id of the message is its idempotency key, recorded with the send: the same
        // message posted again (a retry after a lost answer) streams the run it started once.
        const claim = {
          tenant: c.get('tenant'),
          key: `chat-message:${s.id}:${last.id}`,
          fingerprint: createHash('sha256').update(JSON.stringify(last.parts)).digest('hex'),
        };
        const seen = await ctx.rt.idempotency.get(claim.tenant, claim.key);
        if (seen) {
          if (seen.fingerprint !== claim.fingerprint)
            throw new HttpProblem(
              'idempotency_mismatch',
              `message ${last.id} was sent before with other content: a new message needs a new id`,
            );
          const effect = JSON.parse(seen.body) as RecordedSend;
          return streamResponse(ctx, c, {
            sessionId: s.id,
            runId: effect.run_id,
            after: 0,
            messageId: effect.run_id,
          }) as never;
        }
        const trace = traceOfRequest(c.req.header('traceparent'), c.req.header('tracestate'));
        const r = await rt.sessions.send(s.id, userInputOf(last), {
          ifBusy: 'reject',
          idempotency: claim,
          ...(s.agent ? { agent: s.agent } : {}),
          ...(trace ? { trace } : {}),
        });
        return streamResponse(ctx, c, { sessionId: s.id, runId: r.run.id, after: 0, messageId: r.run.id }) as never;
      }
      if (last.role !== 'assistant')
        throw new HttpProblem(
          'validation',
          'messages: the last message must be a user message or an assistant message with answers',
        );
      const before = await applyAnswers(ctx, s.id, last);
      // The client continues its message from where it was: only what happens from now on.
      return streamResponse(ctx, c, {
        sessionId: s.id,
        runId: before.id,
        after: s.lastSeq,
        messageId: last.id,
        status: before.status,
      }) as never;
    },
  );

  const resume = async (c: Context<AppEnv>) => {
    const s = await sessionFor(ctx, c, c.req.param('id')!);
    const run = await ctx.rt.runs.active(s.id);
    if (!run) return c.body(null, 204);
    // The whole run again: the client (resumeStreamIsReplay) rebuilds its message from the start.
    return streamResponse(ctx, c, { sessionId: s.id, runId: run.id, after: 0, messageId: run.id });
  };
  app.get('/v1/sessions/:id/chat/stream', resume);
  // DefaultChatTransport's default reconnect URL is `${api}/${chatId}/stream`: any chat id works.
  app.get('/v1/sessions/:id/chat/:chatId/stream', resume);

  for (const path of ['/v1/sessions/{id}/chat/stream', '/v1/sessions/{id}/chat/{chat_id}/stream'] as const) {
    app.openAPIRegistry.registerPath({
      method: 'get',
      path,
      tags: ['chat'],
      summary: path.includes('chat_id')
        ? "Resume the chat stream (DefaultChatTransport's default reconnect URL; the chat id is ignored)"
        : "Resume the chat stream: the session's active run from its start, or 204 when no run is active",
      request: {
        params: path.includes('chat_id')
          ? IdParam.extend({ chat_id: z.string().openapi({ param: { name: 'chat_id', in: 'path' } }) })
          : IdParam,
      },
      responses: {
        200: { description: STREAM_DESCRIPTION, content: { 'text/event-stream': { schema: { type: 'string' } } } },
        204: { description: 'No run is active: nothing to resume' },
        401: problems[401],
        404: problems[404],
      },
    });
  }
}

/** The message's parts from `from` on, each sent whole (start, one delta, end), then its tool calls. */
function* wholeParts(
  m: AssistantMessage,
  finals: ReadonlyArray<TextPart | ReasoningPart>,
  from: number,
  idPrefix: string,
): Generator<Chunk> {
  for (let i = from; i < finals.length; i++) {
    const p = finals[i]!;
    const id = `${idPrefix}:${i}`;
    if (p.type === 'text')
      yield* [
        { type: 'text-start', id },
        { type: 'text-delta', id, delta: p.text },
        { type: 'text-end', id },
      ] as const;
    else
      yield* [
        { type: 'reasoning-start', id },
        { type: 'reasoning-delta', id, delta: p.text },
        { type: 'reasoning-end', id },
      ] as const;
  }
  for (const p of m.content) {
    if (p.type === 'tool-call')
      yield { type: 'tool-input-available', toolCallId: p.toolCallId, toolName: p.toolName, input: p.input };
  }
}
