import {
  startTurn,
  type AgentDefinition,
  type TurnEvent,
  type TurnHandle,
  type TurnHooks,
  type TurnResult,
} from '../core/index.ts';
import type { UserMessage } from '../model/index.ts';
import { compactionHook, type CompactionSettings } from '../session/index.ts';
import { isStoreUnavailable, type JsonObject, type RunInput, type RunRecord } from '../store/index.ts';
import { RunSpans } from '../telemetry/run-spans.ts';
import type { TraceCarrier } from '../telemetry/trace-context.ts';
import type { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import type { RunBoundary, RunOptions } from './lifecycle/types.ts';
import type { Waiting } from './lifecycle/waiting.ts';
import { runScope, type RunHost, type RunScope } from './run-scope.ts';
import type { RunObservers } from './observer.ts';
import { resumePoint } from './resume.ts';
import { rerunLineage } from './reruns/rerun-lineage.ts';
import type { RunEnd } from './lifecycle/end-turn.ts';
import { RunSink } from './sink.ts';
import type { Waits } from './waits.ts';
import type { OfferedSlot } from './worker-slot.ts';
import type { Quotas, QuotaStop, RunSlot } from './quotas/quotas.ts';
import { estimateCall } from './quotas/estimate-call.ts';

export { runScope, type RunHost, type RunScope } from './run-scope.ts';

export interface ExecutionEnv {
  lifecycle: RunLifecycle;
  owner: string;
  leaseMs: number;
  renewEveryMs: number;
  /** How often a running execution reads requests made in other processes (cancel, pause, steering). */
  controlPollMs: number;
  maxAttempts: number;
  resolveAgent(name: string, version?: string): AgentDefinition | undefined;
  compactionFor(agent: AgentDefinition): CompactionSettings | undefined;
  host: RunHost;
  /** Told of lost leases (metrics). */
  observers?: RunObservers;
  /** Record message contents on spans (see TelemetryOptions.recordContent). */
  recordContent?: boolean;
  /** Deadlines, wake-ups and signals of waiting runs (ADR-0015). */
  waits?: Waits;
  /** The agent as this run executes it (its MCP servers' tools, recorded at the run's start: src/mcp); an error with a `kind` fails the run. */
  prepareAgent?(agent: AgentDefinition, run: RunRecord): Promise<AgentDefinition>;
  /** Tenant quotas (ADR-0043): each model call reserves its estimate first; absent when none are configured. */
  quotas?: Quotas;
}

/**
 * One claimed run on one worker: restores where it stands (fresh, checkpoint + log tail, or the
 * decisions it waited for), runs its turn with a fenced sink, keeps the lease alive from a timer
 * that does not depend on the loop, and notices cancel and pause requests made elsewhere.
 */
export class Execution {
  readonly run: RunRecord;
  private readonly env: ExecutionEnv;
  private readonly token: number;
  private handle: TurnHandle | undefined;
  private sink: RunSink | undefined;
  /** The execution's spans: only while a tracer records (see RunSpans). */
  private spans: RunSpans | undefined;
  private renewTimer: ReturnType<typeof setInterval> | undefined;
  private controlTimer: ReturnType<typeof setInterval> | undefined;
  private deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  private stopReason: 'timeout' | 'lease_lost' | 'release' | 'cancel' | undefined;
  private pauseRequested = false;
  private readonly steered = new Set<string>();
  /**
   * Steering may be waiting in the store: at the start (it may have come before the claim), when
   * this process stored some, or when a lease renewal saw some from another process. The store
   * is read at a step boundary only then, not at every step.
   */
  private steeringMaybe = true;
  /** The steering listed while the run's start read its context (taken at the first boundary, unless steering came since). */
  private steeringRead: Promise<RunInput[]> | undefined;
  /** Until when the lease surely holds: the claim's expiry, then each successful renewal's. */
  private leaseHeldUntil: number;
  /** Waits outside the run in progress (see RunScope.waitOutside): while any, it holds no slot. */
  private waitsOutside = 0;
  /** Quotas (ADR-0043): the run's tenant and key, read at its first step boundary. */
  private quotaOwner: { tenant: string; keyId: string | null } | undefined;
  /** The run's slot among its tenant's concurrent runs (when a quota limits them), taken at its first step boundary. */
  private runSlot: RunSlot | undefined;
  private runSlotAsked = false;
  /** The last model call reserved: released at the turn's end unless its step settled it. */
  private quotaCall: string | undefined;
  /** A quota refused the next model call: the turn ends at that boundary (see `outcome`). */
  private quotaStop: QuotaStop | undefined;
  /** Told when the execution starts or stops waiting outside the run (the worker's slot count changes). */
  onSlotChange: (() => void) | undefined;
  /** At the run's turn end, the slot it leaves, for a run claimed in the end's transaction (see Worker.handOver). */
  handOver: (() => OfferedSlot | undefined) | undefined;
  readonly done: Promise<void>;

  /** Whether the execution holds a worker slot: not while it only waits for something outside the run. */
  get holdsSlot(): boolean {
    return this.waitsOutside === 0;
  }

  private async waitOutside<T>(p: Promise<T>): Promise<T> {
    if (this.waitsOutside++ === 0) this.onSlotChange?.();
    try {
      return await p;
    } finally {
      if (--this.waitsOutside === 0) this.onSlotChange?.();
    }
  }

  /** The run was never claimed before this execution's claim: nothing of its turn is stored yet. */
  private readonly firstStart: boolean;
  /** Where the run stood in the log when it was claimed, read by the claim (see lifecycle/claim.ts). */
  private readonly claimedBoundary: RunBoundary | undefined;
  /** Ends the session log's knowledge that this process executes the run (its deltas are numbered here). */
  private readonly executesHere: () => void;

  constructor(env: ExecutionEnv, run: RunRecord, o: { firstStart?: boolean; boundary?: RunBoundary } = {}) {
    this.env = env;
    this.run = run;
    this.firstStart = o.firstStart ?? false;
    this.claimedBoundary = o.boundary;
    this.token = run.fencingToken;
    this.leaseHeldUntil = run.lease?.expiresAt ?? Date.now() + env.leaseMs;
    this.executesHere = env.lifecycle.sessions.log.executes(run.id);
    this.done = this.execute().finally(() => this.cleanup());
  }

  /** The trace context of this execution (its span), or the one stored with the run: for the runs it starts (subagents). */
  get traceCarrier(): TraceCarrier | undefined {
    return this.spans?.carrier ?? (this.run.options as RunOptions).trace;
  }

  /**
   * The run as this execution's turn end left it, when `statusEventId` is the `run/status` event
   * that end committed: a waiter that heard that event needs no read of the run.
   */
  endedWith(statusEventId: string): RunRecord | undefined {
    return this.sink?.endEventId === statusEventId ? this.sink.ended : undefined;
  }

  /** Cancel from this process: the loop aborts its model call and tools and closes open calls. */
  cancel(): void {
    this.stopReason ??= 'cancel';
    this.handle?.cancel('run cancelled');
  }

  pause(): void {
    this.pauseRequested = true;
  }

  /** Steering for this run was stored: take it at the next step boundary. */
  steeringArrived(): void {
    this.steeringMaybe = true;
    this.steeringRead = undefined;
  }

  unpause(): void {
    if (this.stopReason !== 'release') this.pauseRequested = false;
  }

  /**
   * Lets go of the run for another worker: at once (`now`), as if this process had died (the
   * next owner recovers from the checkpoint), or at the next step boundary.
   */
  release(now: boolean): void {
    this.stopReason ??= 'release';
    if (!now) {
      this.pauseRequested = true;
      return;
    }
    if (this.sink) this.sink.closed = true;
    this.handle?.cancel('worker shutting down');
  }

  /**
   * The execution is over: its timers stop, and it lets go of its turn and its sink. An ended
   * execution can stay alive through V8's young-generation collections (a heap snapshot does not
   * hold it, a full collection frees it), and the whole turn was kept with it: its messages,
   * renderings and streams promoted to the old generation at every run (the measurement log,
   * `git show 8c637b6:docs/performance.md`, 2026-12-04, thirteenth session). Likely cause: objects
   * V8 pretenured, dead in the old generation, still pointing at young ones (the fourteenth
   * session). A waiter hears the run's end before this (the end's commit publishes it), so
   * `endedWith` has answered by then; later it reads.
   */
  private cleanup(): void {
    clearInterval(this.renewTimer);
    clearInterval(this.controlTimer);
    clearTimeout(this.deadlineTimer);
    if (this.runSlot) void this.runSlot.release().catch(() => {});
    this.executesHere();
    this.sink = undefined;
    this.handle = undefined;
  }

  /** Runs the execution under its `invoke_agent` span (when a tracer records), which ends with it. */
  private async execute(): Promise<void> {
    this.spans = RunSpans.start(this.run, { recordContent: this.env.recordContent === true, worker: this.env.owner });
    if (!this.spans) return void (await this.executeRun());
    let ended: RunRecord | undefined;
    try {
      ended = await this.executeRun();
    } catch (e) {
      this.spans.end({ thrown: e, stopReason: this.stopReason });
      throw e;
    }
    this.spans.end({ run: ended, stopReason: this.stopReason });
  }

  /** The run as this execution left it (undefined when it could not write its end). */
  private async executeRun(): Promise<RunRecord | undefined> {
    const { lifecycle } = this.env;
    const run = this.run;
    const agent = this.env.resolveAgent(run.agent.name, run.agent.version);
    // Where the run stands in the log: its checkpoint and its events after it (read at most once; never for a first claim).
    // A claim hands it over (it read it in its transaction); else it is read here.
    let read: Promise<RunBoundary> | undefined = this.claimedBoundary && Promise.resolve(this.claimedBoundary);
    const boundary = () => (read ??= lifecycle.boundary(run));
    const finish = async (to: 'failed' | 'cancelled' | 'timed_out', reason: string, error?: JsonObject) => {
      // A recovered run that ends at once still gets, in its trace, the spans its interrupted execution had open.
      if (this.spans && !this.firstStart) this.spans.recovered((await boundary()).tail);
      return (
        await lifecycle.finish(run, to, {
          reason,
          ...(error ? { error } : {}),
          fencingToken: this.token,
          closeOpenCalls: true,
          resolveAgent: this.env.resolveAgent,
        })
      ).run;
    };

    if (!agent) {
      return finish('failed', 'agent unavailable', {
        kind: 'agent_unavailable',
        message: `no agent ${run.agent.name} version ${run.agent.version} is registered on this worker`,
      });
    }
    if (run.cancelRequested) return finish('cancelled', 'cancel requested');
    if (run.deadlineAt !== null && Date.now() >= run.deadlineAt) return finish('timed_out', 'run timeout');
    if (run.attempt > this.env.maxAttempts) {
      return finish('failed', 'attempts exhausted', {
        kind: 'attempts_exhausted',
        message: `the run was interrupted ${run.attempt - 1} times (limit ${this.env.maxAttempts - 1})`,
      });
    }

    /** The agent as this execution runs it (see ExecutionEnv.prepareAgent). */
    let running = agent;
    const options = run.options as RunOptions;
    this.sink = new RunSink(lifecycle, run, this.token, {
      outcome: (end) => this.outcome(end),
      resolveAgent: this.env.resolveAgent,
      waitTimeoutMs: options.waitTimeoutMs,
      steeringWaiting: () => this.steeringArrived(),
      settleWaits: this.env.waits !== undefined,
      settleQuotas: () => this.quotaCall !== undefined,
      // No other worker can claim the run before its lease expires: well before that, it is ours.
      leaseHolds: () => Date.now() < this.leaseHeldUntil - this.env.renewEveryMs,
      leaseRunning: () => Date.now() < this.leaseHeldUntil,
      spans: this.spans,
      // Not while the run holds its tenant's concurrent-run slot (ADR-0043), released once it is done.
      handOver: () => (this.runSlot ? undefined : this.handOver?.()),
    });
    // The agent as this execution runs it (`running`, set below): its prices and settings make a call's estimate.
    const hooks: TurnHooks[] = [this.boundaryHook(() => running)];
    const compaction = this.env.compactionFor(agent);
    if (compaction)
      hooks.push(
        compactionHook(
          lifecycle.sessions.log,
          run.sessionId,
          agent.model,
          compaction,
          lifecycle.sessions.snapshotEvery,
          run.id,
        ),
      );

    const base = {
      sink: this.sink,
      hooks,
      // What the model sees of a large tool result: the view the log rebuilds the context with.
      largePayloads: lifecycle.sessions.log.payloads,
      scope: run.id,
      now: () => lifecycle.clock.now(),
      ...(run.turn !== null ? { turn: run.turn } : {}),
    };
    // Where the run stands is in the log: its checkpoint (counters and a log position) and its
    // events after it. A run whose turn never reached the log starts fresh from the context; one
    // never claimed before has neither (only an execution of a claim writes them), and is not read.
    const { checkpoint, tail } = this.firstStart ? { checkpoint: undefined, tail: [] } : await boundary();
    // Recovered from an execution that could not end its spans: they are made from its events (RunSpans.recovered).
    this.spans?.recovered(tail);
    let start: () => TurnHandle;
    // A rerun from a step continues its source run's turn at that step (src/runs/reruns).
    const rerun = rerunLineage(run);
    const continues = rerun && !rerun.messageReplaced ? rerun.of.step : undefined;
    if (!checkpoint && !tail.some((e) => e.type === 'turn/start')) {
      if (continues !== undefined) {
        // The turn so far, as its loop held it: the trigger and the steps before, copied into the fork.
        const { messages } = await lifecycle.sessions.turnConversation(run.sessionId, run.turn ?? 0);
        this.spans?.started(messages);
        start = () => startTurn(running, { ...base, continueFrom: { step: continues, conversation: messages } });
      } else {
        // A fresh run: the session's model context (the trigger message is already in it).
        // (The loop makes it portable: opaque reasoning never crosses a turn.)
        // The steering that came before the claim is listed meanwhile (one round trip for both).
        this.steeringRead = lifecycle.store.inputs.list(run.sessionId, 'steer', run.id);
        this.steeringRead.catch(() => {});
        const history = (await lifecycle.sessions.context(run.sessionId)).messages;
        this.spans?.started(history);
        start = () => startTurn(running, { ...base, history });
      }
    } else {
      const { messages } = await lifecycle.sessions.turnConversation(run.sessionId, run.turn ?? 0);
      const resume = resumePoint(checkpoint, messages, tail, run.waiting as unknown as Waiting | null);
      // A rerun interrupted before its first step ended goes on from the step it started at.
      if (continues !== undefined && resume.step < continues - 1) resume.step = continues - 1;
      start = () => startTurn(running, { ...base, resume });
    }

    this.startTimers();
    // After the timers: connecting to MCP servers may take a while; the lease is kept meanwhile.
    if (this.env.prepareAgent) {
      try {
        running = await this.env.prepareAgent(agent, run);
      } catch (e) {
        const { kind, message, server } = e as Error & { kind?: string; server?: string };
        // Without a kind (the store failed, say), as any other failure here: the lease expires, another worker recovers.
        if (kind === undefined) throw e;
        return finish('failed', message, { kind, message, ...(server !== undefined ? { server } : {}) });
      }
    }
    let depth = 0;
    for (let parent = run.parentRunId; parent && depth < 100; depth++)
      parent = (await lifecycle.store.runs.get(parent))?.parentRunId ?? null;
    const scope: RunScope = {
      runId: run.id,
      sessionId: run.sessionId,
      depth,
      host: this.env.host,
      ending: () => this.stopReason === 'cancel' || this.stopReason === 'timeout',
      waitOutside: (p) => this.waitOutside(p),
      callback: (name) => {
        if (!this.env.waits) throw new Error('this runtime delivers no signals');
        return this.env.waits.issueCallback(run.id, name);
      },
    };
    const result: TurnResult = await runScope.run(scope, async () => {
      this.handle = start();
      if (this.stopReason === 'cancel' || this.stopReason === 'timeout') this.handle.cancel();
      return this.handle.result;
    });
    // A call reserved but never made (or failed): its reservation goes, unless its step settled it.
    if (this.sink.ended && this.quotaCall && this.env.quotas)
      await this.env.quotas.release(this.quotaCall).catch(() => {});
    // The turn's end settled the run in the same transaction (see RunSink). When it could not be
    // written (the run was lost, or the store failed), the lease expires and another worker recovers.
    if (this.stopReason === 'release' && this.sink.closed && !this.sink.ended) {
      // Let go at once (shutdown past its grace period): hand the run back without waiting for the lease.
      await lifecycle
        .move(run.id, 'queued', {
          reason: `released by ${this.env.owner} (${result.reason})`,
          patch: { lease: null },
          guard: { fencingToken: this.token },
        })
        .catch(() => {});
    }
    return this.sink.ended;
  }

  private startTimers(): void {
    const { lifecycle, owner, leaseMs, renewEveryMs } = this.env;
    const run = this.run;
    const letGo = () => {
      // Someone else holds the run now (or may, once the lease is over): stop; our writes are fenced anyway.
      if (this.stopReason === undefined) this.env.observers?.leaseLost(run);
      this.stopReason ??= 'lease_lost';
      if (this.sink) this.sink.closed = true;
      this.handle?.cancel('lease lost');
    };
    this.renewTimer = setInterval(() => {
      void (async () => {
        const until = Date.now() + leaseMs;
        let ok: boolean;
        try {
          ok = await lifecycle.renewLease(run.id, owner, this.token, until);
        } catch (e) {
          // A store error is no answer: the next tick tries again while the lease still holds.
          // While the database cannot be reached at all, nobody can take the run over either: the
          // execution keeps it past its lease and renews as soon as the database answers (its
          // renewal matches owner and token; workers back from the outage recover no expired lease
          // for a lease period, ADR-0045). Its writes stay fenced, and deltas are held meanwhile.
          if (isStoreUnavailable(e)) return;
          if (Date.now() >= this.leaseHeldUntil - renewEveryMs) letGo();
          return;
        }
        if (!ok) return letGo();
        this.leaseHeldUntil = until;
        this.sink?.leaseRenewed();
        if (this.runSlot) void this.runSlot.renew().catch(() => {});
      })();
    }, renewEveryMs);
    this.renewTimer.unref?.();
    // Requests made in another process (cancel, pause, steering) are read from the store twice a
    // second; this process's own reach the execution at once.
    let polling = false;
    this.controlTimer = setInterval(() => {
      if (polling) return;
      polling = true;
      void (async () => {
        const fresh = await lifecycle.store.runs.get(run.id).catch(() => undefined);
        if ((await lifecycle.store.inputs.count(run.sessionId, 'steer').catch(() => 0)) > 0) this.steeringArrived();
        if (fresh?.cancelRequested) this.cancel();
        if (fresh?.pauseRequested) this.pause();
        else if (fresh) this.unpause();
      })().finally(() => (polling = false));
    }, this.env.controlPollMs);
    this.controlTimer.unref?.();
    if (run.deadlineAt !== null) {
      this.deadlineTimer = setTimeout(
        () => {
          this.stopReason ??= 'timeout';
          this.handle?.cancel('run timeout');
        },
        Math.max(0, run.deadlineAt - Date.now()),
      );
      this.deadlineTimer.unref?.();
    }
  }

  /** At every step boundary: steering sent to this run from anywhere, a pause request, and the next model call's quota. */
  private boundaryHook(agent: () => AgentDefinition): TurnHooks {
    return {
      beforeStep: async (ctx) => {
        // Read, not taken: the sink removes each input in the transaction that records it in the log.
        // An input taken into the turn stays listed until the durable point that logs it commits:
        // this execution takes each one once.
        if (this.steeringMaybe) {
          // Cleared before the read: steering stored meanwhile sets it again.
          this.steeringMaybe = false;
          const read = this.steeringRead;
          this.steeringRead = undefined;
          const inputs = await (read ?? this.env.lifecycle.store.inputs.list(this.run.sessionId, 'steer', this.run.id));
          for (const i of inputs) {
            if (this.steered.has(i.id)) continue;
            this.steered.add(i.id);
            ctx.steer((i.payload as { message: UserMessage }).message);
          }
        }
        if (this.pauseRequested) return ctx.pause();
        if (this.env.quotas && !this.quotaStop) {
          this.quotaStop = await this.reserveQuota(this.env.quotas, agent(), ctx);
          if (this.quotaStop) ctx.pause();
        }
      },
    };
  }

  /**
   * Before a model call (ADR-0043): the run's slot among its tenant's concurrent runs (at its
   * first boundary), then the call's estimate reserved against the tenant's and key's budgets.
   * What a refusal makes of the run is its policy's (see `outcome`).
   */
  private async reserveQuota(
    quotas: Quotas,
    agent: AgentDefinition,
    ctx: { turn: number; step: number; conversation: Parameters<typeof estimateCall>[1] },
  ): Promise<QuotaStop | undefined> {
    try {
      if (!(await quotas.inEffect())) return undefined;
      if (!this.quotaOwner) {
        const session = await this.env.lifecycle.store.sessions.get(this.run.sessionId);
        const keyId = (this.run.options as RunOptions).apiKey ?? null;
        this.quotaOwner = { tenant: session?.tenant ?? 'default', keyId };
      }
      const { tenant, keyId } = this.quotaOwner;
      if (!this.runSlotAsked) {
        this.runSlotAsked = true;
        const slot = await quotas.takeRunSlot({
          runId: this.run.id,
          token: this.token,
          tenant,
          keyId,
          leaseMs: this.env.leaseMs,
        });
        if (slot && 'policy' in slot) return slot;
        this.runSlot = slot;
      }
      const { tokens, cost } = estimateCall(agent, ctx.conversation);
      const r = await quotas.reserveCall({
        runId: this.run.id,
        tenant,
        keyId,
        turn: ctx.turn,
        step: ctx.step + 1,
        tokens,
        cost,
      });
      if (r && 'policy' in r) return r;
      if (r) this.quotaCall = r.callId;
      return undefined;
    } catch (e) {
      // The ledger could not answer (a busy store): the run waits a little rather than spend unchecked.
      process.emitWarning(`keel quotas, run ${this.run.id}: ${(e as Error).message}`);
      const now = this.env.lifecycle.clock.now();
      return {
        policy: 'wait',
        wakeAt: now + quotas.recheckMs,
        refusal: { scope: 'store', limit: 'unavailable', max: 0, used: 0, reserved: 0 },
      };
    }
  }

  private outcome(end: TurnEvent & { type: 'turn/end' }): RunEnd {
    const d = end.data;
    switch (d.reason) {
      case 'completed':
        return { status: 'completed' };
      case 'suspended':
        return { status: 'waiting' };
      case 'paused':
        if (this.quotaStop) return quotaOutcome(this.quotaStop);
        return this.stopReason === 'release'
          ? { status: 'queued', reason: 'released by its worker' }
          : { status: 'paused', reason: 'pause requested' };
      case 'cancelled':
        if (this.stopReason === 'timeout') return { status: 'timed_out', reason: 'run timeout' };
        return { status: 'cancelled', reason: 'cancel requested' };
      case 'max_steps':
      case 'budget_exceeded':
        return {
          status: 'failed',
          reason: d.reason,
          error: {
            kind: 'limit',
            limit: d.reason,
            message:
              d.reason === 'max_steps' ? 'the run reached its step limit' : 'the run reached its token or cost budget',
          },
        };
      case 'failed':
        if (d.error?.kind === 'sink' && this.run.attempt < this.env.maxAttempts) {
          // An infrastructure failure: the interrupted step is retried from the checkpoint.
          return {
            status: 'queued',
            reason: `retrying after a storage failure: ${d.error.message}`,
            interrupted: true,
          };
        }
        return {
          status: 'failed',
          reason: d.error?.message ?? 'failed',
          error: (d.error ?? { kind: 'internal', message: 'failed' }) as unknown as JsonObject,
        };
    }
  }
}

/** How a run a quota refused ends its turn: it waits for the quota (`waiting_for_quota`) or fails (`quota_exceeded`). */
function quotaOutcome(stop: QuotaStop): RunEnd {
  const r = stop.refusal;
  const quota = { scope: r.scope, limit: r.limit, max: r.max, used: r.used, reserved: r.reserved };
  if (stop.policy === 'wait') return { status: 'waiting_for_quota', wakeAt: stop.wakeAt, quota };
  return {
    status: 'failed',
    reason: 'quota exceeded',
    error: {
      kind: 'quota_exceeded',
      code: 'quota_exceeded',
      message: `${r.scope} reached its quota ${r.limit} (${r.max})`,
      ...quota,
    },
  };
}
