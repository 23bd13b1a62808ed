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
 * - Every event carries an `id:` (agui-stream.ts): a client that reconnects with `Last-Event-ID`
 *   gets the rest, nothing twice. `GET /agui/{agent}/runs/{runId}` (a Keel run id, sent as the
 *   `keel.run` custom event) re-attaches to a run the same way.
 *
 * A client that disconnects does not cancel the run; errors before the stream are problem+json.
 */
import type { Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { EventEncoder } from '@ag-ui/encoder';
import { EventType, type ResumeEntry, type RunAgentInput } from '@ag-ui/core';
import type { JsonValue } from '../../../model/index.ts';
import type { RecordedSend, Waiting } from '../../../runs/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import { eventPosition, FeedOverflowError, follow } from '../../../session/index.ts';
import { NotFoundError, StoreError, type RunRecord, type SessionRecord } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { HttpProblem } from '../../problems.ts';
import {
  approvalOf,
  messageFingerprint,
  messageKey,
  parseRunInput,
  refuse,
  refuseUnsupported,
  systemWithContext,
  trailingUserMessages,
  userParts,
} from './agui-input.ts';
import { AguiStreamEncoder } from './agui-stream.ts';

/** How often an idle stream re-reads the log (a safety net for a missed notice). */
const POLL_MS = 1000;

/** Whether the run's stream ends now: the run ended, or it waits for the client's answer. */
function settledForClient(run: RunRecord): boolean {
  return isTerminal(run.status) || run.status === 'waiting_approval' || run.status === 'waiting_for_user';
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

  /** Answers the interrupts the run waits for; returns the id of the event that asked them (the stream goes on after it). */
  const answer = async (s: SessionRecord, resume: ResumeEntry[]): Promise<{ run: RunRecord; after: number }> => {
    const runs = await rt.runs.list({ sessionId: s.id, limit: 1000 });
    const run = (await rt.runs.active(s.id)) ?? runs.at(-1);
    if (!run) throw new NotFoundError('run', `of thread ${s.id}`);
    const events = await rt.sessions.log.read(s.id, { runId: run.id });
    const asked = new Map<string, 'approval' | 'question'>();
    for (const e of events) {
      if (e.type === 'tool/approval') asked.set(e.data.toolCallId, 'approval');
      if (e.type === 'user/question') asked.set(e.data.toolCallId, 'question');
    }
    resume.forEach((r, i) => {
      if (!asked.has(r.interruptId))
        throw new HttpProblem('validation', `resume[${i}].interruptId: run ${run.id} asked no ${r.interruptId}`, {
          field: `resume[${i}].interruptId`,
          run_id: run.id,
        });
    });
    const waiting = run.waiting as unknown as Waiting | null;
    const open = (waiting?.calls ?? []).filter(
      (call) => (call.kind === 'approval' || call.kind === 'input') && !waiting?.decisions[call.toolCallId],
    );
    const missing = open.filter((call) => !resume.some((r) => r.interruptId === call.toolCallId));
    if (missing.length > 0)
      refuse('resume', `answer every interrupt of run ${run.id}: ${missing.map((m) => m.toolCallId).join(', ')}`);
    // Approvals first: the run asks its questions once they are decided.
    const order = [...resume.entries()].sort(
      ([, a], [, b]) =>
        (asked.get(a.interruptId) === 'approval' ? 0 : 1) - (asked.get(b.interruptId) === 'approval' ? 0 : 1),
    );
    for (const [i, r] of order) {
      // Answered before (a retry of this request): the run went on; the stream says how.
      if (!open.some((call) => call.toolCallId === r.interruptId)) continue;
      if (asked.get(r.interruptId) === 'approval') {
        const d = approvalOf(r, i);
        if (d.approved) await rt.runs.approve(run.id, r.interruptId, d.input ? { input: d.input as JsonValue } : {});
        else await rt.runs.deny(run.id, r.interruptId, { reason: d.reason });
      } else {
        if (r.status === 'resolved' && r.payload === undefined)
          refuse(`resume[${i}].payload`, 'a question is answered with its answer as the payload');
        const value = r.status === 'cancelled' ? { error: 'no answer' } : (r.payload as JsonValue);
        await rt.runs.input(run.id, value, { toolCallId: r.interruptId });
      }
    }
    // The AG-UI run that asked them ended at the event before the first answer.
    const ids = new Set(resume.map((r) => r.interruptId));
    const encoder = new AguiStreamEncoder({ threadId: s.id, runId: '', keelRunId: run.id });
    encoder.start();
    for (const e of await rt.sessions.log.read(s.id, { runId: run.id })) {
      if ((e.type === 'tool/decision' || e.type === 'user/answer') && ids.has(e.data.toolCallId)) break;
      encoder.item({ kind: 'event', event: e });
    }
    return { run, after: encoder.lastId };
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

    if (input.resume && input.resume.length > 0) {
      const s = await sessionFor(ctx, c, input.threadId);
      if ((await sentBefore(c, s, input)).fresh.length > 0)
        refuse('messages', 'a request that answers interrupts carries no new user message: send it next');
      const answered = await answer(s, input.resume);
      return stream(c, answered.run, { runId, after: after ?? answered.after });
    }

    const trailing = trailingUserMessages(input.messages);
    if (trailing.length === 0)
      refuse('messages', 'no new user message to send (the thread has the rest), and no interrupt answered');
    const isNew = !(await rt.sessions.find(input.threadId));
    if (isNew && trailing[0]!.index > 0)
      refuse(
        'messages',
        'a new thread starts with user messages: Keel does not import history (start from an existing thread instead)',
      );
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
    const system = systemWithContext(agent, input);
    const sent = await rt.sessions.send(s.id, content, {
      agent: agentSpec,
      ifBusy: 'reject',
      idempotency: { tenant, key: messageKey(s.id, last.id), fingerprint: messageFingerprint(last) },
      ...(system !== undefined ? { overrides: { system } } : {}),
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
