/**
 * The A2A methods on Keel's runs (issue 41, ADR-0038), as the SDK's transport-agnostic
 * `A2ARequestHandler`: the SDK's JSON-RPC transport handler (a2a.ts) parses the requests and
 * serializes what these return. One handler per request: it acts for the request's tenant and the
 * agent its URL names.
 *
 * Task = run (same id), context = session. A message without a task id starts a task (in its
 * context's session, or a new one); one with a task id answers what the task waits for (an
 * approval: "approve" / "deny" or a data part `{approved}`; a question: the text, or a data part)
 * or, while it runs, steers it. What Keel does not do is refused with the protocol's errors.
 */
import {
  Message as MessageJson,
  Role,
  type AgentCard,
  type CancelTaskRequest,
  type DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskPushNotificationConfigRequest,
  type GetTaskRequest,
  type ListTaskPushNotificationConfigsRequest,
  type ListTaskPushNotificationConfigsResponse,
  type ListTasksResponse,
  type Message,
  type Part,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import {
  A2AError,
  ContentTypeNotSupportedError,
  ExtendedAgentCardNotConfiguredError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import { newId, type AgentDefinition } from '../../../core/index.ts';
import type { JsonValue } from '../../../model/index.ts';
import { isTerminal, type RecordedSend, type Waiting } from '../../../runs/index.ts';
import { runEvents } from '../../../session/index.ts';
import { NotFoundError, type RunRecord, type WebhookRecord } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { toA2aError } from './a2a-errors.ts';
import { agentCard } from './agent-card.ts';
import { taskState, TaskEncoder } from './task-encoder.ts';
import { taskStream } from './task-stream.ts';

/** The header a push notification config's token is sent in (the A2A SDK's). */
const TOKEN_HEADER = 'x-a2a-notification-token';

const textOf = (p: Part): string | undefined => (p.content?.$case === 'text' ? p.content.value : undefined);

/** "approve" or "deny" (with a reason after a colon) as a decision; undefined for other text. */
function decisionIn(text: string): { approved: boolean; reason?: string } | undefined {
  if (/^\s*(approve|approved|yes)\s*[.!]?\s*$/i.test(text)) return { approved: true };
  const deny = /^\s*(deny|denied|no)\s*(?:[:\-–—]\s*([\s\S]*?))?\s*$/i.exec(text);
  if (!deny) return undefined;
  return deny[2] ? { approved: false, reason: deny[2] } : { approved: false };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface TaskHandlerOptions {
  ctx: AppContext;
  c: Context<AppEnv>;
  /** The agent the endpoint is for, and how its URL names it (`name` or `name@version`). */
  agent: AgentDefinition;
  agentSpec: string;
  /** The JSON-RPC endpoint's URL (for the card). */
  url: string;
  /** The client went (its streams stop, its waits end; its runs go on). */
  signal: AbortSignal;
}

export class KeelTaskHandler implements A2ARequestHandler {
  private readonly o: TaskHandlerOptions;

  constructor(o: TaskHandlerOptions) {
    this.o = o;
  }

  private get rt() {
    return this.o.ctx.rt;
  }

  private get tenant(): string {
    return this.o.c.get('tenant');
  }

  /** `fn`, its errors as the protocol's. */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      // The client went while its request waited: nobody reads the answer (its task goes on).
      if (this.o.signal.aborted) throw new A2AError('the client went');
      throw toA2aError(e, this.o.ctx.logger);
    }
  }

  private async *guardStream(fn: () => AsyncGenerator<StreamResponse>): AsyncGenerator<StreamResponse> {
    try {
      yield* fn();
    } catch (e) {
      throw toA2aError(e, this.o.ctx.logger);
    }
  }

  /** The A2A `tenant` field is the API key's tenant, never another. */
  private checkTenant(tenant: string | undefined): void {
    if (tenant && tenant !== this.tenant)
      throw new RequestMalformedError(
        `tenant: requests act for their API key's tenant (${this.tenant}), not ${tenant}`,
      );
  }

  /** The task (run) of this agent and tenant; anyone else's is not found. */
  private async task(id: string): Promise<RunRecord> {
    if (!id || id.trim() === '') throw new RequestMalformedError('id: the task id is required');
    const run = await runFor(this.o.ctx, this.o.c, id);
    if (run.agent.name !== this.o.agent.name)
      throw new TaskNotFoundError(`task ${id} is not a task of agent ${this.o.agent.name}`);
    return run;
  }

  /** The task as A2A has it: from the run's log, its state from its record; `historyLength` applied. */
  private async taskOf(run: RunRecord, historyLength?: number): Promise<Task> {
    const encoder = new TaskEncoder(run);
    for (const event of await runEvents(this.rt.sessions.log, run.sessionId, run.id))
      encoder.item({ kind: 'event', event });
    const task = encoder.snapshot();
    task.status = { ...task.status!, state: taskState(run.status, run.startedAt !== null) };
    task.metadata = { keel: { status: run.status } };
    if (historyLength !== undefined) task.history = historyLength <= 0 ? [] : task.history.slice(-historyLength);
    return task;
  }

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(agentCard(this.o.agent, this.o.url, this.o.ctx.options.auth));
  }

  getAuthenticatedExtendedAgentCard(_params: GetExtendedAgentCardRequest): Promise<AgentCard> {
    return Promise.reject(
      new ExtendedAgentCardNotConfiguredError('the agent card is the same for every API key: fetch it from its URL'),
    );
  }

  sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    return this.guard(async () => {
      let { run } = await this.accept(params);
      // Blocking (the default): until the task ends or waits for the client (or a time, a signal).
      if (params.configuration?.returnImmediately !== true)
        run = await this.rt.runs.wait(run.id, { until: 'settled', signal: this.o.signal });
      return this.taskOf(run, params.configuration?.historyLength);
    });
  }

  sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    return this.guardStream(
      async function* (this: KeelTaskHandler) {
        const { run, created } = await this.accept(params);
        yield* taskStream(this.rt, run, {
          mode: created ? 'events' : 'snapshot',
          signal: this.o.signal,
          queueLimit: this.o.ctx.options.sseQueueLimit,
        });
      }.bind(this),
    );
  }

  getTask(params: GetTaskRequest): Promise<Task> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      return this.taskOf(await this.task(params.id), params.historyLength);
    });
  }

  listTasks(): Promise<ListTasksResponse> {
    return Promise.reject(
      new UnsupportedOperationError('ListTasks is not served: list the runs with GET /v1/runs (?agent=, ?session_id=)'),
    );
  }

  cancelTask(params: CancelTaskRequest): Promise<Task> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      const run = await this.task(params.id);
      if (isTerminal(run.status)) throw new TaskNotCancelableError(`task ${run.id} is ${run.status} already`);
      const cancelled = await this.rt.runs.cancel(run.id, { graceMs: this.o.ctx.options.cancelGraceMs });
      return this.taskOf(cancelled);
    });
  }

  resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    return this.guardStream(
      async function* (this: KeelTaskHandler) {
        this.checkTenant(params.tenant);
        const run = await this.task(params.id);
        if (isTerminal(run.status))
          throw new UnsupportedOperationError(`task ${run.id} is ${run.status}: get it with GetTask`);
        yield* taskStream(this.rt, run, {
          mode: 'snapshot',
          signal: this.o.signal,
          queueLimit: this.o.ctx.options.sseQueueLimit,
        });
      }.bind(this),
    );
  }

  createTaskPushNotificationConfig(params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      return this.subscribe(await this.task(params.taskId), params);
    });
  }

  getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest): Promise<TaskPushNotificationConfig> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      return configOf(await this.config(params.taskId, params.id));
    });
  }

  listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      const run = await this.task(params.taskId);
      const all = (await this.rt.webhooks.forRun(run.id)).map(configOf);
      // A page token is the offset of the page.
      const from = params.pageToken ? Number(params.pageToken) : 0;
      if (!Number.isSafeInteger(from) || from < 0)
        throw new RequestMalformedError(`pageToken: not a page token of this list (${params.pageToken})`);
      const size = params.pageSize > 0 ? params.pageSize : all.length;
      const configs = all.slice(from, from + size);
      return { configs, nextPageToken: from + size < all.length ? String(from + size) : '' };
    });
  }

  deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    return this.guard(async () => {
      this.checkTenant(params.tenant);
      const w = await this.config(params.taskId, params.id);
      await this.rt.webhooks.delete(this.tenant, w.id);
    });
  }

  /** The task's push notification config `id` (a subscription of its run, by its ref). */
  private async config(taskId: string, id: string): Promise<WebhookRecord> {
    const run = await this.task(taskId);
    const w = (await this.rt.webhooks.forRun(run.id)).find((x) => x.ref === id);
    if (!w) throw new TaskNotFoundError(`task ${run.id} has no push notification config ${id}`);
    return w;
  }

  /**
   * A push notification config: a subscription of the run's status changes in the webhook outbox
   * (durable, retried), its deliveries A2A status updates with the config's token or credentials.
   */
  private async subscribe(run: RunRecord, config: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    if (!config.url) throw new RequestMalformedError('url: the push notification config needs a URL');
    const headers: Record<string, string> = {};
    const auth = config.authentication;
    if (auth?.scheme || auth?.credentials) {
      if (!auth.scheme || !auth.credentials || /[\s\r\n]/.test(auth.scheme) || /[\r\n]/.test(auth.credentials))
        throw new RequestMalformedError('authentication: a scheme (one word) and its credentials');
      headers.authorization = `${auth.scheme} ${auth.credentials}`;
    }
    if (config.token) {
      if (/[\r\n]/.test(config.token)) throw new RequestMalformedError('token: one line');
      headers[TOKEN_HEADER] = config.token;
    }
    const w = await this.rt.webhooks.subscribeRun(this.tenant, run.id, {
      url: config.url,
      format: 'a2a',
      ref: config.id || newId(),
      headers,
    });
    return configOf(w);
  }

  /** A message: a new task, or the next message of one (`taskId`); what it did, and to which run. */
  private async accept(params: SendMessageRequest): Promise<{ run: RunRecord; created: boolean }> {
    this.checkTenant(params.tenant);
    const m = params.message;
    if (!m) throw new RequestMalformedError('message: required');
    if (!m.messageId) throw new RequestMalformedError('message.messageId: required');
    if (m.role !== Role.ROLE_USER) throw new RequestMalformedError('message.role: a client sends ROLE_USER messages');
    if (m.referenceTaskIds.length > 0)
      throw new UnsupportedOperationError('message.referenceTaskIds: not supported (continue a context instead)');
    const accepted = params.configuration?.acceptedOutputModes ?? [];
    if (accepted.length > 0 && !accepted.some((x) => /^\s*(text\/plain|text\/\*|text|\*\/\*)\s*$/i.test(x)))
      throw new ContentTypeNotSupportedError('acceptedOutputModes: the agent answers in text/plain');
    let created = !m.taskId;
    let run: RunRecord;
    if (created) ({ run, created } = await this.start(m));
    else run = await this.next(m);
    const push = params.configuration?.taskPushNotificationConfig;
    if (push) await this.subscribe(run, { ...push, taskId: run.id });
    return { run, created };
  }

  /** The text of a message made only of text parts (what starts or steers a task). */
  private textOnly(m: Message): string {
    const texts = m.parts.map(textOf);
    if (texts.some((t) => t === undefined))
      throw new ContentTypeNotSupportedError(
        'message.parts: only text parts start or steer a task (data parts answer what a task waits for)',
      );
    const text = texts.join('\n');
    if (text.trim() === '') throw new RequestMalformedError('message.parts: no text');
    return text;
  }

  /**
   * A new task: a run in the message's context (its session), or in a new one. Its message id is
   * the send's idempotency key: the same message sent again (a retry) is the same task, not a new one.
   */
  private async start(m: Message): Promise<{ run: RunRecord; created: boolean }> {
    const input = this.textOnly(m);
    const idempotency = {
      tenant: this.tenant,
      key: `a2a-message:${m.messageId}`,
      fingerprint: createHash('sha256')
        .update(JSON.stringify(MessageJson.toJSON(m)))
        .digest('hex'),
    };
    const seen = await this.rt.idempotency.get(idempotency.tenant, idempotency.key);
    if (seen) {
      if (seen.fingerprint !== idempotency.fingerprint)
        throw new RequestMalformedError(`message.messageId: ${m.messageId} was sent before with another message`);
      const effect = JSON.parse(seen.body) as RecordedSend;
      return { run: await this.rt.runs.get(effect.run_id), created: false };
    }
    let sessionId: string;
    if (m.contextId) {
      try {
        sessionId = (await sessionFor(this.o.ctx, this.o.c, m.contextId)).id;
      } catch (e) {
        if (e instanceof NotFoundError) throw new RequestMalformedError(`contextId: no context ${m.contextId}`);
        throw e;
      }
    } else {
      sessionId = (
        await this.rt.sessions.create({
          tenant: this.tenant,
          title: input.slice(0, 60),
          agent: this.o.agent.name,
          metadata: { via: 'a2a' },
        })
      ).id;
    }
    // A context with a task in progress takes no new one (answer, cancel or wait for that one).
    const sent = await this.rt.sessions.send(sessionId, input, {
      agent: this.o.agentSpec,
      ifBusy: 'reject',
      idempotency,
    });
    return { run: sent.run, created: true };
  }

  /** The next message of a task: the answer to what it waits for, or (while it runs) more input. */
  private async next(m: Message): Promise<RunRecord> {
    const run = await this.task(m.taskId);
    if (m.contextId && m.contextId !== run.sessionId)
      throw new RequestMalformedError(`contextId: task ${run.id} is in context ${run.sessionId}`);
    if (isTerminal(run.status))
      throw new UnsupportedOperationError(
        `task ${run.id} is ${run.status}: send a message with its contextId (and no taskId) to go on in its context`,
      );
    if (run.status === 'waiting_approval') await this.decide(run, m.parts);
    else if (run.status === 'waiting_for_user') await this.reply(run, m.parts);
    else await this.rt.runs.steer(run.id, this.textOnly(m));
    return this.rt.runs.get(run.id);
  }

  /** Approves or denies what the run waits for: "approve", "deny[: reason]", or data parts `{approved, reason?, toolCallId?}`. */
  private async decide(run: RunRecord, parts: readonly Part[]): Promise<void> {
    const waiting = run.waiting as unknown as Waiting | null;
    const open = (waiting?.calls ?? []).filter((c) => c.kind === 'approval' && !waiting?.decisions[c.toolCallId]);
    let all: { approved: boolean; reason?: string } | undefined;
    const each = new Map<string, { approved: boolean; reason?: string }>();
    for (const p of parts) {
      const text = textOf(p);
      const data = p.content?.$case === 'data' ? (p.content.value as unknown) : undefined;
      const d =
        text !== undefined
          ? decisionIn(text)
          : isObject(data) && typeof data.approved === 'boolean'
            ? { approved: data.approved, ...(typeof data.reason === 'string' ? { reason: data.reason } : {}) }
            : undefined;
      if (!d)
        throw new RequestMalformedError(
          `task ${run.id} waits for approval of ${open.map((c) => `${c.toolName} (${c.toolCallId})`).join(', ')}: answer "approve" or "deny" (or "deny: <reason>"), or a data part {"approved": true|false, "reason"?, "toolCallId"?}`,
        );
      const id = isObject(data) && typeof data.toolCallId === 'string' ? data.toolCallId : undefined;
      if (id === undefined) all = d;
      else if (!open.some((c) => c.toolCallId === id))
        throw new RequestMalformedError(`toolCallId: task ${run.id} waits for no approval of ${id}`);
      else each.set(id, d);
    }
    for (const c of open) {
      const d = each.get(c.toolCallId) ?? all;
      if (!d) continue;
      if (d.approved) await this.rt.runs.approve(run.id, c.toolCallId);
      else await this.rt.runs.deny(run.id, c.toolCallId, d.reason !== undefined ? { reason: d.reason } : {});
    }
  }

  /** Answers the run's question: the message's text, or a data part (the answer, or `{toolCallId, answer}`). */
  private async reply(run: RunRecord, parts: readonly Part[]): Promise<void> {
    const waiting = run.waiting as unknown as Waiting | null;
    const open = (waiting?.calls ?? []).filter((c) => c.kind === 'input' && !waiting?.decisions[c.toolCallId]);
    const data = parts.flatMap((p) => (p.content?.$case === 'data' ? [p.content.value as JsonValue] : []));
    let toolCallId: string | undefined;
    let answer: JsonValue;
    if (data.length > 0) {
      const d = data[0]!;
      const targeted =
        isObject(d) && 'answer' in d && Object.keys(d).every((k) => k === 'answer' || k === 'toolCallId');
      answer = targeted ? (d.answer as JsonValue) : d;
      if (targeted && typeof d.toolCallId === 'string') toolCallId = d.toolCallId;
    } else {
      const texts = parts.flatMap((p) => {
        const t = textOf(p);
        return t === undefined ? [] : [t];
      });
      if (texts.length === 0) throw new ContentTypeNotSupportedError('message.parts: answer with text or a data part');
      answer = texts.join('\n');
    }
    if (toolCallId === undefined && open.length > 1)
      throw new RequestMalformedError(
        `task ${run.id} asks ${open.length} questions (${open.map((c) => c.toolCallId).join(', ')}): answer each with a data part {"toolCallId", "answer"}`,
      );
    await this.rt.runs.input(run.id, answer, toolCallId !== undefined ? { toolCallId } : {});
  }
}

/** A run's subscription as the push notification config the client set (its credentials not shown again). */
function configOf(w: WebhookRecord): TaskPushNotificationConfig {
  const auth = w.headers?.authorization;
  const space = auth?.indexOf(' ') ?? -1;
  return {
    tenant: '',
    id: w.ref ?? w.id,
    taskId: w.runId ?? '',
    url: w.url,
    token: w.headers?.[TOKEN_HEADER] ?? '',
    authentication: auth !== undefined && space > 0 ? { scheme: auth.slice(0, space), credentials: '' } : undefined,
  };
}
