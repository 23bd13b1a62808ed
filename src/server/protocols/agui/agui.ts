/**
 * AG-UI (issue 41, ADR-0038, docs/protocols.md): `POST /agui/{agent}` takes a `RunAgentInput` and
 * streams the run as AG-UI events (SSE, through @ag-ui/encoder). Thread = Keel session (created
 * for the caller's tenant when new), run = Keel run; `{agent}` is a Keel agent, `name` or
 * `name@version`.
 *
 * - New user messages start a run. The same messages posted again (by id) start nothing: the
 *   response streams the run they started, from the start or after `Last-Event-ID`.
 * - An approval or a question ends the AG-UI run with an `interrupt` outcome; the next POST
 *   answers it with `resume` entries, and streams the same Keel run from where it goes on.
 * - `tools` are executed by the client: a call of one ends the AG-UI run (its id in
 *   `pendingToolCallIds`) while the Keel run waits; the next POST's `tool` messages deliver the
 *   outputs, and the same Keel run goes on.
 * - Every event carries an `id:` (agui-stream.ts): a client that reconnects with `Last-Event-ID`
 *   gets the rest, nothing twice. `GET /agui/{agent}/runs/{runId}` (a Keel run id, sent as the
 *   `keel.run` custom event) re-attaches to a run the same way.
 *
 * A client that disconnects does not cancel the run; errors before the stream are problem+json.
 */
import type { Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { EventEncoder } from '@ag-ui/encoder';
import { EventType, type RunAgentInput } from '@ag-ui/core';
import type { JsonValue } from '../../../model/index.ts';
import { FieldValidationError, pendingClientToolCalls, type RecordedSend, type Waiting } from '../../../runs/index.ts';
import { isClientToolSignal } from '../../../core/client-tool.ts';
import type { AgentDefinition } from '../../../core/index.ts';
import { withClientTools } from '../../../runs/client-tools.ts';
import { checkSendOptions } from '../../../runs/send-options.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import { eventPosition, FeedOverflowError, follow } from '../../../session/index.ts';
import { NotFoundError, StoreError, type RunRecord, type SessionRecord } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { HttpProblem } from '../../problems.ts';
import {
  approvalOf,
  clientToolsOf,
  messageFingerprint,
  messageKey,
  parseRunInput,
  refuse,
  refuseUnsupported,
  systemWithContext,
  toolResultOf,
  trailingUserMessages,
  userParts,
} from './agui-input.ts';
import { AguiStreamEncoder } from './agui-stream.ts';

/** How often an idle stream re-reads the log (a safety net for a missed notice). */
const POLL_MS = 1000;

/** Whether the run's stream ends now: the run ended, or it waits for the client's answer or tool outputs. */
function settledForClient(run: RunRecord): boolean {
  return (
    isTerminal(run.status) ||
    run.status === 'waiting_approval' ||
    run.status === 'waiting_for_user' ||
    pendingClientToolCalls(run).length > 0
  );
}

/** `Last-Event-ID` (or `?after=`): the id of the last event the client has. */
function lastEventId(c: Context<AppEnv>): number | undefined {
  const raw = c.req.header('last-event-id') ?? c.req.query('after');
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n))
    throw new HttpProblem('validation', `Last-Event-ID: an event id of this stream, not ${JSON.stringify(raw)}`, {
      field: 'Last-Event-ID',
    });
  return n;
}

export function aguiRoutes(app: Hono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  const sse = new EventEncoder();

  /**
   * The run as AG-UI events, after `after`: its feed from its start through the encoder, until
   * the run ends or waits for the client. A client that disconnects ends only its stream.
   */
  const stream = (c: Context<AppEnv>, run: RunRecord, o: { runId: string; after: number }) =>
    streamSSE(c, async (s) => {
      const closed = new AbortController();
      const drop = () => {
        ctx.metrics.sseDropped.inc();
        s.abort();
        (c.env as { outgoing?: { destroy?: () => void } } | undefined)?.outgoing?.destroy?.();
      };
      s.onAbort(() => closed.abort());
      ctx.metrics.sseConnections.inc();
      ctx.metrics.sseConnectionsTotal.inc();
      let writing = 0;
      const write = async (text: string) => {
        writing++;
        try {
          await s.write(text);
        } finally {
          writing--;
        }
      };
      const heartbeat = setInterval(() => {
        if (writing === 0 && !closed.signal.aborted) void write(': keep-alive\n\n').catch(() => {});
      }, ctx.options.heartbeatMs);
      const encoder = new AguiStreamEncoder({
        threadId: run.sessionId,
        runId: o.runId,
        keelRunId: run.id,
        after: o.after,
      });
      const send = async (events: ReturnType<AguiStreamEncoder['item']>) => {
        for (const e of events) if (!closed.signal.aborted) await write(`id: ${e.id}\n${sse.encodeSSE(e.event)}`);
      };
      try {
        await send(encoder.start());
        const first = (await rt.sessions.log.read(run.sessionId, { runId: run.id, limit: 1 }))[0];
        const feed = follow(rt.sessions.log, run.sessionId, {
          runId: run.id,
          ...(first ? { after: eventPosition(first.seq - 1) } : {}),
          endAt: (e) => encoder.endsAt(e),
          isDone: async () => settledForClient(await rt.runs.get(run.id)),
          pollMs: POLL_MS,
          queueLimit: ctx.options.sseQueueLimit,
          onOverflow: drop,
          signal: closed.signal,
        });
        for await (const item of feed) {
          if (closed.signal.aborted) return;
          await send(encoder.item(item));
        }
      } catch (e) {
        // A client too far behind was dropped: it reconnects with its last event id.
        if (closed.signal.aborted || e instanceof FeedOverflowError) return;
        const message = e instanceof Error ? e.message : String(e);
        process.emitWarning(`keel server: AG-UI stream of run ${run.id}: ${message}`);
        // Without an id: a reconnect resumes after the last event that had one.
        await write(sse.encodeSSE({ type: EventType.RUN_ERROR, message, code: 'stream_error' })).catch(() => {});
      } finally {
        clearInterval(heartbeat);
        closed.abort();
        ctx.metrics.sseConnections.dec();
      }
    });

  /** The thread: the caller's session with this id, created when there is none. */
  const threadFor = async (c: Context<AppEnv>, input: RunAgentInput, agent: string): Promise<SessionRecord> => {
    const existing = await rt.sessions.find(input.threadId);
    if (existing) return sessionFor(ctx, c, input.threadId);
    const first = trailingUserMessages(input.messages)[0]?.message.content;
    const title = typeof first === 'string' ? first.slice(0, 60) : 'AG-UI thread';
    try {
      return await rt.sessions.create({
        id: input.threadId,
        tenant: c.get('tenant'),
        title,
        agent,
        metadata: { via: 'agui' },
      });
    } catch (e) {
      // Created meanwhile (by this tenant's other request, or another tenant's: not found).
      if (e instanceof StoreError && e.code === 'conflict') return sessionFor(ctx, c, input.threadId);
      throw e;
    }
  };

  /** The run a thread's messages were sent in (by the idempotency record of the last one), if they were. */
  const sentBefore = async (c: Context<AppEnv>, s: SessionRecord, input: RunAgentInput) => {
    const trailing = trailingUserMessages(input.messages);
    let known: { index: number; runId: string } | undefined;
    for (const { index, message } of trailing) {
      const record = await rt.idempotency.get(c.get('tenant'), messageKey(s.id, message.id));
      if (!record) continue;
      if (record.fingerprint !== messageFingerprint(message))
        throw new HttpProblem(
          'idempotency_mismatch',
          `messages[${index}]: message ${message.id} was sent to this thread before with other content: a new message needs a new id`,
        );
      known = { index, runId: (JSON.parse(record.body) as RecordedSend).run_id };
    }
    const fresh = trailing.filter((t) => known === undefined || t.index > known.index);
    return { known, fresh };
  };

  /**
   * A request that continues the thread's run: it answers the run's interrupts (`resume`), or
   * delivers the outputs of its calls of the client's tools (`tool` messages after the last
   * assistant message). Undefined when it does neither. Returns the run, and the id of the last
   * event before the first answer: the AG-UI run that asked ended there, and the stream goes on
   * after it. What was answered before (a retry of this request) is not answered again.
   */
  const continuation = async (
    c: Context<AppEnv>,
    s: SessionRecord,
    input: RunAgentInput,
  ): Promise<{ run: RunRecord; after: number } | undefined> => {
    const resume = input.resume ?? [];
    const from = input.messages.findLastIndex((m) => m.role === 'assistant') + 1;
    const toolMessages = input.messages.slice(from).filter((m) => m.role === 'tool');
    if (resume.length === 0 && toolMessages.length === 0) return undefined;
    const run = (await rt.runs.active(s.id)) ?? (await rt.runs.list({ sessionId: s.id, limit: 1000 })).at(-1);
    if (!run) {
      if (resume.length > 0) refuse('resume', `thread ${s.id} has no run to answer`);
      return undefined;
    }
    const asked = new Map<string, 'approval' | 'question' | 'tool'>();
    const answered = new Set<string>();
    for (const e of await rt.sessions.log.read(s.id, { runId: run.id })) {
      if (e.type === 'tool/approval') asked.set(e.data.toolCallId, 'approval');
      if (e.type === 'user/question') asked.set(e.data.toolCallId, 'question');
      if (e.type === 'turn/end')
        for (const p of e.data.pending ?? [])
          if (p.wait?.kind === 'signal' && isClientToolSignal(p.wait.name)) asked.set(p.toolCallId, 'tool');
      if (e.type === 'wait/resolved') answered.add(e.data.toolCallId);
    }
    const results = toolMessages.filter((m) => asked.get(m.toolCallId) === 'tool');
    if (resume.length === 0 && results.length === 0) return undefined;
    if ((await sentBefore(c, s, input)).fresh.length > 0)
      refuse('messages', 'a request that answers the run carries no new user message: send it next');
    const own = new Set(
      ((run.options as { clientTools?: Array<{ name: string }> }).clientTools ?? []).map((t) => t.name),
    );
    input.tools.forEach((t, i) => {
      if (!own.has(t.name))
        refuse(`tools[${i}]`, `run ${run!.id} started without ${t.name}: a new tool comes with a new message`);
    });
    resume.forEach((r, i) => {
      const kind = asked.get(r.interruptId);
      if (kind !== 'approval' && kind !== 'question')
        refuse(`resume[${i}].interruptId`, `run ${run!.id} asked no ${r.interruptId}`);
    });

    const waiting = run.waiting as unknown as Waiting | null;
    const open = (waiting?.calls ?? []).filter(
      (call) => (call.kind === 'approval' || call.kind === 'input') && !waiting?.decisions[call.toolCallId],
    );
    if (resume.length > 0) {
      const missing = open.filter((call) => !resume.some((r) => r.interruptId === call.toolCallId));
      if (missing.length > 0)
        refuse('resume', `answer every interrupt of run ${run.id}: ${missing.map((m) => m.toolCallId).join(', ')}`);
    }
    const due = results.filter((m) => !answered.has(m.toolCallId));
    if (due.length > 0) {
      const missing = pendingClientToolCalls(run).filter((p) => !results.some((m) => m.toolCallId === p.callId));
      if (missing.length > 0)
        refuse(
          'messages',
          `send the output of every tool call run ${run.id} waits for: ${missing.map((m) => m.callId).join(', ')}`,
        );
    }
    // Each answer read first (a bad one refuses them all), then given: approvals first, as the run
    // asks its questions once they are decided.
    type Answer =
      | { id: string; approval: ReturnType<typeof approvalOf>; answer?: never }
      | { id: string; answer: JsonValue; approval?: never };
    const answers = resume.flatMap((r, i): Answer[] => {
      if (!open.some((call) => call.toolCallId === r.interruptId)) return [];
      if (asked.get(r.interruptId) === 'approval') return [{ id: r.interruptId, approval: approvalOf(r, i) }];
      if (r.status === 'resolved' && r.payload === undefined)
        refuse(`resume[${i}].payload`, 'a question is answered with its answer as the payload');
      return [
        { id: r.interruptId, answer: r.status === 'cancelled' ? { error: 'no answer' } : (r.payload as JsonValue) },
      ];
    });
    for (const a of answers.sort((x, y) => Number(x.approval === undefined) - Number(y.approval === undefined))) {
      if (a.approval === undefined) await rt.runs.input(run.id, a.answer, { toolCallId: a.id });
      else if (a.approval.approved)
        await rt.runs.approve(run.id, a.id, a.approval.input ? { input: a.approval.input as JsonValue } : {});
      else await rt.runs.deny(run.id, a.id, { reason: a.approval.reason });
    }
    if (due.length > 0) await rt.runs.submitToolResults(run.id, due.map(toolResultOf), { source: 'api' });
    // The AG-UI run that asked ended at the event before the first answer.
    const ids = new Set([...resume.map((r) => r.interruptId), ...results.map((m) => m.toolCallId)]);
    const encoder = new AguiStreamEncoder({ threadId: s.id, runId: '', keelRunId: run.id });
    encoder.start();
    for (const e of await rt.sessions.log.read(s.id, { runId: run.id })) {
      if (
        (e.type === 'tool/decision' || e.type === 'user/answer' || e.type === 'wait/resolved') &&
        ids.has(e.data.toolCallId)
      )
        break;
      encoder.item({ kind: 'event', event: e });
    }
    return { run, after: encoder.lastId };
  };

  /** The client's tools, checked as a send checks them, at fault named as the input names them. */
  const checkedClientTools = (agent: AgentDefinition, input: RunAgentInput) => {
    if (input.tools.length === 0) return undefined;
    const specs = clientToolsOf(input);
    try {
      checkSendOptions({ clientTools: specs });
      withClientTools(agent, specs);
    } catch (e) {
      if (e instanceof FieldValidationError && e.field.startsWith('clientTools'))
        refuse(e.field.replace('clientTools', 'tools'), e.message.slice(e.field.length + 2));
      throw e;
    }
    return specs;
  };

  const agentOf = (spec: string) => {
    try {
      return rt.agentFor(spec);
    } catch (e) {
      if (e instanceof StoreError && e.code === 'unknown_agent') throw new NotFoundError('agent', spec);
      throw e;
    }
  };

  app.post('/agui/:agent', async (c) => {
    const agentSpec = c.req.param('agent');
    const agent = agentOf(agentSpec);
    const raw: unknown = await c.req.json().catch(() => {
      throw new HttpProblem('bad_json', 'the body is not valid JSON');
    });
    const input = parseRunInput(raw);
    refuseUnsupported(input);
    const after = lastEventId(c);
    const runId = input.runId;

    const thread = await rt.sessions.find(input.threadId);
    if (thread) {
      const continued = await continuation(c, await sessionFor(ctx, c, thread.id), input);
      if (continued) return stream(c, continued.run, { runId, after: after ?? continued.after });
    } else if (input.resume && input.resume.length > 0) throw new NotFoundError('thread', input.threadId);

    const trailing = trailingUserMessages(input.messages);
    if (trailing.length === 0)
      refuse('messages', 'no new user message to send (the thread has the rest), nor an answer to the run');
    if (!thread && trailing[0]!.index > 0)
      refuse(
        'messages',
        'a new thread starts with user messages: Keel does not import history (start from an existing thread instead)',
      );
    // Checked before the thread is made: a refused request makes nothing.
    const system = systemWithContext(agent, input);
    const clientTools = checkedClientTools(agent, input);
    const s = await threadFor(c, input, agent.name);
    const { known, fresh } = await sentBefore(c, s, input);
    if (fresh.length === 0) {
      // Sent before: the run those messages started, from the start or after the client's last event.
      const run = await runFor(ctx, c, known!.runId);
      return stream(c, run, { runId, after: after ?? -1 });
    }
    const content = fresh.flatMap(({ index, message }) => userParts(message, index));
    const last = fresh.at(-1)!.message;
    const tenant = c.get('tenant');
    const sent = await rt.sessions.send(s.id, content, {
      agent: agentSpec,
      ifBusy: 'reject',
      idempotency: { tenant, key: messageKey(s.id, last.id), fingerprint: messageFingerprint(last) },
      ...(system !== undefined ? { overrides: { system } } : {}),
      ...(clientTools ? { clientTools } : {}),
    });
    // The other new messages went with it: recorded as sent too.
    const effect = JSON.stringify({
      outcome: sent.outcome,
      message_id: sent.message.id,
      run_id: sent.run.id,
    } satisfies RecordedSend);
    for (const { message } of fresh.slice(0, -1))
      await rt.idempotency.put({
        tenant,
        key: messageKey(s.id, message.id),
        fingerprint: messageFingerprint(message),
        status: 0,
        body: effect,
        createdAt: Date.now(),
      });
    return stream(c, sent.run, { runId, after: -1 });
  });

  app.get('/agui/:agent/runs/:runId', async (c) => {
    const agent = agentOf(c.req.param('agent'));
    const run = await runFor(ctx, c, c.req.param('runId'));
    if (run.agent.name !== agent.name) throw new NotFoundError('run', `${run.id} of agent ${agent.name}`);
    return stream(c, run, { runId: run.id, after: lastEventId(c) ?? -1 });
  });
}
