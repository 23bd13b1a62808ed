/**
 * OpenAI Responses under `/openai/v1` (issue 41, ADR-0038), so that
 * `new OpenAI({ baseURL: 'http://host/openai/v1', apiKey: KEEL_KEY })` works unchanged: a response
 * is a Keel run, a conversation a Keel session, `model` names a Keel agent (`name` or
 * `name@version`). Built: create (waiting for the run to settle, at once with `background`, or
 * streamed with `stream`), retrieve (streamed again with `stream=true&starting_after=N`, which
 * resumes with nothing lost or repeated: response-stream.ts), cancel, input items,
 * `previous_response_id`, `conversation` and `instructions` (the run's system prompt). Refused with the protocol's error shape, never
 * ignored: tools declared by the client, input items other than user messages,
 * `store: false`, deleting a response. `previous_response_id` naming a response that is not its
 * conversation's latest forks the conversation after it.
 */
import { z } from 'zod';
import type { Context, Hono } from 'hono';
import type { UserInput } from '../../../core/index.ts';
import type { RunRecord } from '../../../store/index.ts';
import { StoreError } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { HttpProblem } from '../../problems.ts';
import { responseObject } from './response-object.ts';
import { ResponseStreamEncoder, type StreamEvent } from './response-stream.ts';
import { streamSSE } from 'hono/streaming';
import { eventPosition, follow, runEvents } from '../../../session/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';

const Content = z.union([
  z.string(),
  z.array(z.object({ type: z.literal('input_text'), text: z.string() }).passthrough(), {
    error: 'content: only input_text parts are supported',
  }),
]);

const MessageItem = z
  .object({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'system', 'developer', 'assistant']),
    content: Content,
  })
  .passthrough();

const CreateBody = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string().min(1), z.array(z.unknown()).min(1)]),
    previous_response_id: z.string().nullish(),
    conversation: z.union([z.string(), z.object({ id: z.string() })]).nullish(),
    store: z.boolean().nullish(),
    stream: z.boolean().nullish(),
    background: z.boolean().nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    instructions: z.unknown().optional(),
    tools: z.array(z.unknown()).nullish(),
  })
  .passthrough();

/** What is not built yet is refused, naming the field (ADR-0038). */
function refuse(param: string, message: string): never {
  throw new HttpProblem('validation', message, { param });
}

/** The user's text of the input: a string, or message items with the user's role. */
function userInputOf(input: z.infer<typeof CreateBody>['input']): UserInput {
  if (typeof input === 'string') return input;
  const texts: string[] = [];
  input.forEach((raw, i) => {
    const item = MessageItem.safeParse(raw);
    if (!item.success)
      refuse(
        `input[${i}]`,
        `input[${i}]: only message items are supported (${item.error.issues[0]?.message ?? 'not a message'})`,
      );
    if (item.data.role !== 'user')
      refuse(
        `input[${i}].role`,
        `input[${i}]: only user messages are supported (the agent's own instructions are its system prompt)`,
      );
    const c = item.data.content;
    texts.push(typeof c === 'string' ? c : c.map((p) => p.text).join(''));
  });
  return texts.join('\n\n');
}

export function openAiResponsesRoutes(app: Hono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  const base = '/openai/v1/responses';

  /** The run's response object, with the run before it in its conversation as the previous response. */
  const objectOf = async (c: Context<AppEnv>, run: RunRecord, background = false) => {
    const session = await sessionFor(ctx, c, run.sessionId);
    const runs = await rt.runs.list({ sessionId: run.sessionId, limit: 1000 });
    const i = runs.findIndex((r) => r.id === run.id);
    const previous = i > 0 ? runs[i - 1]!.id : null;
    return responseObject(rt.sessions.log, run, session, { previousResponseId: previous, background });
  };
  const respond = async (c: Context<AppEnv>, run: RunRecord, background = false) =>
    c.json(await objectOf(c, run, background), 200);

  /**
   * The run as a Responses event stream, from its start, without what the client has (`after`):
   * the run's feed through the encoder (response-stream.ts). A client that disconnects ends only
   * its stream; the run goes on and can be streamed again from where the client was.
   */
  const streamOf = (c: Context<AppEnv>, run: RunRecord, after: number, background = false) =>
    streamSSE(c, async (stream) => {
      const closed = new AbortController();
      stream.onAbort(() => closed.abort());
      const encoder = new ResponseStreamEncoder(after);
      const send = async (events: StreamEvent[]) => {
        for (const e of events) await stream.writeSSE({ event: e.type, data: JSON.stringify(e) });
      };
      await send(encoder.start(await objectOf(c, { ...run, status: 'queued' }, background)));
      const first = (await rt.sessions.log.read(run.sessionId, { runId: run.id, limit: 1 }))[0];
      const feed = follow(rt.sessions.log, run.sessionId, {
        runId: run.id,
        ...(first ? { after: eventPosition(first.seq - 1) } : {}),
        endAt: (e) => ResponseStreamEncoder.ends(e, run.id),
        isDone: async () => isTerminal((await rt.runs.get(run.id)).status),
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
      if (isTerminal(ended.status)) await send(encoder.end(ended.status, await objectOf(c, ended, background)));
    });

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
    if (b.tools && b.tools.length > 0) refuse('tools', 'tools declared by the client are not supported yet');
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
    const input = userInputOf(b.input);

    // Where it goes: the previous response's conversation (it must be the latest), a given conversation, or a new one.
    let sessionId: string;
    if (b.previous_response_id) {
      const previous = await runFor(ctx, c, b.previous_response_id);
      const runs = await rt.runs.list({ sessionId: previous.sessionId, limit: 1000 });
      if (runs.at(-1)?.id === previous.id) sessionId = previous.sessionId;
      else {
        // An earlier response of its conversation: a new conversation forked after it (the original is untouched).
        const last = (await runEvents(rt.sessions.log, previous.sessionId, previous.id)).findLast((e) => e.entry);
        if (!last) refuse('previous_response_id', `response ${previous.id} has no output to continue from`);
        sessionId = (await rt.sessions.fork(previous.sessionId, last.id, { into: 'session' })).sessionId;
      }
    } else if (b.conversation) {
      sessionId = (await sessionFor(ctx, c, typeof b.conversation === 'string' ? b.conversation : b.conversation.id))
        .id;
    } else {
      const title = typeof input === 'string' ? input.slice(0, 60) : 'openai';
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
    const sent = await rt.sessions.send(sessionId, input, {
      agent: b.model,
      ifBusy: 'reject',
      ...(instructions !== undefined ? { overrides: { system: instructions } } : {}),
    });
    if (b.stream) return streamOf(c, sent.run, -1, b.background ?? false);
    if (b.background) return respond(c, sent.run, true);
    // A client that disconnects does not cancel the run: it goes on, and can be retrieved.
    const settled = await rt.runs.wait(sent.run.id, { until: 'settled' });
    return respond(c, settled);
  });

  app.get(`${base}/:id`, async (c) => {
    const run = await runFor(ctx, c, c.req.param('id'));
    if (c.req.query('stream') !== 'true') return respond(c, run);
    const raw = c.req.query('starting_after');
    const after = raw === undefined ? -1 : Number(raw);
    if (!Number.isSafeInteger(after) || after < -1)
      refuse('starting_after', `starting_after: a sequence number, not ${JSON.stringify(raw)}`);
    return streamOf(c, run, after);
  });

  app.post(`${base}/:id/cancel`, async (c) => {
    const run = await runFor(ctx, c, c.req.param('id'));
    return respond(c, await rt.runs.cancel(run.id, { graceMs: ctx.options.cancelGraceMs }));
  });

  app.delete(`${base}/:id`, async (c) => {
    await runFor(ctx, c, c.req.param('id'));
    refuse(
      'response_id',
      "a response is part of its conversation's log: erase the conversation (POST /v1/sessions/{id}/erase)",
    );
  });

  app.get(`${base}/:id/input_items`, async (c) => {
    const run = await runFor(ctx, c, c.req.param('id'));
    const events = await rt.sessions.log.read(run.sessionId, { runId: run.id });
    const data = events.flatMap((e) =>
      e.type === 'user/message'
        ? [
            {
              type: 'message' as const,
              id: `msg_${e.data.message.id}`,
              status: 'completed' as const,
              role: 'user' as const,
              content: e.data.message.content.flatMap((p) =>
                p.type === 'text' ? [{ type: 'input_text' as const, text: p.text }] : [],
              ),
            },
          ]
        : [],
    );
    return c.json(
      { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: false },
      200,
    );
  });
}
