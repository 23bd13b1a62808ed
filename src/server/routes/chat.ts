import { createHash } from 'node:crypto';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { createUIMessageStreamResponse } from 'ai';
import type { UserInput } from '../../core/index.ts';
import type { JsonValue } from '../../model/index.ts';
import { SETTLED_STATUSES, WAITING_FOR_PEOPLE, type RecordedSend, type Waiting } from '../../runs/index.ts';
import { eventPosition, FeedOverflowError, follow } from '../../session/index.ts';
import type { RunRecord, RunStatus } from '../../store/index.ts';
import { UiChunkMapper, type Chunk } from '../ui-chunks.ts';
import { traceOfRequest } from '../../telemetry/trace-context.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, problem, problems as problemsOf } from '../openapi.ts';
import { sessionFor } from '../lookups.ts';
import { HttpProblem, toProblem } from '../problems.ts';
import { LIMITS, plainText } from '../schemas.ts';

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
      after: eventPosition(o.after),
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
  ...problemsOf('session'),
  409: problem('The session has an active run (a new message), or nothing waits for this answer'),
} as const;
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
      request: { params: IdParam, ...body(ChatRequest) },
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
