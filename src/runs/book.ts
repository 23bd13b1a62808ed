import {
  newId,
  userMessage,
  type AgentDefinition,
  type PendingCall,
  type Tool,
  type UserInput,
} from '../core/index.ts';
import { addUsage, emptyUsage, type JsonValue, type ToolOutput, type Usage, type UserMessage } from '../model/index.ts';
import { checkedUserMessage, type NewEvent, type SessionEvent, type Sessions } from '../session/index.ts';
import {
  isTerminal,
  NotFoundError,
  RunBusyError,
  StoreError,
  TERMINAL_STATUSES,
  type JsonObject,
  type NewRun,
  type RunGuard,
  type RunPatch,
  type RunRecord,
  type Checkpoint,
  type RunStatus,
  type SessionRecord,
  type StoreOps,
} from '../store/index.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import type { Priority } from '../limits/flow-control.ts';
import type { McpToolsGot } from '../mcp/index.ts';
import { lastBoundary } from './resume.ts';
import { assertTransition, IllegalTransitionError, statusesLeadingTo } from './state.ts';
import { systemClock, type Clock } from './clock.ts';
import { applyDecisions, type WaitingCall } from './waits.ts';
import { ArgumentsNotEditableError } from './arguments-not-editable-error.ts';

export type IfBusy = 'reject' | 'enqueue' | 'steer' | 'interrupt';
/**
 * A message taken by a session: the run it created, waits for, or steers, and the events to
 * publish; `claimed`, a run claimed for a worker in the same transaction (see `send`'s `claim`).
 */
export type Accepted = {
  outcome: 'created' | 'enqueued' | 'steered';
  message: UserMessage;
  run: RunRecord;
  events: SessionEvent[];
  claimed?: Claimed;
};

/** A run claimed for a worker: a start, or the recovery of an interrupted run (`previous` running). */
export interface Claimed {
  run: RunRecord;
  previous: RunStatus;
  /** The run was never claimed before (see StoreOps.claimRun). */
  firstStart: boolean;
  claimedAt: number;
}
export type FinalStatus = 'completed' | 'failed' | 'cancelled' | 'timed_out';

export interface FinishOptions {
  reason?: string;
  error?: JsonObject;
  /** The run's own usage and cost (children's are added); default: what the row holds. */
  usage?: Usage;
  cost?: number;
  /** Only while the caller still holds the run with this token. */
  fencingToken?: number;
  /** Give open tool calls a result and close an open turn (when no loop is left to do it). */
  closeOpenCalls?: boolean;
  resolveAgent: (name: string, version?: string) => AgentDefinition | undefined;
}

/** What a waiting run waits for, as stored in its row (the waiting model, ADR-0015: see waits.ts). */
export interface Waiting {
  /** What it waits for first (its status says the same): approvals, questions, signals, time. */
  kind: PendingCall['kind'];
  /** The pending calls, each with its deadline if it has one (see WaitingCall). */
  calls: WaitingCall[];
  /** Decisions, answers and ended waits recorded so far, by tool call id. */
  decisions: Record<
    string,
    {
      approved?: boolean;
      input?: JsonValue;
      reason?: string;
      answer?: JsonValue;
      output?: ToolOutput;
      by?: string;
      at: number;
    }
  >;
  /** The first deadline of the calls still waiting (a sleep's wake-up included). */
  expiresAt: number | null;
}

/** What a run is sent with (see also SendOptions); `sessions.send` checks them (send-options.ts: keep it in step). */
export interface RunOptions {
  /** Wall-clock limit of the whole run, from its creation. */
  timeoutMs?: number;
  /** How long a waiting run waits for a decision or an answer. */
  waitTimeoutMs?: number;
  /** Claims by a worker before an interrupted run is given up as failed. */
  maxAttempts?: number;
  /**
   * The W3C trace context the run continues (stored with it): every execution of the run, on any
   * worker, traces under it. `sessions.send` sets it from its caller's context (see docs/observability.md).
   */
  trace?: TraceCarrier;
  /** When its model calls wait for provider limits: `interactive` before `batch` (docs/flow-control.md). */
  priority?: Priority;
}

/**
 * An idempotency key the caller wants recorded with the effect of a send, in the same
 * transaction: a retry after a crash between the effect and the response finds the effect.
 */
export interface IdempotencyClaim {
  tenant: string;
  key: string;
  /** What the request was (see `IdempotencyRecord.fingerprint`). */
  fingerprint: string;
}

/** What a send recorded under its idempotency key (the body of a status-0 record). */
export interface RecordedSend {
  outcome: 'created' | 'enqueued' | 'steered';
  message_id: string;
  run_id: string;
}

/** Throws when a request already took the key (its effect, or its answer, is recorded). */
export async function refuseTakenKey(
  store: { idempotency: Pick<StoreOps['idempotency'], 'get'> },
  claim: IdempotencyClaim,
): Promise<void> {
  if (await store.idempotency.get(claim.tenant, claim.key)) {
    throw new StoreError(
      'idempotency_in_progress',
      `a request with Idempotency-Key ${JSON.stringify(claim.key)} was already accepted`,
    );
  }
}

/**
 * Writes a message's effect (a send or a steer) under its key. Another request that recorded an effect under the same
 * key first (in another process) wins: this transaction rolls back, so nothing is sent twice.
 */
export async function recordEffect(
  tx: StoreOps,
  claim: IdempotencyClaim,
  effect: RecordedSend | JsonObject,
): Promise<void> {
  const body = JSON.stringify(effect);
  const stored = await tx.idempotency.put({ ...claim, status: 0, body, createdAt: Date.now() });
  if (stored.status !== 0 || stored.body !== body) {
    throw new StoreError(
      'idempotency_in_progress',
      `a request with Idempotency-Key ${JSON.stringify(claim.key)} was already accepted`,
    );
  }
}

/** The record of the agent a run uses: what it ran with, for audit and for recovery. */
export function agentSpec(agent: AgentDefinition): JsonObject {
  return {
    name: agent.name,
    version: agent.version,
    model: { provider: agent.model.provider, modelId: agent.model.modelId },
    system:
      typeof agent.system === 'function'
        ? { rendered: 'per request (function); see request headers' }
        : (agent.system ?? null),
    tools: agent.tools.map(toolSpec),
    settings: JSON.parse(JSON.stringify(agent.settings)) as JsonObject,
    limits: { ...agent.limits },
    retry: { ...agent.retry },
  };
}

/** One tool in a run's agent spec. */
function toolSpec(t: Tool): JsonObject {
  return {
    ...t.schema,
    approval: typeof t.approval === 'function' ? 'predicate' : t.approval,
    idempotent: t.idempotent,
    interactive: t.interactive,
    sequential: t.sequential,
    ...(t.timeoutMs !== undefined ? { timeoutMs: t.timeoutMs } : {}),
  } as JsonObject;
}

/**
 * The agent spec of a run once it got its MCP servers' tools (at its first start): its tools
 * followed by theirs, each naming its server and the server's own name for it (`mcp`), and which
 * servers it got them from or skipped (`mcp`: the `mcp/tools` record without the tools).
 */
export function specWithMcpTools(spec: JsonObject, got: McpToolsGot): JsonObject {
  const own = Array.isArray(spec.tools) ? spec.tools : [];
  const servers = got.record.servers.map(({ tools: _tools, ...server }) => server);
  return {
    ...spec,
    tools: [
      ...own,
      ...got.tools.map(({ tool: t, server, remoteName }) => ({ ...toolSpec(t), mcp: { server, remoteName } })),
    ],
    mcp: { servers, skipped: got.record.skipped } as unknown as JsonObject,
  };
}

export const usageOf = (u: JsonObject): Usage => ({ ...emptyUsage(), ...(u as Partial<Usage>) });

/** The row of a new run for a message: the agent it runs with, its deadline and options. */
function newRunOf(
  sessionId: string,
  message: UserMessage,
  agent: AgentDefinition,
  options: RunOptions,
  more: Partial<NewRun> = {},
): NewRun {
  const now = Date.now();
  return {
    id: newId(),
    sessionId,
    agent: { name: agent.name, version: agent.version },
    agentSpec: agentSpec(agent),
    triggerMessageId: message.id,
    createdAt: now,
    deadlineAt: options.timeoutMs !== undefined ? now + options.timeoutMs : null,
    options: options as unknown as JsonObject,
    ...more,
  };
}

/** The data of a new run's first `run/status` event. */
const queuedStatus = (agent: { name: string; version: string }) => ({
  from: null,
  to: 'queued' as const,
  attempt: 0,
  agent: { name: agent.name, version: agent.version },
});

/**
 * Every durable change to runs: each one a single transaction that updates the run row and
 * appends the matching session event, so the two can never disagree.
 */
export class RunBook {
  readonly sessions: Sessions;
  /** The time of waits and their deadlines (the runtime's clock). */
  clock: Clock = systemClock;

  constructor(sessions: Sessions) {
    this.sessions = sessions;
  }

  get store() {
    return this.sessions.store;
  }

  /** `trusted`: the events are built here from typed values (run status changes): no schema check on the hot path. */
  private append(
    tx: StoreOps,
    sessionId: string,
    events: readonly NewEvent[],
    fence?: { runId: string; token: number },
    trusted = false,
  ) {
    return this.sessions.log.append(sessionId, events, { tx, trusted, ...(fence ? { fence } : {}) });
  }

  /**
   * Where a run stands at its last step boundary: its stored checkpoint and the events logged for
   * it after that (see `lastBoundary`). Reads the run's events after the checkpoint: for a
   * recovery or a run's record, never on the hot path.
   */
  async boundary(
    run: Pick<RunRecord, 'id' | 'sessionId'>,
    ops: StoreOps = this.store,
  ): Promise<{
    checkpoint: Checkpoint | undefined;
    tail: SessionEvent[];
    at: { step: number; seq: number } | undefined;
  }> {
    const checkpoint = await ops.runs.getCheckpoint(run.id);
    const tail = await this.sessions.log.read(run.sessionId, { runId: run.id, afterSeq: checkpoint?.seq ?? 0 }, ops);
    return { checkpoint, tail, at: lastBoundary(checkpoint, tail) };
  }

  async get(id: string): Promise<RunRecord> {
    const r = await this.store.runs.get(id);
    if (!r) throw new NotFoundError('run', id);
    return r;
  }

  /**
   * Validates and applies a status change inside `tx`: the row (a compare-and-set on the status it
   * was read with, and the fencing token when a worker writes) and a `run/status` event.
   */
  async transition(
    tx: StoreOps,
    run: RunRecord,
    to: RunStatus,
    o: { reason?: string; error?: JsonObject; patch?: RunPatch; guard?: RunGuard; fence?: boolean } = {},
  ): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    assertTransition(run.id, run.status, to);
    const now = Date.now();
    const patch: RunPatch = { ...o.patch, status: to };
    if (isTerminal(to)) {
      patch.endedAt = now;
      patch.lease = null;
      patch.waiting = null;
      patch.fence = true;
    }
    if (o.error) patch.error = o.error;
    if (o.fence) patch.fence = true;
    const guard: RunGuard = { statuses: [run.status], ...o.guard };
    const events = await this.append(
      tx,
      run.sessionId,
      [
        {
          type: 'run/status',
          runId: run.id,
          ...(run.turn !== null ? { turn: run.turn } : {}),
          data: {
            from: run.status,
            to,
            attempt: run.attempt,
            ...(o.reason ? { reason: o.reason } : {}),
            ...(o.error ? { error: o.error as Record<string, never> } : {}),
          },
        },
      ],
      o.guard?.fencingToken !== undefined ? { runId: run.id, token: o.guard.fencingToken } : undefined,
      true,
    );
    const updated = await tx.runs.update(run.id, patch, guard);
    return { run: updated, events };
  }

  /**
   * A user message for a session: a new run, or (when a run is active) what `ifBusy` says.
   * `enqueue` stores the message; it becomes the next run in the same transaction as the active
   * run's end. A waiting run never takes a message as its answer: answers go through `input`.
   */
  async send(
    sessionId: string,
    input: UserInput | UserMessage,
    agent: AgentDefinition,
    o: {
      ifBusy?: IfBusy;
      options?: RunOptions;
      parent?: { runId: string; toolCallId: string };
      idempotency?: IdempotencyClaim;
      /**
       * Claims a run for a worker of this process that has a free slot, when the message created
       * one: in the same transaction, so that the run starts without a commit of its own (ADR-0027).
       * It claims as the worker would, the oldest claimable run first, which may be another one.
       */
      claim?: (tx: StoreOps) => Promise<Claimed | undefined>;
    } = {},
  ): Promise<Accepted> {
    const message = userMessage(input);
    const ifBusy = o.ifBusy ?? 'reject';
    return this.sessions.log.transaction(async (tx) => {
      // Checked first, under the write lock: a request that lost the key to another changes nothing.
      if (o.idempotency) await refuseTakenKey(tx, o.idempotency);
      const accepted = await this.accept(tx, sessionId, message, agent, ifBusy, o);
      if (o.idempotency)
        await recordEffect(tx, o.idempotency, {
          outcome: accepted.outcome,
          message_id: accepted.message.id,
          run_id: accepted.run.id,
        });
      if (accepted.outcome !== 'created' || !o.claim) return accepted;
      const claimed = await o.claim(tx);
      if (!claimed) return accepted;
      // The message's run as committed: running, if it was the one claimed.
      return { ...accepted, claimed, ...(claimed.run.id === accepted.run.id ? { run: claimed.run } : {}) };
    });
  }

  /** What a message does to its session (`send` without the transaction around it; schedules fire through it). */
  async accept(
    tx: StoreOps,
    sessionId: string,
    message: UserMessage,
    agent: AgentDefinition,
    ifBusy: IfBusy,
    o: { options?: RunOptions; parent?: { runId: string; toolCallId: string } },
  ): Promise<Accepted> {
    const session = await tx.sessions.get(sessionId);
    if (!session) throw new NotFoundError('session', sessionId);
    if (session.erasedAt !== null) throw new StoreError('session_erased', `session ${sessionId} was erased`);
    if (session.archivedAt !== null)
      throw new StoreError('session_archived', `session ${sessionId} is archived: it takes no new messages`);
    // The caller's message is checked before anything keeps it, whatever it does: a steer is logged
    // by the run's own (unchecked) commits, and an enqueued one enters the log with another run's end.
    const checked = this.checkedMessage(message);
    const active = await tx.runs.active(sessionId);
    if (active) {
      switch (ifBusy) {
        case 'reject':
          throw new RunBusyError(sessionId, active.id);
        case 'enqueue': {
          const queued = await this.enqueueRun(tx, sessionId, active, checked, agent, o.options ?? {});
          return { outcome: 'enqueued' as const, message: checked, ...queued };
        }
        case 'steer':
          await tx.inputs.add({
            id: checked.id,
            sessionId,
            kind: 'steer',
            runId: active.id,
            payload: { message: checked },
            createdAt: Date.now(),
          });
          return { outcome: 'steered' as const, message: checked, run: active, events: [] };
        case 'interrupt':
          // The caller cancels the active run first (gracefully if it can); here it must be gone.
          throw new RunBusyError(sessionId, active.id);
      }
    }
    const created = await this.createRun(tx, session, checked, agent, o.options ?? {}, o.parent, true);
    return { outcome: 'created' as const, message: checked, ...created };
  }

  /** The message as its event's schema parses it; InvalidEventError when it is not a user message, or says nothing. */
  checkedMessage(message: UserMessage): UserMessage {
    return checkedUserMessage(this.sessions.log.registry, message);
  }

  /**
   * A run for an enqueued message, at once: queued behind the session's active run (not claimable,
   * no turn yet), with its status event. The message waits in the inbox, out of the log, so the
   * active run never sees it; it enters the log when the run comes up (`promote`).
   */
  private async enqueueRun(
    tx: StoreOps,
    sessionId: string,
    active: RunRecord,
    message: UserMessage,
    agent: AgentDefinition,
    options: RunOptions,
  ): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    const run = await tx.runs.create(newRunOf(sessionId, message, agent, options, { queuedBehind: true }));
    await tx.inputs.add({
      id: message.id,
      sessionId,
      kind: 'message',
      runId: run.id,
      payload: { message },
      createdAt: run.createdAt,
    });
    const events = await this.append(tx, sessionId, [
      { type: 'run/status', runId: run.id, data: { ...queuedStatus(agent), reason: `queued behind run ${active.id}` } },
    ]);
    return { run, events };
  }

  /**
   * Appends the trigger message and creates the run (queued) with its status event. The message is
   * checked against its event's schema unless `checked` says it was (see checkedMessage); the
   * status event is built here from typed values and needs no check (as every run/status this
   * book appends).
   */
  async createRun(
    tx: StoreOps,
    session: SessionRecord,
    message: UserMessage,
    agent: AgentDefinition,
    options: RunOptions,
    parent?: { runId: string; toolCallId: string },
    checked = false,
  ): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    const sessionId = session.id;
    const turn = session.lastTurn + 1;
    const trigger = checked ? message : this.checkedMessage(message);
    const run = await tx.runs.create(
      newRunOf(sessionId, trigger, agent, options, {
        turn,
        ...(parent ? { parentRunId: parent.runId, parentToolCallId: parent.toolCallId } : {}),
      }),
    );
    const id = run.id;
    const events = await this.append(
      tx,
      sessionId,
      [
        { type: 'user/message', runId: id, turn, data: { message: trigger, via: 'input' } },
        {
          type: 'run/status',
          runId: id,
          turn,
          data: { ...queuedStatus(agent), ...(parent ? { parentRunId: parent.runId } : {}) },
        },
      ],
      undefined,
      true,
    );
    return { run, events };
  }

  /**
   * Ends a run (completed, failed, cancelled, timed_out) in one transaction: tool calls left open
   * get a result (no dangling call), the turn is closed in the log if the loop could not do it,
   * the usage of children is rolled up, the parent learns its child's cost, and the session's
   * next enqueued message becomes the next run.
   */
  async finish(
    run: RunRecord,
    to: FinalStatus,
    o: FinishOptions,
  ): Promise<{ run: RunRecord; next?: RunRecord; events: SessionEvent[] }> {
    return this.sessions.log.transaction((tx) => this.finishIn(tx, run.id, to, o));
  }

  /** `finish` inside the caller's transaction (a log transaction: its events are published when it commits). */
  async finishIn(
    tx: StoreOps,
    runId: string,
    to: FinalStatus,
    o: FinishOptions,
  ): Promise<{ run: RunRecord; next?: RunRecord; events: SessionEvent[] }> {
    const current = await tx.runs.get(runId);
    if (!current) throw new NotFoundError('run', runId);
    if (isTerminal(current.status)) return { run: current, events: [] };
    if (o.fencingToken !== undefined && current.fencingToken !== o.fencingToken) {
      throw new IllegalTransitionError(runId, current.status, to, 'this worker no longer holds the run');
    }
    const events: SessionEvent[] = [];
    if (o.closeOpenCalls) events.push(...(await this.closeOpenCalls(tx, current, to)));
    // Steering the run never took (it ended first: cancelled, failed, timed out) is not dropped:
    // it joins the conversation with the run's end, where the next run sees it.
    const untaken = await tx.inputs.take(current.sessionId, 'steer', current.id);
    if (untaken.length > 0) {
      events.push(
        ...(await this.append(
          tx,
          current.sessionId,
          untaken.map((i) => ({
            type: 'user/message' as const,
            runId: current.id,
            ...(current.turn !== null ? { turn: current.turn } : {}),
            data: { message: (i.payload as { message: UserMessage }).message, via: 'steer' as const },
          })),
        )),
      );
    }

    // The worker reports its own usage; children's comes on top.
    const { usage, cost } =
      o.usage !== undefined
        ? await this.withChildren(tx, runId, o.usage, o.cost ?? current.cost)
        : { usage: usageOf(current.usage), cost: current.cost };
    const t = await this.transition(tx, current, to, {
      ...(o.reason ? { reason: o.reason } : {}),
      ...(o.error ? { error: o.error } : {}),
      patch: { usage: usage as unknown as JsonObject, cost },
      guard: { fencingToken: current.fencingToken },
    });
    events.push(...t.events);
    // A run that ended while queued behind never came up: its message leaves the inbox with it.
    if (current.queuedBehind) await tx.inputs.take(current.sessionId, 'message', current.id, 1);
    if (current.parentRunId) {
      // Once, when the child ends: also when its parent ended first (cancelled while the child ran),
      // since the parent's own total only counted the children that had ended (see withChildren).
      const parent = await tx.runs.get(current.parentRunId);
      if (parent)
        await tx.runs.update(parent.id, {
          usage: addUsage(usageOf(parent.usage), usage) as unknown as JsonObject,
          cost: parent.cost + cost,
        });
    }
    // Only the session's active run makes way for the next; one that ends while queued behind does not.
    const next = current.queuedBehind ? undefined : await this.promote(tx, current.sessionId, o.resolveAgent);
    if (next) events.push(...next.events);
    return { run: t.run, ...(next?.run ? { next: next.run } : {}), events };
  }

  /**
   * A run's total: its own usage and cost plus those of its children that have ended. A child
   * that has not ended adds its total to its parent's row when it ends, so each child counts once.
   */
  async withChildren(
    tx: StoreOps,
    runId: string,
    own: Usage,
    ownCost: number,
  ): Promise<{ usage: Usage; cost: number }> {
    let usage = own;
    let cost = ownCost;
    for (const c of await tx.runs.list({ parentRunId: runId, statuses: TERMINAL_STATUSES, limit: 10_000 })) {
      usage = addUsage(usage, usageOf(c.usage));
      cost += c.cost;
    }
    return { usage, cost };
  }

  /**
   * The session's oldest run queued behind comes up (in the transaction that ended the active
   * run): its message enters the log as its turn's first event, and it becomes claimable. A run
   * whose agent is no longer registered ends `failed`, saying so, and the next one comes up.
   * Messages enqueued by a Keel before queued runs (inputs without a run) become runs here.
   */
  private async promote(
    tx: StoreOps,
    sessionId: string,
    resolveAgent: (name: string, version?: string) => AgentDefinition | undefined,
  ): Promise<{ run?: RunRecord; events: SessionEvent[] }> {
    const events: SessionEvent[] = [];
    for (;;) {
      const [behind] = (await tx.runs.list({ sessionId, statuses: ['queued'], limit: 10_000 }))
        .filter((r) => r.queuedBehind)
        .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
      const [legacy] = behind ? [] : await tx.inputs.list(sessionId, 'message', null, 1);
      if (!behind && !legacy) return { events };
      if (legacy) {
        await tx.inputs.remove(legacy.id);
        const p = legacy.payload as {
          message: UserMessage;
          agent: string;
          agentVersion?: string;
          options?: RunOptions;
        };
        const agent = resolveAgent(p.agent, p.agentVersion) ?? resolveAgent(p.agent);
        if (agent) {
          const session = (await tx.sessions.get(sessionId))!;
          const created = await this.createRun(tx, session, p.message, agent, p.options ?? {});
          return { run: created.run, events: [...events, ...created.events] };
        }
        // Recorded as a run that failed, so that the message is not dropped without a trace.
        const run = await tx.runs.create({
          id: newId(),
          sessionId,
          agent: { name: p.agent, version: p.agentVersion ?? 'unknown' },
          agentSpec: { name: p.agent },
          triggerMessageId: p.message.id,
          queuedBehind: true,
          createdAt: Date.now(),
        });
        events.push(
          ...(await this.append(tx, sessionId, [{ type: 'run/status', runId: run.id, data: queuedStatus(run.agent) }])),
        );
        events.push(...(await this.agentGone(tx, run)));
        continue;
      }
      const [input] = await tx.inputs.take(sessionId, 'message', behind!.id, 1);
      const agent = resolveAgent(behind!.agent.name, behind!.agent.version);
      if (!agent || !input) {
        events.push(
          ...(await this.agentGone(tx, behind!, input ? undefined : 'its message is missing from the inbox')),
        );
        continue;
      }
      const message = (input.payload as { message: UserMessage }).message;
      const session = (await tx.sessions.get(sessionId))!;
      const turn = session.lastTurn + 1;
      events.push(
        ...(await this.append(tx, sessionId, [
          { type: 'user/message', runId: behind!.id, turn, data: { message, via: 'input' } },
        ])),
      );
      const run = await tx.runs.update(behind!.id, { queuedBehind: false, turn }, { statuses: ['queued'] });
      return { run, events };
    }
  }

  /** A run queued behind whose agent is gone (or whose message is): it ends failed, with the reason. */
  private async agentGone(tx: StoreOps, run: RunRecord, why?: string): Promise<SessionEvent[]> {
    const message = why ?? `agent ${run.agent.name}@${run.agent.version} is not registered any more`;
    const t = await this.transition(tx, run, 'failed', {
      reason: `the run cannot start: ${message}`,
      error: { code: why ? 'message_missing' : 'agent_not_found', message },
    });
    return t.events;
  }

  /**
   * Gives every tool call of the run that has no result a `cancelled` (or timeout) result, and
   * closes a turn the loop left open, so the history never has a dangling call.
   */
  private async closeOpenCalls(tx: StoreOps, run: RunRecord, to: RunStatus): Promise<SessionEvent[]> {
    const mine = await this.sessions.log.read(run.sessionId, { runId: run.id }, tx);
    const results = new Set<string>();
    const toolMessageOf = new Map<string, string>();
    const open: Array<{ toolCallId: string; toolName: string; assistantId: string; step: number | undefined }> = [];
    let turnOpen = false;
    let steps = 0;
    for (const e of mine) {
      if (e.type === 'turn/start') turnOpen = true;
      else if (e.type === 'turn/end') turnOpen = false;
      else if (e.type === 'step/start') steps = Math.max(steps, e.step ?? 0);
      else if (e.type === 'tool/result') {
        results.add(e.data.toolCallId);
        toolMessageOf.set(e.data.toolCallId, e.data.toolMessageId);
      } else if (e.type === 'assistant/message') {
        for (const p of e.data.message.content) {
          if (p.type === 'tool-call')
            open.push({ toolCallId: p.toolCallId, toolName: p.toolName, assistantId: e.data.message.id, step: e.step });
        }
      }
    }
    const unanswered = open.filter((c) => !results.has(c.toolCallId));
    const why =
      to === 'timed_out'
        ? 'the run timed out before this call had a result'
        : 'the run was cancelled before this call had a result';
    const events: NewEvent[] = [];
    const messageFor = new Map<string, string>();
    for (const c of unanswered) {
      // Results of one model decision share a tool message.
      const sibling = open.find((o) => o.assistantId === c.assistantId && toolMessageOf.has(o.toolCallId));
      const toolMessageId =
        messageFor.get(c.assistantId) ?? (sibling ? toolMessageOf.get(sibling.toolCallId)! : newId());
      messageFor.set(c.assistantId, toolMessageId);
      events.push({
        type: 'tool/result',
        runId: run.id,
        ...(run.turn !== null ? { turn: run.turn } : {}),
        ...(c.step !== undefined ? { step: c.step } : {}),
        data: {
          toolCallId: c.toolCallId,
          toolName: c.toolName,
          output: { type: 'error', code: 'cancelled', message: why },
          toolMessageId,
          durationMs: 0,
        },
      });
    }
    if (turnOpen) {
      events.push({
        type: 'turn/end',
        runId: run.id,
        ...(run.turn !== null ? { turn: run.turn } : {}),
        data: { reason: 'cancelled', steps, usage: usageOf(run.usage), cost: run.cost },
      });
    }
    return events.length ? this.append(tx, run.sessionId, events) : [];
  }

  /** Records an approval decision or an answer once; the run is queued again when nothing is left to decide. */
  async decide(
    runId: string,
    toolCallId: string,
    d: { approved?: boolean; input?: JsonValue; reason?: string; answer?: JsonValue },
  ): Promise<RunRecord> {
    const out = await this.sessions.log.transaction(async (tx) => {
      const run = await tx.runs.get(runId);
      if (!run) throw new NotFoundError('run', runId);
      const waiting = run.waiting as unknown as Waiting | null;
      const call = waiting?.calls.find((c) => c.toolCallId === toolCallId);
      const wantKind = d.answer !== undefined ? 'input' : 'approval';
      const wantStatus: RunStatus = wantKind === 'input' ? 'waiting_for_user' : 'waiting_approval';
      const what = (kind: string) =>
        kind === 'input' ? 'a question' : kind === 'approval' ? 'an approval' : `a ${kind} wait`;
      if (!waiting || !call) {
        // Not waited for now. An id the run never asked about is no such thing (404), whatever
        // the run's state; one it asked about before is refused by the state it is in now (409).
        const asked = await this.askedBefore(tx, run, toolCallId);
        if (!asked)
          throw new StoreError(
            'not_found',
            `run ${runId} has no ${wantKind === 'input' ? 'question' : 'approval'} ${toolCallId}`,
          );
        throw new IllegalTransitionError(
          runId,
          run.status,
          'queued',
          `it is ${run.status}: ${what(asked)} ${toolCallId} is not waiting for ${wantKind === 'input' ? 'an answer' : 'a decision'}`,
        );
      }
      // A run that waits for no decision, or a call of another kind: the run's state refuses it (409).
      if (run.status !== 'waiting_approval' && run.status !== 'waiting_for_user') {
        throw new IllegalTransitionError(runId, run.status, 'queued', `it is ${run.status} and waits for no decision`);
      }
      if (call.kind !== wantKind) {
        throw new IllegalTransitionError(
          runId,
          run.status,
          'queued',
          `${toolCallId} is ${what(call.kind)}, not ${what(wantKind)}`,
        );
      }
      const previous = waiting.decisions[toolCallId];
      if (previous) {
        const same = JSON.stringify({ ...previous, at: 0 }) === JSON.stringify({ ...d, at: 0 });
        if (same) return { run, events: [] as SessionEvent[] };
        throw new StoreError(
          'already_decided',
          `${wantKind === 'input' ? 'question' : 'approval'} ${toolCallId} of run ${runId} was already answered`,
        );
      }
      if (run.status !== wantStatus)
        throw new IllegalTransitionError(runId, run.status, 'queued', `it is ${run.status}, not ${wantStatus}`);
      if (call.unknownOutcome && d.input !== undefined) throw new ArgumentsNotEditableError(runId, toolCallId);
      const decision = { ...d, at: this.clock.now() };
      const event: NewEvent =
        wantKind === 'input'
          ? {
              type: 'user/answer',
              runId,
              ...(run.turn !== null ? { turn: run.turn } : {}),
              data: { toolCallId, answer: d.answer! },
            }
          : {
              type: 'tool/decision',
              runId,
              ...(run.turn !== null ? { turn: run.turn } : {}),
              data: {
                toolCallId,
                approved: d.approved === true,
                ...(d.reason !== undefined ? { reason: d.reason } : {}),
                // On an unknown outcome (ADR-0018) the call runs again as it ran: with its input and key.
                ...(call.unknownOutcome
                  ? { unknownOutcome: true as const, editedInput: call.input }
                  : d.input !== undefined
                    ? { editedInput: d.input }
                    : {}),
              },
            };
      // Queued when nothing is left to wait for (the decisions are in the log, where the resumed turn
      // reads them), else what is still awaited (approvals, questions, signals, time) says the status.
      const left = waiting.calls.filter((c) => c.toolCallId !== toolCallId && !waiting.decisions[c.toolCallId]);
      return applyDecisions(
        this,
        tx,
        run,
        waiting,
        { [toolCallId]: decision },
        [event],
        left.length === 0 ? (wantKind === 'input' ? 'answered' : 'decided') : 'partly decided',
      );
    });
    return out.run;
  }

  /** Whether the run ever asked for an approval or an answer on this call (its log says), and which. */
  private async askedBefore(
    tx: StoreOps,
    run: RunRecord,
    toolCallId: string,
  ): Promise<'approval' | 'input' | undefined> {
    for (const e of await this.sessions.log.read(run.sessionId, { runId: run.id }, tx)) {
      if (e.type === 'tool/approval' && e.data.toolCallId === toolCallId) return 'approval';
      if (e.type === 'user/question' && e.data.toolCallId === toolCallId) return 'input';
    }
    return undefined;
  }

  /** A simple status change (pause, resume, park) with its event, in one transaction. */
  async move(
    runId: string,
    to: RunStatus,
    o: { reason?: string; patch?: RunPatch; guard?: RunGuard } = {},
  ): Promise<RunRecord> {
    const out = await this.sessions.log.transaction(async (tx) => {
      const run = await tx.runs.get(runId);
      if (!run) throw new NotFoundError('run', runId);
      return this.transition(tx, run, to, o);
    });
    return out.run;
  }

  /** Sets a request flag on a run (cancel, pause) for the worker that holds it. */
  async request(runId: string, patch: Pick<RunPatch, 'cancelRequested' | 'pauseRequested'>): Promise<RunRecord> {
    const run = await this.get(runId);
    if (isTerminal(run.status)) return run;
    return this.store.runs.update(runId, patch, { statuses: statusesLeadingTo('cancelled') });
  }
}
