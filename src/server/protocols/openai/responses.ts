/**
 * OpenAI Responses under `/openai/v1` (issue 41, ADR-0038), so that
 * `new OpenAI({ baseURL: 'http://host/openai/v1', apiKey: KEEL_KEY })` works unchanged: a response
 * is a Keel run, a conversation a Keel session, `model` names a Keel agent (`name` or
 * `name@version`). Built: create (waiting for the run to settle, at once with `background`, or
 * streamed with `stream`), retrieve (streamed again with `stream=true&starting_after=N`, which
 * resumes with nothing lost or repeated: response-stream.ts), cancel, input items,
 * `previous_response_id`, `conversation`, `instructions` (the run's system prompt), function
 * tools the client executes and Keel's approvals and questions handed to the client
 * (response-segments.ts: the run waits durably; the client's next request with
 * `previous_response_id` carries its `function_call_output` and `mcp_approval_response` items or
 * its answer, and the same run goes on as the next response). Refused with the protocol's error
 * shape, never ignored: tools other than functions, input items of other types, `store: false`,
 * deleting a response. `previous_response_id` naming a response that is not its conversation's
 * latest forks the conversation after it.
 */
import type { Context, Hono } from 'hono';
import type { PendingCall } from '../../../core/index.ts';
import { InvalidSendOptionError, type ClientToolSpec, type RunOptions } from '../../../runs/index.ts';
import type { RunRecord } from '../../../store/index.ts';
import { NotFoundError, StoreError } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { HttpProblem } from '../../problems.ts';
import { clientToolsOf, CreateBody, inputOf, refuse, type Input } from './response-input.ts';
import { begun, segmentObject } from './response-object.ts';
import { parseResponseId, responseId, segmentsOf } from './response-segments.ts';
import { ResponseStreamEncoder, type StreamEvent } from './response-stream.ts';
import { streamSSE } from 'hono/streaming';
import { eventPosition, follow, runEvents } from '../../../session/index.ts';
import { isTerminal, isWaiting } from '../../../runs/lifecycle/run-status.ts';

export function openAiResponsesRoutes(app: Hono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  const base = '/openai/v1/responses';

  /** The run a response id names (tenant checked), its segments, and the segment. */
  const lookup = async (c: Context<AppEnv>, id: string) => {
    const { runId, n } = parseResponseId(id);
    const run = await runFor(ctx, c, runId);
    const segments = segmentsOf(await runEvents(rt.sessions.log, run.sessionId, run.id));
    const segment = segments[n];
    if (!segment || !begun(segment)) throw new NotFoundError('response', id);
    return { run, segments, segment };
  };

  /** The response before a run's first: the last response of the run before it in its conversation. */
  const previousOf = async (run: RunRecord, n: number): Promise<string | null> => {
    if (n > 0) return responseId(run.id, n - 1);
    const runs = await rt.runs.list({ sessionId: run.sessionId, limit: 1000 });
    const i = runs.findIndex((r) => r.id === run.id);
    if (i <= 0) return null;
    const before = runs[i - 1]!;
    const segments = segmentsOf(await runEvents(rt.sessions.log, before.sessionId, before.id)).filter(begun);
    return responseId(before.id, segments.length - 1);
  };

  /** The segment `n` of the run as a response object (as it stands now). */
  const objectOf = async (c: Context<AppEnv>, run: RunRecord, n: number, background = false) => {
    const session = await sessionFor(ctx, c, run.sessionId);
    const segment = segmentsOf(await runEvents(rt.sessions.log, run.sessionId, run.id))[n] ?? { n, events: [] };
    return segmentObject(run, segment, session, { previousResponseId: await previousOf(run, n), background });
  };
  const respond = async (c: Context<AppEnv>, run: RunRecord, n: number, background = false) =>
    c.json(await objectOf(c, run, n, background), 200);

  /**
   * A segment of the run as a Responses event stream, from its start, without what the client has
   * (`after`): the run's feed through the encoder (response-stream.ts), until the run ends or hands
   * the client the turn. A client that disconnects ends only its stream; the run goes on and can
   * be streamed again from where the client was.
   */
  const streamOf = (c: Context<AppEnv>, run: RunRecord, n: number, after: number, background = false) =>
    streamSSE(c, async (stream) => {
      const closed = new AbortController();
      stream.onAbort(() => closed.abort());
      const encoder = new ResponseStreamEncoder(after);
      const send = async (events: StreamEvent[]) => {
        for (const e of events) await stream.writeSSE({ event: e.type, data: JSON.stringify(e) });
      };
      await send(encoder.start(await objectOf(c, { ...run, status: n === 0 ? 'queued' : 'running' }, n, background)));
      // Where the segment starts: before the run's first event, or after the hand-off that ended the one before.
      const from =
        n === 0
          ? ((await rt.sessions.log.read(run.sessionId, { runId: run.id, limit: 1 }))[0]?.seq ?? 1) - 1
          : segmentsOf(await runEvents(rt.sessions.log, run.sessionId, run.id))[n - 1]!.events.at(-1)!.seq;
      const feed = follow(rt.sessions.log, run.sessionId, {
        runId: run.id,
        after: eventPosition(from),
        endAt: (e) => ResponseStreamEncoder.ends(e, run.id),
        // Ended, or handed the client the turn: a hand-off the feed's replay read (before it
        // follows live) ends the stream too.
        isDone: async () => {
          const now = await rt.runs.get(run.id);
          if (isTerminal(now.status)) return true;
          if (!isWaiting(now.status)) return false;
          return segmentsOf(await runEvents(rt.sessions.log, run.sessionId, run.id))[n]?.handOff !== undefined;
        },
        queueLimit: ctx.options.sseQueueLimit,
        onOverflow: () => closed.abort(),
        signal: closed.signal,
      });
      try {
        for await (const item of feed) {
          if (closed.signal.aborted) return;
          await send(encoder.item(item));
        }
      } catch (e) {
        if (closed.signal.aborted) return;
        throw e;
      }
      if (closed.signal.aborted) return;
      const ended = await rt.runs.get(run.id);
      const response = await objectOf(c, ended, n, background);
      if (response.status === 'completed' || isTerminal(ended.status))
        await send(encoder.end(response.status === 'completed' ? 'completed' : ended.status, response));
    });

  /**
   * The client's part of a run that handed it the turn at the end of segment `n`: every pending
   * call gets what the input gives for it (an output, a decision, the answer), or the request is
   * refused before anything is delivered.
   */
  const continueRun = async (run: RunRecord, handed: PendingCall[], input: Input, tools: ClientToolSpec[] | null) => {
    if (tools) {
      const declared = ((run.options as RunOptions).clientTools ?? []).map((t) => t.name).sort();
      const given = tools.map((t) => t.name).sort();
      if (given.length > 0 && JSON.stringify(given) !== JSON.stringify(declared))
        refuse(
          'tools',
          `response ${run.id} waits with the tools it was created with (${declared.join(', ') || 'none'}): its tools cannot change`,
        );
    }
    const calls = new Map(handed.map((p) => [p.toolCallId, p]));
    for (const o of input.outputs)
      if (calls.get(o.callId)?.kind !== 'signal')
        refuse('input', `no function call ${o.callId} waits for its output in response ${run.id}`);
    for (const a of input.approvals)
      if (calls.get(a.toolCallId)?.kind !== 'approval')
        refuse('input', `no approval request mcpr_${a.toolCallId} waits in response ${run.id}`);
    const questions = handed.filter((p) => p.kind === 'input');
    const missing = handed.filter((p) =>
      p.kind === 'signal'
        ? !input.outputs.some((o) => o.callId === p.toolCallId)
        : p.kind === 'approval'
          ? !input.approvals.some((a) => a.toolCallId === p.toolCallId)
          : input.text === undefined,
    );
    if (missing.length > 0)
      refuse(
        'input',
        `response waits for ${missing.map((p) => (p.kind === 'signal' ? `the output of function call ${p.toolCallId}` : p.kind === 'approval' ? `a response to approval request mcpr_${p.toolCallId}` : 'the answer to its question (a user message)')).join(', ')}`,
      );
    if (input.text !== undefined && questions.length === 0)
      refuse('input', `response ${run.id} waits for tool outputs or approvals, not a message`);
    if (input.outputs.length > 0) await rt.runs.submitToolResults(run.id, input.outputs, { source: 'api' });
    for (const a of input.approvals)
      if (a.approve) await rt.runs.approve(run.id, a.toolCallId);
      else await rt.runs.deny(run.id, a.toolCallId, a.reason !== undefined ? { reason: a.reason } : {});
    for (const q of questions) {
      // The user's message answers each question the response asked.
      const ids = ((q.input as { questions?: Array<{ id: string }> }).questions ?? []).map((x) => x.id);
      const text = typeof input.text === 'string' ? input.text : JSON.stringify(input.text);
      await rt.runs.input(run.id, Object.fromEntries(ids.map((id) => [id, text])), { toolCallId: q.toolCallId });
    }
  };

  app.post(base, async (c) => {
    const raw: unknown = await c.req.json().catch(() => {
      throw new HttpProblem('bad_json', 'the body is not valid JSON');
    });
    const parsed = CreateBody.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      refuse(issue.path.join('.') || 'body', `${issue.path.join('.') || 'body'}: ${issue.message}`);
    }
    const b = parsed.data;
    // (`store` is the protocol's field here, not Keel's storage.)
    const { store: keep } = b;
    if (keep === false)
      refuse('store', 'Keel stores every response: its log is the record (`store: false` is not supported)');
    if (b.instructions !== undefined && b.instructions !== null && typeof b.instructions !== 'string')
      refuse('instructions', 'instructions: a string (input items as instructions are not supported)');
    if (b.previous_response_id && b.conversation)
      refuse('conversation', 'give previous_response_id or conversation, not both');
    let agent: string;
    try {
      agent = rt.agentFor(b.model).name;
    } catch (e) {
      if (e instanceof StoreError && e.code === 'unknown_agent')
        throw new HttpProblem('validation', `model ${b.model}: ${e.message}`, { param: 'model' });
      throw e;
    }
    const input = inputOf(b.input);
    const clientTools = clientToolsOf(b.tools);
    const background = b.background ?? false;
    /** The response `n` of `run`: streamed, at once, or once the run settles. */
    const answer = async (run: RunRecord, n: number) => {
      if (b.stream) return streamOf(c, run, n, -1, background);
      if (background) return respond(c, run, n, true);
      // A client that disconnects does not cancel the run: it goes on, and can be retrieved.
      return respond(c, await rt.runs.wait(run.id, { until: 'settled' }), n);
    };

    // Where it goes: the run that handed the previous response's client the turn (it goes on), the
    // previous response's conversation (it must be the latest), a given conversation, or a new one.
    let sessionId: string;
    if (b.previous_response_id) {
      const { run: previous, segments, segment } = await lookup(c, b.previous_response_id);
      const next = segments[segment.n + 1];
      if (segment.handOff && next && !begun(next) && isWaiting(previous.status)) {
        if (b.model.split('@')[0] !== previous.agent.name)
          refuse('model', `response ${b.previous_response_id} goes on with its model ${previous.agent.name}`);
        await continueRun(previous, segment.handOff, input, b.tools ? clientTools : null);
        return answer(await rt.runs.get(previous.id), segment.n + 1);
      }
      if (input.outputs.length > 0 || input.approvals.length > 0)
        refuse('input', `response ${b.previous_response_id} waits for no tool output or approval`);
      const latest = (await rt.runs.list({ sessionId: previous.sessionId, limit: 1000 })).at(-1);
      if (latest?.id === previous.id && segment.n === segments.filter(begun).length - 1) sessionId = previous.sessionId;
      else {
        // An earlier response of its conversation: a new conversation forked after it (the original is untouched).
        const last = segment.events.findLast((e) => e.entry);
        if (!last) refuse('previous_response_id', `response ${b.previous_response_id} has no output to continue from`);
        sessionId = (await rt.sessions.fork(previous.sessionId, last.id, { into: 'session' })).sessionId;
      }
    } else if (b.conversation) {
      sessionId = (await sessionFor(ctx, c, typeof b.conversation === 'string' ? b.conversation : b.conversation.id))
        .id;
    } else {
      sessionId = '';
    }
    if (input.outputs.length > 0 || input.approvals.length > 0)
      refuse('input', 'function_call_output and mcp_approval_response items need the previous_response_id they answer');
    if (input.text === undefined) refuse('input', 'input: a user message is required');
    if (sessionId === '') {
      const title = typeof input.text === 'string' ? input.text.slice(0, 60) : 'openai';
      sessionId = (
        await rt.sessions.create({
          tenant: c.get('tenant'),
          title,
          agent,
          metadata: { ...(b.metadata ?? {}), via: 'openai.responses' },
        })
      ).id;
    }
    // `instructions` are this response's system prompt, over the agent's (recorded in its run's agent spec).
    const instructions = typeof b.instructions === 'string' ? b.instructions : undefined;
    const sent = await rt.sessions
      .send(sessionId, input.text, {
        agent: b.model,
        ifBusy: 'reject',
        ...(instructions !== undefined ? { overrides: { system: instructions } } : {}),
        ...(clientTools.length > 0 ? { clientTools } : {}),
      })
      .catch((e: unknown) => {
        // A tool the agent has itself, say: named as the request names it.
        if (e instanceof InvalidSendOptionError && e.field.startsWith('clientTools'))
          refuse(e.field.replace(/^clientTools/, 'tools'), e.message.replace(/clientTools/g, 'tools'));
        throw e;
      });
    return answer(sent.run, 0);
  });

  app.get(`${base}/:id`, async (c) => {
    const { run, segment } = await lookup(c, c.req.param('id'));
    if (c.req.query('stream') !== 'true') return respond(c, run, segment.n);
    const raw = c.req.query('starting_after');
    const after = raw === undefined ? -1 : Number(raw);
    if (!Number.isSafeInteger(after) || after < -1)
      refuse('starting_after', `starting_after: a sequence number, not ${JSON.stringify(raw)}`);
    return streamOf(c, run, segment.n, after);
  });

  app.post(`${base}/:id/cancel`, async (c) => {
    const { run, segment } = await lookup(c, c.req.param('id'));
    return respond(c, await rt.runs.cancel(run.id, { graceMs: ctx.options.cancelGraceMs }), segment.n);
  });

  app.delete(`${base}/:id`, async (c) => {
    await lookup(c, c.req.param('id'));
    refuse(
      'response_id',
      "a response is part of its conversation's log: erase the conversation (POST /v1/sessions/{id}/erase)",
    );
  });

  app.get(`${base}/:id/input_items`, async (c) => {
    const { segment } = await lookup(c, c.req.param('id'));
    const data = segment.events.flatMap((e): Array<Record<string, unknown> & { id: string }> => {
      if (e.type === 'user/message')
        return [
          {
            type: 'message' as const,
            id: `msg_${e.data.message.id}`,
            status: 'completed' as const,
            role: 'user' as const,
            content: e.data.message.content.flatMap((p) =>
              p.type === 'text' ? [{ type: 'input_text' as const, text: p.text }] : [],
            ),
          },
        ];
      // What the client gave for the calls the response before handed it.
      if (e.type === 'tool/result' && segment.n > 0 && e.data.output.type !== 'error')
        return [
          {
            type: 'function_call_output' as const,
            id: `fco_${e.data.toolCallId}`,
            call_id: e.data.toolCallId,
            output: e.data.output.type === 'text' ? e.data.output.value : JSON.stringify(e.data.output.value),
            status: 'completed' as const,
          },
        ];
      if (e.type === 'tool/decision' && segment.n > 0)
        return [
          {
            type: 'mcp_approval_response' as const,
            id: `mcpa_${e.data.toolCallId}`,
            approval_request_id: `mcpr_${e.data.toolCallId}`,
            approve: e.data.approved,
            reason: e.data.reason ?? null,
          },
        ];
      return [];
    });
    return c.json(
      { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false },
      200,
    );
  });
}
