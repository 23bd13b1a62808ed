import { userMessage, type AgentDefinition, type UserInput } from '../core/index.ts';
import type { JsonValue, UserMessage } from '../model/index.ts';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import {
  eventPosition,
  follow,
  runEvents,
  Sessions,
  type CompactionSettings,
  type CompactOptions,
  type FeedItem,
  type LargePayloadOptions,
  type SessionEvent,
} from '../session/index.ts';
import {
  NotFoundError,
  RunBusyError,
  refuseNul,
  StoreError,
  type ApiKeyRecord,
  type TenantRecord,
  type TenantUpdate,
  type IdempotencyRecord,
  type RunQuery,
  type RunRecord,
  type RunStatus,
  type SessionRecord,
  type Store,
  type StoreOps,
  type UsageQuery,
  type UsageTotals,
} from '../store/index.ts';
import { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import { refuseTakenKey, type IdempotencyClaim } from './lifecycle/idempotency.ts';
import { recordMcpTools } from './lifecycle/record-mcp-tools.ts';
import type { Accepted, IfBusy, RunOptions } from './lifecycle/types.ts';
import type { Waiting } from './lifecycle/waiting.ts';
import {
  IllegalTransitionError,
  isTerminal,
  isWaiting,
  SETTLED_STATUSES,
  STORED_AT_TURN_END,
} from './lifecycle/run-status.ts';
import { SendSpan } from '../telemetry/send-span.ts';
import { checkSendOptions, InvalidSendOptionError } from './send-options.ts';
import { recordsContent, type TelemetryOptions } from '../telemetry/tracer.ts';
import type { Execution, ExecutionEnv } from './execution.ts';
import { systemClock, type Clock } from '../core/clock.ts';
import { Erasure } from './erasure/erasure.ts';
import type { ErasureParticipant } from './erasure/participant.ts';
import { Waits } from './waits.ts';
import { Webhooks, type WebhookOptions } from './webhooks/index.ts';
import { RunObservers, type RunObserver } from './observer.ts';
import { Worker, type OfferedSlot, type WorkerHost, type WorkerOptions } from './worker.ts';
import { WakeUp } from './wake-up.ts';
import { rerunAgent, startRerun, type RerunRequest } from './reruns/start-rerun.ts';
import { rerunLineage } from './reruns/rerun-lineage.ts';
import { RerunRequestError, withOverrides } from './reruns/rerun-agent.ts';
import {
  clientToolOutput,
  clientToolSignal,
  pendingClientToolCalls,
  withClientTools,
  type ClientToolResult,
} from './client-tools.ts';
import { BatchRunner } from './evals/batch-runner.ts';
import { EvalsApi } from './evals/evals-api.ts';
import type { EvalsHost } from './evals/evals-host.ts';
import type { Scorer } from './evals/scorers.ts';
import { PAUSED_FOR_ERASED_TENANT, Schedules, type SchedulerOptions } from './schedules.ts';
import { FlowControl, type FlowControlOptions, type ModelLimits, type Priority } from '../flow-control/index.ts';
import { runScope } from './run-scope.ts';
import { Quotas, type QuotaReport } from './quotas/quotas.ts';
import { checkTenantQuotas, type QuotaOptions } from './quotas/quota-options.ts';
import { RegistryQuotas } from './quotas/registry-quotas.ts';
import { agentWithMcpTools, McpPool, type McpToolsGot } from '../mcp/index.ts';
import { Retention, type RetentionOptions } from '../retention/index.ts';
import { archiveErasureParticipant } from './erasure/archive-participant.ts';

/** Whether compaction settings are one for every agent (else they are by agent name). */
const isOneSetting = (c: CompactionSettings | Record<string, CompactionSettings>): c is CompactionSettings =>
  'contextWindow' in c && typeof c.contextWindow === 'number';

/** How long `runs.wait` waits, once the run got where it waits for, for this process's execution of it to finish (see `wait`). */
const EXECUTION_GRACE_MS = 1000;
/** Why a wait's own controller aborts: a reason of its own, so that no exception is made for every wait. */
const WAIT_OVER = Object.freeze({ waitOver: true });

export interface RuntimeOptions {
  store: Store;
  /** Agent definitions by name; several versions of one name may be registered. */
  agents: readonly AgentDefinition[];
  /** Defaults for every run (timeouts, attempts). */
  runDefaults?: RunOptions;
  /** What erasures reach besides the store, e.g. an archive store (ADR-0041): erased and scanned after it. */
  erasureParticipants?: readonly ErasureParticipant[];
  /**
   * Turns a model id (`openai:gpt-4.1-mini`, ...) into a model: what a rerun's `overrides.model`
   * names (the server and CLI pass the configuration's resolver). Without it, such an override is refused.
   */
  resolveModel?: (id: string) => LanguageModelV4;
  /** Code and model-as-judge scorers of experiments, by name (beside the built-in ones; docs/evals.md). */
  scorers?: Record<string, Scorer>;
  /** Compaction settings for all agents, or by agent name. */
  compaction?: CompactionSettings | Record<string, CompactionSettings>;
  /** A worker's lease on a run; renewed every `renewEveryMs` (default a third of it). */
  leaseMs?: number;
  renewEveryMs?: number;
  /**
   * How often a running execution reads the requests made for its run in other processes
   * (cancel, pause, steering): default 500 ms, so they take effect within a second.
   */
  controlPollMs?: number;
  /** How often an interrupted run may be claimed again before it fails. */
  maxAttempts?: number;
  /** The time for wait deadlines, sleeps, schedules and retries (default: the system clock; tests pass `manualClock()`). */
  clock?: Clock;
  /** Webhook deliveries: attempt timeout, retries (docs/webhooks.md). */
  webhooks?: WebhookOptions;
  snapshotEvery?: number;
  /**
   * Large payloads (ADR-0040, docs/operations.md): a tool result, attachment or message
   * text of `thresholdBytes` or more (default 256 KiB) is stored once by hash and referenced from
   * the log; the model sees `modelView` of a large tool result (default its first 32 KiB and the
   * reference); an event over `maxEventBytes` (default 8 MiB) once they are apart is refused.
   */
  largePayloads?: LargePayloadOptions;
  /** How long a subagent tree may nest. */
  maxDepth?: number;
  /** OpenTelemetry traces (made when an SDK is registered): whether message contents are recorded. */
  telemetry?: TelemetryOptions;
  /** The scheduler (runs/schedules.ts): how often a runtime with a worker checks for due schedules. */
  schedules?: SchedulerOptions;
  /** Provider limits by model (`provider:modelId`, `provider:*`, `*`), held across every process on the store (docs/flow-control.md). */
  limits?: ModelLimits;
  /** How runs wait for limits (slot threshold, leases, polling). */
  flowControl?: FlowControlOptions;
  /** Priority of each agent's model calls when they wait for limits (a run's own `priority` wins). */
  priorities?: Record<string, Priority>;
  /** Tenant quotas (docs/operations.md, ADR-0043): a default for every tenant, or a source by tenant and API key. */
  quotas?: QuotaOptions;
  /** Retention: policies, the archive store, the sweeper's pace (docs/operations.md). Its sweeper starts with the first worker. */
  retention?: RetentionOptions;
}

export interface SendOptions extends RunOptions {
  ifBusy?: IfBusy;
  /** Agent name (optionally `name@version`); default: the first registered agent. */
  agent?: string;
  /** Records this key with the message's effect, in its transaction (the HTTP Idempotency-Key). */
  idempotency?: IdempotencyClaim;
}

export type SendResult = { outcome: 'created' | 'enqueued' | 'steered'; message: UserMessage; run: RunRecord };

/** What `runs.stream` yields: the feed's items as they are (session/feed.ts). */
export type RunStreamItem = FeedItem;

/**
 * The runs layer's library API: sessions that take messages, durable runs, and workers.
 * Create it with `createRuntime`.
 */
export class Runtime {
  readonly sessions: Sessions & {
    send(sessionId: string, input: UserInput, options?: SendOptions): Promise<SendResult>;
    /** Erases a session: archived first (it takes no new message), its runs cancelled, then erased. */
    erase(sessionId: string): Promise<SessionRecord>;
    /** Erases every session of a tenant (archived ones too); returns how many. */
    eraseTenant(tenant: string): Promise<{ erased: number }>;
  };
  readonly runs: RunsApi;
  /** The only writer of runs: every run transaction goes through it (src/runs/lifecycle/). */
  readonly lifecycle: RunLifecycle;
  /** Deadlines, wake-ups, signals and callbacks of waiting runs (ADR-0015). */
  readonly waits: Waits;
  /** Webhook subscriptions, the outbox hook and this process's dispatcher (started with the workers). */
  readonly webhooks: Webhooks;
  /** Schedules (cron or interval): fired by the scheduler of every runtime that has a worker. */
  readonly schedules: Schedules;
  /** Datasets from the log, experiments on them, bulk reruns (issue 40, docs/evals.md). */
  readonly evals: EvalsApi;
  /** Erasing a session, a tenant or everything idle since a date, the erasure audit, and verification (ADR-0041). */
  readonly erasure: Erasure;
  /** Retention and archives: sweeps, dry runs, restore, policies (docs/operations.md). */
  readonly retention: Retention;
  /** Claims and runs the items of experiments and bulk reruns (started with the first worker). */
  private readonly batchRunner: BatchRunner;
  private readonly options: Required<
    Pick<RuntimeOptions, 'leaseMs' | 'renewEveryMs' | 'controlPollMs' | 'maxAttempts' | 'maxDepth'>
  > &
    RuntimeOptions;
  private readonly agents = new Map<string, AgentDefinition[]>();
  private readonly wakeUp = new WakeUp();
  readonly executions = new Map<string, Execution>();
  private readonly workers = new Set<Worker>();
  private readonly observers = new RunObservers();
  /** Whether spans record message contents (the option, else KEEL_OTEL_RECORD_CONTENT). */
  private readonly recordContent: boolean;
  /** Provider flow control (only when `limits` are configured). */
  readonly flowControl: FlowControl | undefined;
  /** Tenant quotas (ADR-0043): the `quotas` option's, else the tenants registry's. */
  readonly quotas: Quotas;
  private readonly registryQuotas: RegistryQuotas | undefined;
  /** The compaction settings runs use (a compaction model a limit applies to is limited). */
  private readonly compaction: RuntimeOptions['compaction'];
  /** The MCP clients of this runtime's runs: one per server, closed with the runtime (src/mcp). */
  readonly mcp = new McpPool();

  constructor(options: RuntimeOptions) {
    if (options.agents.length === 0) throw new TypeError('createRuntime needs at least one agent');
    const leaseMs = options.leaseMs ?? 30_000;
    this.options = {
      maxAttempts: 3,
      maxDepth: 5,
      renewEveryMs: Math.max(50, Math.floor(leaseMs / 3)),
      controlPollMs: 500,
      ...options,
      leaseMs,
    };
    this.recordContent = recordsContent(options.telemetry);
    if (options.limits && Object.keys(options.limits).length > 0)
      this.flowControl = new FlowControl(
        options.store,
        options.limits,
        options.clock ?? systemClock,
        options.flowControl,
      );
    const q = options.quotas ?? {};
    if (q.default) checkTenantQuotas(q.default, 'quotas.default');
    if (q.recheckMs !== undefined && !(Number.isInteger(q.recheckMs) && q.recheckMs > 0))
      throw new TypeError('quotas.recheckMs: a positive integer of milliseconds');
    // Without a source of its own, a runtime takes each tenant's and key's quotas from the registry.
    this.registryQuotas = q.source ? undefined : new RegistryQuotas(options.store);
    this.quotas = new Quotas(
      options.store,
      options.clock ?? systemClock,
      this.registryQuotas ? { ...q, source: this.registryQuotas.source } : q,
      this.registryQuotas,
    );
    // Read the registry's quotas now, so that the first message needs no read before its transaction.
    const warm = this.quotas.inEffect();
    if (warm instanceof Promise) warm.catch(() => {});
    this.compaction = this.limitedCompaction(options.compaction);
    for (const a of options.agents.map((x) => this.limited(x))) {
      const list = this.agents.get(a.name) ?? [];
      if (list.some((x) => x.version === a.version))
        throw new TypeError(`agent ${a.name} version ${a.version} is registered twice`);
      list.push(a);
      this.agents.set(a.name, list);
    }
    const sessions = new Sessions({
      store: options.store,
      ...(options.snapshotEvery !== undefined ? { snapshotEvery: options.snapshotEvery } : {}),
      ...(options.largePayloads ? { largePayloads: options.largePayloads } : {}),
    });
    this.lifecycle = new RunLifecycle(sessions);
    this.lifecycle.clock = options.clock ?? systemClock;
    this.waits = new Waits(this.lifecycle, this.resolveAgent);
    this.webhooks = new Webhooks(options.store, sessions.log, this.clock, options.webhooks);
    const eraseOne = sessions.erase.bind(sessions);
    const compactOne = sessions.compact.bind(sessions);
    this.sessions = Object.assign(sessions, {
      // A manual compaction's model call is limited like a run's.
      compact: (sessionId: string, o: CompactOptions) =>
        compactOne(sessionId, { ...o, model: this.limitedModel(o.model) }),
      send: (sessionId: string, input: UserInput, o?: SendOptions) => this.send(sessionId, input, o),
      erase: (sessionId: string) => this.erase(sessionId, eraseOne),
      eraseTenant: (tenant: string) => this.eraseTenant(tenant),
    });
    this.runs = new RunsApi(this);
    const evalsHost: EvalsHost = {
      store: options.store,
      log: sessions.log,
      agentFor: (spec) => this.agentFor(spec),
      resolveModel: options.resolveModel,
      scorers: options.scorers ?? {},
      rerun: (sourceRunId, req, within) => this.runs.rerun(sourceRunId, req, within),
      waitTerminal: (runId, signal) => this.runs.wait(runId, { until: 'terminal', signal }),
      wake: () => this.batchRunner.wake(),
    };
    this.evals = new EvalsApi(evalsHost);
    // The runtime's clock, read at each use.
    this.retention = new Retention(options.store, sessions.log, { now: () => this.clock.now() }, options.retention);
    const archives = this.retention.archives;
    this.erasure = new Erasure({
      store: options.store,
      clock: this.clock,
      eraseSession: (id) => this.sessions.erase(id),
      eraseTenantSessions: (tenant) => this.sessions.eraseTenant(tenant),
      participants: [
        ...(options.erasureParticipants ?? []),
        // The archive stores of retention: an erasure removes an archived session's archive; verify reads them all.
        ...(archives.length > 0 ? [archiveErasureParticipant(archives)] : []),
      ],
    });
    this.batchRunner = new BatchRunner(evalsHost, { leaseMs });
    this.schedules = new Schedules(this, {
      ...options.schedules,
      ...(options.runDefaults ? { runDefaults: options.runDefaults } : {}),
    });
  }

  /** The agent with its model limited, when a limit applies to the model (else the agent itself). */
  private limited(a: AgentDefinition): AgentDefinition {
    const model = this.limitedModel(a.model, a.name);
    return model !== a.model ? { ...a, model } : a;
  }

  /**
   * The model limited, when a limit applies to it (else the model itself): an agent's, or a
   * compaction's own. Its calls wait with the priority of the run making them (else of `agentName`,
   * else of the run's agent) and, inside a run, without holding the worker slot when they wait long.
   */
  private limitedModel(model: LanguageModelV4, agentName?: string): LanguageModelV4 {
    if (!this.flowControl) return model;
    return this.flowControl.wrap(model, () => {
      const scope = runScope.getStore();
      const run = scope ? this.executions.get(scope.runId)?.run : undefined;
      const name = agentName ?? run?.agent.name;
      const priority =
        (run?.options as RunOptions | undefined)?.priority ??
        (name !== undefined ? this.options.priorities?.[name] : undefined);
      return { ...(priority !== undefined ? { priority } : {}), ...(scope ? { waitOutside: scope.waitOutside } : {}) };
    });
  }

  /** Compaction settings with their own model limited like an agent's (see `limitedModel`). */
  private limitedCompaction(compaction: RuntimeOptions['compaction']): RuntimeOptions['compaction'] {
    if (!compaction || !this.flowControl) return compaction;
    const one = (c: CompactionSettings, agentName?: string): CompactionSettings =>
      c.model ? { ...c, model: this.limitedModel(c.model, agentName) } : c;
    if (isOneSetting(compaction)) return one(compaction);
    return Object.fromEntries(Object.entries(compaction).map(([name, c]) => [name, one(c, name)]));
  }

  /** API keys, by the hash of their secret (see server/auth.ts), and all of them; new ones and revocations. */
  readonly apiKeys = {
    find: (hash: string): Promise<ApiKeyRecord | undefined> => this.store.keys.find(hash),
    list: (tenant?: string): Promise<ApiKeyRecord[]> => this.store.keys.list(tenant),
    create: async (key: ApiKeyRecord): Promise<void> => {
      await this.store.keys.create(key);
      this.registryQuotas?.invalidate();
    },
    /** False when there is no such key. */
    revoke: async (id: string): Promise<boolean> => {
      const revoked = await this.store.keys.revoke(id, Date.now());
      this.registryQuotas?.invalidate();
      return revoked;
    },
  };

  /**
   * The tenants registry: each tenant's weight in fair dispatch and its quotas (ADR-0042). A
   * tenant without a row has weight 1 and the defaults; removing a row changes nothing else.
   */
  readonly tenants = {
    put: async (t: TenantUpdate): Promise<TenantRecord> => {
      const record = await this.store.tenants.put(t, Date.now());
      this.registryQuotas?.invalidate();
      return record;
    },
    get: (id: string): Promise<TenantRecord | undefined> => this.store.tenants.get(id),
    list: (): Promise<TenantRecord[]> => this.store.tenants.list(),
    delete: async (id: string): Promise<boolean> => {
      const removed = await this.store.tenants.delete(id);
      this.registryQuotas?.invalidate();
      return removed;
    },
  };

  /** Idempotency records: what a request with a key did (see server/app.ts). */
  readonly idempotency = {
    get: (tenant: string, key: string): Promise<IdempotencyRecord | undefined> =>
      this.store.idempotency.get(tenant, key),
    put: (r: IdempotencyRecord): Promise<IdempotencyRecord> => this.store.idempotency.put(r),
    prune: (before: number): Promise<number> => this.store.idempotency.prune(before),
  };

  /** Resolves when the store answers (readiness). */
  async ping(): Promise<void> {
    await this.store.sessions.list({ limit: 1 });
  }

  get store(): Store {
    return this.options.store;
  }

  /** The runtime's clock (see RuntimeOptions.clock). */
  get clock(): Clock {
    return this.options.clock ?? systemClock;
  }

  /** The agent a message runs with when none is named. */
  get defaultAgent(): AgentDefinition {
    return this.options.agents[0]!;
  }

  /** The agent for a name (and version): the latest registered version when none is given. */
  resolveAgent = (name: string, version?: string): AgentDefinition | undefined => {
    const list = this.agents.get(name);
    if (!list) return undefined;
    return version === undefined ? list.at(-1) : list.find((a) => a.version === version);
  };

  /** Every registered agent: each name's versions in registration order (its latest last), names in the order registered. */
  listAgents(): AgentDefinition[] {
    return [...this.agents.values()].flat();
  }

  agentFor(spec: string | undefined): AgentDefinition {
    if (spec === undefined) return this.options.agents[0]!;
    const [name, version] = spec.split('@') as [string, string | undefined];
    const agent = this.resolveAgent(name, version);
    if (!agent)
      throw new StoreError(
        'unknown_agent',
        `no agent ${spec} is registered (known: ${[...this.agents.keys()].join(', ')})`,
      );
    return agent;
  }

  /** The agent with a send's overrides and client tools applied (a field at fault: InvalidSendOptionError). */
  private withRunOverrides(agent: AgentDefinition, o: Pick<RunOptions, 'overrides' | 'clientTools'>): AgentDefinition {
    let overridden: AgentDefinition;
    try {
      overridden = withOverrides(agent, o.overrides, this.options.resolveModel);
    } catch (e) {
      if (e instanceof RerunRequestError) throw new InvalidSendOptionError(e.field, e.message);
      throw e;
    }
    return withClientTools(overridden, o.clientTools);
  }

  private async send(sessionId: string, input: UserInput, o: SendOptions = {}): Promise<SendResult> {
    checkSendOptions(o);
    const agent = this.withRunOverrides(this.agentFor(o.agent), o);
    const { ifBusy = 'reject', agent: _a, idempotency, trace, ...runOptions } = o;
    // The run stores the trace context of this send (a child of the caller's): its executions continue it.
    const span = new SendSpan(agent.name, sessionId, trace);
    const options: RunOptions = {
      ...this.options.runDefaults,
      ...runOptions,
      ...(span.carrier ? { trace: span.carrier } : {}),
    };
    let message: UserInput | UserMessage = input;
    try {
      // Runs per minute (ADR-0043): counted at the send, before the run is made.
      const quotas = this.quotas.inEffect();
      if (quotas === true || (quotas !== false && (await quotas))) {
        const session = await this.store.sessions.get(sessionId);
        if (session) await this.quotas.admitRun(session.tenant, options.apiKey ?? null);
      }
      if (ifBusy === 'interrupt') {
        // Checked before the active run is cancelled: a message that cannot be taken interrupts nothing.
        message = this.lifecycle.checkedMessage(userMessage(input));
        // A request that lost its key to another must not cancel the run that one created.
        if (idempotency) await refuseTakenKey(this.store, idempotency);
        const active = await this.store.runs.active(sessionId);
        if (active) await this.runs.cancel(active.id, { reason: 'interrupted by a new message' });
      }
      // A worker of this process with a free slot claims the run in the message's own transaction.
      const slot = this.offerSlot();
      let r: Accepted;
      try {
        r = await this.lifecycle.send(sessionId, message, agent, {
          ifBusy: ifBusy === 'interrupt' ? 'reject' : ifBusy,
          options,
          ...(idempotency ? { idempotency } : {}),
          ...(slot ? { claim: slot.claim } : {}),
        });
      } catch (e) {
        slot?.release();
        throw e;
      }
      if (r.claimed) slot!.start(r.claimed);
      else slot?.release();
      if (r.outcome === 'steered') {
        this.executions.get(r.run.id)?.steeringArrived();
        // As with runs.steer: a sleeping run whose sleep wakes on steering wakes now. The message
        // is accepted already: a failure here leaves it for when the sleep ends, it fails no send.
        // A run that was not waiting when the message was taken is woken by its turn's end instead (see waits.ts, takeWhatCame).
        if (isWaiting(r.run.status) && (await this.waits.steered(r.run.id).catch(() => undefined))) this.wake();
      }
      // The workers look for work unless the message's run was claimed with it.
      if (r.claimed?.run.id !== r.run.id) this.wake();
      span.sent(r.outcome, r.run.id);
      return { outcome: r.outcome, message: r.message, run: r.run };
    } catch (e) {
      span.failed(e);
      throw e;
    }
  }

  private async erase(sessionId: string, eraseOne: (id: string) => Promise<SessionRecord>): Promise<SessionRecord> {
    const session = await this.store.sessions.get(sessionId);
    if (!session) throw new NotFoundError('session', sessionId);
    if (session.erasedAt !== null) return session;
    // Its log is in an archive store (retention): erased here, its archive removed there.
    if (session.inArchiveAt !== null) return this.retention.eraseArchived(sessionId);
    // No new message from here on: an archived session refuses them.
    if (session.archivedAt === null) await this.sessions.archive(sessionId);
    for (let attempt = 0; ; attempt++) {
      for (const run of await this.store.runs.list({ sessionId, limit: 10_000 })) {
        if (!isTerminal(run.status)) await this.runs.cancel(run.id, { reason: 'session erased' });
      }
      try {
        // What the session's runs delegated to subagents lives in their child sessions: erased too.
        const children = new Set<string>();
        for (const run of await this.store.runs.list({ sessionId, limit: 10_000 })) {
          for (const child of await this.store.runs.list({ parentRunId: run.id, limit: 10_000 }))
            if (child.sessionId !== sessionId) children.add(child.sessionId);
        }
        for (const child of children) await this.erase(child, eraseOne);
        const tomb = await eraseOne(sessionId);
        this.wake();
        return tomb;
      } catch (e) {
        // A run came up meanwhile (one queued behind the one just cancelled): cancel it too.
        if (!(e instanceof RunBusyError) || attempt >= 5) throw e;
      }
    }
  }

  private async eraseTenant(tenant: string): Promise<{ erased: number }> {
    // Its schedules stop first: none makes a new session of the tenant while its sessions go.
    for (let after: string | undefined; ;) {
      const page = await this.store.schedules.list({ tenant, limit: 100, ...(after ? { after } : {}) });
      const now = this.clock.now();
      for (const s of page)
        if (s.pausedAt === null || s.pausedReason === null)
          await this.store.schedules.update(s.id, {
            pausedAt: s.pausedAt ?? now,
            pausedReason: PAUSED_FOR_ERASED_TENANT,
            nextFireAt: null,
            updatedAt: now,
          });
      if (page.length < 100) break;
      after = page.at(-1)!.id;
    }
    let erased = 0;
    for (let after: string | undefined; ;) {
      const page = await this.store.sessions.list({
        tenant,
        limit: 100,
        includeArchived: true,
        ...(after ? { after } : {}),
      });
      for (const s of page) {
        if (s.erasedAt !== null) continue;
        await this.sessions.erase(s.id);
        erased++;
      }
      if (page.length < 100) return { erased };
      after = page.at(-1)!.id;
    }
  }

  /** A free slot of one of this process's workers, for a claim in a message's transaction (see Worker.offerSlot). */
  private offerSlot(): OfferedSlot | undefined {
    for (const w of this.workers) {
      const slot = w.offerSlot();
      if (slot) return slot;
    }
    return undefined;
  }

  /** Starts a worker in this process (API and worker can share one process, or not). */
  startWorker(options: WorkerOptions = {}): Worker {
    // Its model calls' deltas are numbered after other nodes' commits too (see numberDeltas).
    this.sessions.log.numberDeltas();
    const host: WorkerHost = {
      lifecycle: this.lifecycle,
      env: (owner) => this.env(owner),
      nap: (ms) => this.nap(ms),
      wake: () => this.wake(),
      track: (e) => this.executions.set(e.run.id, e),
      untrack: (e) => {
        if (this.executions.get(e.run.id) === e) this.executions.delete(e.run.id);
      },
    };
    const worker = new Worker(host, options);
    this.workers.add(worker);
    this.webhooks.startDispatcher();
    this.schedules.start();
    this.retention.start();
    // Experiment and bulk-rerun items: as many at once as the worker runs runs (the most any worker of this process asked).
    this.batchRunner.start(options.concurrency ?? 8);
    return worker;
  }

  env(owner: string): ExecutionEnv {
    const { leaseMs, renewEveryMs, controlPollMs, maxAttempts } = this.options;
    const { compaction } = this;
    return {
      lifecycle: this.lifecycle,
      owner,
      leaseMs,
      renewEveryMs,
      controlPollMs,
      maxAttempts,
      resolveAgent: this.resolveAgent,
      compactionFor: (agent) => {
        if (!compaction) return undefined;
        return isOneSetting(compaction) ? compaction : compaction[agent.name];
      },
      host: this,
      observers: this.observers,
      recordContent: this.recordContent,
      waits: this.waits,
      quotas: this.quotas,
      prepareAgent: async (agent, run) => {
        // The tools the run got at its first start go into its agent spec, with their record.
        const recorded = (tx: StoreOps, got: McpToolsGot) => recordMcpTools(tx, run, got);
        const withMcp = (await agentWithMcpTools(this.mcp, this.lifecycle.sessions.log, agent, run, { recorded }))
          .agent;
        // A rerun: its overrides applied, its tools serving what its source run recorded (src/runs/reruns).
        const lineage = rerunLineage(run);
        if (lineage) return rerunAgent(this.lifecycle, withMcp, lineage, this.options.resolveModel);
        // A run's own overrides and client tools (RunOptions), as its agent spec recorded them at its send.
        const { overrides, clientTools } = run.options as RunOptions;
        return withClientTools(withOverrides(withMcp, overrides, this.options.resolveModel), clientTools);
      },
    };
  }

  /** Tells `observer` of the claims and lost leases of this runtime's workers; returns the unregistration. */
  observe(observer: RunObserver): () => void {
    return this.observers.add(observer);
  }

  /**
   * Waits for a wake-up (true) or `ms` (false). A wake-up that came since the last nap (while the
   * worker was claiming, say) ends it at once: work queued then is not left for the next poll.
   */
  nap(ms: number): Promise<boolean> {
    return this.wakeUp.nap(ms);
  }

  wake(): void {
    this.wakeUp.wake();
  }

  /** Turns a model id into a model (RuntimeOptions.resolveModel), if the runtime was given one. */
  get resolveModel(): ((id: string) => LanguageModelV4) | undefined {
    return this.options.resolveModel;
  }

  /** The defaults of every run's options (RuntimeOptions.runDefaults). */
  get runDefaults(): RunOptions | undefined {
    return this.options.runDefaults;
  }

  get maxDepth(): number {
    return this.options.maxDepth;
  }

  /** Stops every worker this runtime started (gracefully), then closes nothing else: the store is the caller's. */
  async close(options: { graceMs?: number } = {}): Promise<void> {
    await this.schedules.stop();
    await this.retention.stop();
    await this.batchRunner.stop();
    await Promise.all([...this.workers].map((w) => w.stop(options)));
    this.workers.clear();
    await this.webhooks.stopDispatcher();
    await this.mcp.close();
  }

  /** A child run for a subagent call: found again (same parent call) after a crash, never created twice. */
  async childRun(
    parentRunId: string,
    toolCallId: string,
    agentName: string,
    task: string,
    step: number,
  ): Promise<RunRecord> {
    const existing = (await this.store.runs.list({ parentRunId, limit: 10_000 })).find(
      (r) => r.parentToolCallId === toolCallId,
    );
    if (existing) return existing;
    const parent = await this.runs.get(parentRunId);
    const agent = this.agentFor(agentName);
    // The child's session is the parent's tenant's: readable by the same keys, and only by them.
    const parentSession = await this.lifecycle.sessions.get(parent.sessionId);
    const session = await this.lifecycle.sessions.create({
      tenant: parentSession.tenant,
      title: `${agent.name}: ${task.slice(0, 60)}`,
      agent: agent.name,
      metadata: { parentRunId, parentSessionId: parent.sessionId, parentToolCallId: toolCallId, parentStep: step },
    });
    // The child traces under its parent's execution (or, from elsewhere, the parent run's trace).
    const trace = this.executions.get(parentRunId)?.traceCarrier ?? (parent.options as RunOptions).trace;
    const r = await this.lifecycle.send(session.id, task, agent, {
      options: { ...this.options.runDefaults, ...(trace ? { trace } : {}) },
      parent: { runId: parentRunId, toolCallId },
    });
    this.wake();
    return r.run;
  }
}

/** Operations on runs. */
export class RunsApi {
  private readonly rt: Runtime;

  constructor(rt: Runtime) {
    this.rt = rt;
  }

  private get lifecycle() {
    return this.rt.lifecycle;
  }

  get(id: string): Promise<RunRecord> {
    return this.lifecycle.get(id);
  }

  /** The run, or undefined when there is none with this id. */
  find(id: string): Promise<RunRecord | undefined> {
    return this.rt.store.runs.get(id);
  }

  list(q: Partial<RunQuery> = {}): Promise<RunRecord[]> {
    return this.rt.store.runs.list({ limit: 100, ...q });
  }

  /**
   * Reruns a run from one of its steps, in a new session forked at that step's context (the
   * original is untouched), on another agent version or with changes, its tools by policy
   * (docs/evals.md). Returns the new run, queued; its lineage is in `options.rerun` and `rerunOf`.
   */
  async rerun(
    runId: string,
    request: RerunRequest = {},
    within?: (tx: StoreOps, run: RunRecord) => Promise<void>,
  ): Promise<RunRecord> {
    const run = await startRerun(
      {
        lifecycle: this.lifecycle,
        agentFor: (spec) => this.rt.agentFor(spec),
        resolveModel: this.rt.resolveModel,
        runDefaults: this.rt.runDefaults,
      },
      runId,
      request,
      within,
    );
    this.rt.wake();
    return run;
  }

  /** The session's active run (not terminal, not queued behind), if any. */
  active(sessionId: string): Promise<RunRecord | undefined> {
    return this.rt.store.runs.active(sessionId);
  }

  /** Where the run continues if it is interrupted: its last step boundary (the last step that ended), or null. */
  async resumeCursor(id: string): Promise<{ step: number; seq: number } | null> {
    const run = await this.rt.store.runs.get(id);
    if (!run) return null;
    // Its turn ended completed or waiting: that end stored the checkpoint, the boundary (ADR-0021).
    // Otherwise (running, or stopped without such an end) steps may have ended since.
    if (STORED_AT_TURN_END.includes(run.status)) {
      const c = await this.rt.store.runs.getCheckpoint(id);
      return c ? { step: c.step, seq: c.seq } : null;
    }
    return (await this.lifecycle.boundary(run)).at ?? null;
  }

  /** How many runs there are in each status. */
  countByStatus(): Promise<Record<RunStatus, number>> {
    return this.rt.store.runs.countByStatus();
  }

  /** Tokens and cost of the runs that ended in a range, each run's own once, grouped (see StoreOps.usageTotals). */
  usage(q: UsageQuery): Promise<UsageTotals[]> {
    return this.rt.store.runs.usageTotals(q);
  }

  /**
   * The tenant's quotas (and the API key's own) against what they used now (ADR-0043); each is null
   * when no quota applies to it.
   */
  quota(tenant: string, keyId: string | null = null): Promise<{ tenant: QuotaReport | null; key: QuotaReport | null }> {
    return this.rt.quotas.report(tenant, keyId);
  }

  /**
   * Resolves when the run is terminal (`until: 'terminal'`), or also when it waits or is paused
   * (`'settled'`, the default). Works across processes (it polls) and wakes at once in-process;
   * when this process ran it there, also once its execution here has finished.
   */
  async wait(
    id: string,
    o: { until?: 'terminal' | 'settled'; timeoutMs?: number; signal?: AbortSignal; pollMs?: number } = {},
  ): Promise<RunRecord> {
    const until = o.until ?? 'settled';
    const reached = (status: RunStatus) =>
      until === 'terminal' ? isTerminal(status) : SETTLED_STATUSES.includes(status);
    o.signal?.throwIfAborted();
    // A reason to look again: the run's status event reaching `until`, committed here; another
    // node's commit to its session; the timeout or the abort; and every pollMs in any case (a
    // notice missed). Not a feed: a waiter wants no deltas and no replay, only the run's record
    // once it gets there.
    const wakeUp = new WakeUp();
    // Aborted by the timeout or the caller's signal, and in any case once the wait is over.
    const ended = new AbortController();
    const end = () => {
      ended.abort(WAIT_OVER);
      wakeUp.wake();
    };
    const timer = o.timeoutMs !== undefined ? setTimeout(end, o.timeoutMs) : undefined;
    o.signal?.addEventListener('abort', end, { once: true });
    let off: (() => void) | undefined;
    // The run as this process's execution of it committed its end, with the status event heard:
    // the record that commit wrote, so it is not read again.
    let heard: RunRecord | undefined;
    // A move short of `until` (to running, say) is not worth a read.
    const listen = (sessionId: string) =>
      this.rt.sessions.log.subscribe(sessionId, (item) => {
        // A notice of this process's own commits only: their events came here already.
        if (item.kind === 'changed') return item.own ? undefined : wakeUp.wake();
        if (
          item.kind === 'event' &&
          item.event.runId === id &&
          item.event.type === 'run/status' &&
          reached(item.event.data.to)
        ) {
          heard = this.rt.executions.get(id)?.endedWith(item.event.id);
          wakeUp.wake();
        }
      });
    try {
      // Listening before the run is read: no change in between is missed. A run executed here
      // tells its session at once; another one is read first to learn it, then again.
      const local = this.rt.executions.get(id);
      if (local) off = listen(local.run.sessionId);
      let run = await this.get(id);
      if (!off && !reached(run.status)) {
        off = listen(run.sessionId);
        run = await this.get(id);
      }
      while (!reached(run.status)) {
        if (ended.signal.aborted) {
          o.signal?.throwIfAborted();
          throw new StoreError('timeout', `run ${id} is still ${run.status} after ${o.timeoutMs} ms`);
        }
        await wakeUp.nap(o.pollMs ?? 200);
        run = heard ?? (await this.get(id));
        heard = undefined;
      }
      // The execution of this process that brought the run here (if any) finishes what follows
      // its last commit first (its spans end, its lease is let go): within the timeout, and for
      // EXECUTION_GRACE_MS at most (an execution fenced out while a tool ignores its abort may
      // take longer, and the run is settled already). A run that ended was fenced at its end (its
      // token moved on); one that waits or is paused keeps the token of its claim, so that an
      // execution of a later claim is not waited for.
      const e = this.rt.executions.get(id);
      if (e && (isTerminal(run.status) || e.run.fencingToken === run.fencingToken)) {
        let graceTimer: NodeJS.Timeout | undefined;
        const grace = new Promise<void>((resolve) => {
          if (ended.signal.aborted) return resolve();
          graceTimer = setTimeout(resolve, EXECUTION_GRACE_MS);
          ended.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        await Promise.race([e.done, grace]).catch(() => {});
        clearTimeout(graceTimer);
      }
      return run;
    } finally {
      ended.abort(WAIT_OVER);
      off?.();
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', end);
    }
  }

  /**
   * Cancels a run in any non-terminal state; cancelling a cancelled run is a no-op. A running run
   * is stopped by the worker that holds it (its model call and tools get the abort, partial output
   * is kept, open calls get `cancelled` results); if that worker does not finish within `graceMs`
   * (it may be gone), the run is cancelled here and its worker fenced out. Children are cancelled too.
   */
  async cancel(id: string, o: { graceMs?: number; reason?: string } = {}): Promise<RunRecord> {
    let run = await this.get(id);
    if (!isTerminal(run.status) && run.status === 'running') {
      await this.lifecycle.request(id, { cancelRequested: true }).catch(() => {});
      this.rt.executions.get(id)?.cancel();
      run = await this.wait(id, { until: 'terminal', timeoutMs: o.graceMs ?? 5000 }).catch(() => this.get(id));
    }
    if (!isTerminal(run.status)) {
      try {
        run = (
          await this.lifecycle.finish(run, 'cancelled', {
            reason: o.reason ?? 'cancel requested',
            closeOpenCalls: true,
            resolveAgent: this.rt.resolveAgent,
          })
        ).run;
      } catch (e) {
        // It moved meanwhile (a worker claimed or finished it): try once more from where it is now.
        if (!(e instanceof StoreError)) throw e;
        return this.cancel(id, { ...o, graceMs: 0 });
      }
      this.rt.executions.get(id)?.cancel();
      this.rt.wake();
    }
    for (const child of await this.rt.store.runs.list({ parentRunId: id, limit: 10_000 })) {
      if (!isTerminal(child.status)) await this.cancel(child.id, { ...o, reason: 'parent run cancelled' });
    }
    return run;
  }

  /** Pauses at the next step boundary (or at once, for a run no worker holds). */
  async pause(id: string): Promise<RunRecord> {
    const run = await this.get(id);
    if (run.status === 'queued') return this.lifecycle.move(id, 'paused', { reason: 'pause requested' });
    if (run.status !== 'running') throw new IllegalTransitionError(id, run.status, 'paused');
    // The request first: the worker's renewal timer follows what the store says.
    const requested = await this.lifecycle.request(id, { pauseRequested: true });
    this.rt.executions.get(id)?.pause();
    return requested;
  }

  /** Resumes a paused run. A waiting run continues by its decision or answer, a running one needs nothing. */
  async resume(id: string): Promise<RunRecord> {
    const current = await this.get(id);
    if (current.status === 'running' && current.pauseRequested) {
      // Not paused yet (it pauses at its next step boundary): withdraw the request instead.
      const withdrawn = await this.lifecycle.withdrawPause(id);
      this.rt.executions.get(id)?.unpause();
      return withdrawn;
    }
    // Only from paused: running → queued (and waiting → queued) are legal for other reasons, but
    // resuming a running run would hand it to a second worker while the first still holds it.
    if (current.status !== 'paused')
      throw new IllegalTransitionError(
        id,
        current.status,
        'queued',
        `only a paused run can be resumed; it is ${current.status}`,
      );
    const run = await this.lifecycle.move(id, 'queued', {
      reason: 'resumed',
      patch: { pauseRequested: false },
      guard: { statuses: ['paused'] },
    });
    this.rt.wake();
    return run;
  }

  async approve(id: string, toolCallId: string, o: { input?: JsonValue } = {}): Promise<RunRecord> {
    const run = await this.lifecycle.approve(id, toolCallId, o.input);
    this.rt.wake();
    return run;
  }

  async deny(id: string, toolCallId: string, o: { reason?: string } = {}): Promise<RunRecord> {
    const run = await this.lifecycle.deny(id, toolCallId, o.reason);
    this.rt.wake();
    return run;
  }

  /**
   * Answers the run's ask_user question: `toolCallId` may be left out when exactly one question
   * is waiting.
   */
  async input(id: string, answer: JsonValue, o: { toolCallId?: string } = {}): Promise<RunRecord> {
    let toolCallId = o.toolCallId;
    if (toolCallId === undefined) {
      const run = await this.get(id);
      const waiting = run.waiting as unknown as Waiting | null;
      const open = (waiting?.calls ?? []).filter((c) => c.kind === 'input' && !waiting?.decisions[c.toolCallId]);
      // The run exists; what it is doing refuses an answer (409, with its status).
      if (open.length === 0)
        throw new IllegalTransitionError(id, run.status, 'queued', `it is ${run.status} and waits for no answer`);
      if (open.length > 1)
        throw new StoreError('ambiguous', `run ${id} has ${open.length} open questions: name the tool call to answer`);
      toolCallId = open[0]!.toolCallId;
    }
    const run = await this.lifecycle.answer(id, toolCallId, answer);
    this.rt.wake();
    return run;
  }

  /** Sends input into the run's next step (delivered when it runs again if it waits now). */
  async steer(
    id: string,
    input: UserInput,
    o: { idempotency?: IdempotencyClaim } = {},
  ): Promise<{ message: UserMessage; run: RunRecord }> {
    // Checked here: the run's own commits log it without a check.
    const message = this.lifecycle.checkedMessage(userMessage(input));
    // Checked and stored in one transaction: a turn's end either sees this steering (and goes on
    // to take it) or has committed first (and the run refuses it here).
    const run = await this.lifecycle.steer(id, message, o.idempotency);
    this.rt.executions.get(id)?.steeringArrived();
    // A sleeping run whose sleep wakes on steering wakes now; any other takes it when it runs again.
    const woken = isWaiting(run.status) ? await this.rt.waits.steered(id) : undefined;
    if (woken) this.rt.wake();
    return { message, run: woken ?? run };
  }

  /**
   * Delivers the signal `name` to the run, exactly once (ADR-0015): it ends the run's wait for it,
   * or is kept until the wait starts. `already_delivered` for a second delivery; `validation` when
   * the payload does not match the waiting call's schema.
   */
  async signal(
    id: string,
    name: string,
    payload: unknown,
    o: { source?: 'api' | 'library' } = {},
  ): Promise<{ run: RunRecord; consumed: boolean }> {
    // Its payload is JSON (anything goes); its name is kept as text.
    refuseNul('name', name);
    const r = await this.rt.waits.deliver(id, name, payload, o.source ?? 'library');
    if (r.consumed) this.rt.wake();
    return r;
  }

  /**
   * Delivers the outputs of client tool calls (core/client-tool.ts) the run made: each ends its
   * call's wait, exactly once (`already_delivered` for a second). A call id the run did not give a
   * client tool is refused (`unknown_tool_call`). An output may come before the run starts to
   * wait (it is kept, as a signal is); the run goes on once every pending call has its output.
   */
  async submitToolResults(
    id: string,
    results: readonly ClientToolResult[],
    o: { source?: 'api' | 'library' } = {},
  ): Promise<RunRecord> {
    let run = await this.get(id);
    if (results.length === 0) throw new StoreError('validation', 'no tool results to submit');
    const pending = new Set(pendingClientToolCalls(run).map((c) => c.callId));
    const unknown = results.filter((r) => !pending.has(r.callId)).map((r) => r.callId);
    // A finished run: a repeat is told `already_delivered`, anything else that the run waits for nothing.
    if (unknown.length > 0 && !isTerminal(run.status)) {
      // Not waiting yet (its step is still ending), or answered already: the log knows its calls.
      const calls = new Map<string, string>();
      for (const e of await runEvents(this.rt.sessions.log, run.sessionId, id))
        if (e.type === 'assistant/message')
          for (const p of e.data.message.content) if (p.type === 'tool-call') calls.set(p.toolCallId, p.toolName);
      const clientTools = new Set(((run.options as RunOptions).clientTools ?? []).map((t) => t.name));
      for (const callId of unknown)
        if (!clientTools.has(calls.get(callId) ?? ''))
          throw new StoreError('unknown_tool_call', `run ${id} made no client tool call ${callId}`);
    }
    let consumed = false;
    for (const r of results) {
      const delivered = await this.rt.waits.deliver(
        id,
        clientToolSignal(r.callId),
        clientToolOutput(r),
        o.source ?? 'library',
      );
      run = delivered.run;
      consumed ||= delivered.consumed;
    }
    if (consumed) this.rt.wake();
    return run;
  }

  /** Delivers the signal a callback token stands for (`POST /v1/callbacks/{token}`). */
  async callback(token: string, payload: unknown): Promise<{ run: RunRecord; consumed: boolean; name: string }> {
    const r = await this.rt.waits.deliverByToken(token, payload);
    if (r.consumed) this.rt.wake();
    return r;
  }

  /** A callback token for the run's signal `name` (tools get one from their RunScope: `callback`). */
  issueCallback(id: string, name: string): Promise<{ token: string; path: string }> {
    return this.rt.waits.issueCallback(id, name);
  }

  /**
   * The run's events after `after` (a session seq), then live ones with the deltas of the message
   * being streamed, until the run is terminal.
   */
  async *stream(id: string, o: { after?: number; signal?: AbortSignal } = {}): AsyncGenerator<RunStreamItem> {
    const run = await this.get(id);
    const ends = (e: SessionEvent) => e.type === 'run/status' && isTerminal(e.data.to);
    yield* follow(this.rt.sessions.log, run.sessionId, {
      after: eventPosition(o.after ?? 0),
      runId: id,
      endAt: ends,
      isDone: async () => isTerminal((await this.get(id)).status),
      pollMs: 250,
      ...(o.signal ? { signal: o.signal } : {}),
    });
    o.signal?.throwIfAborted();
  }
}

export function createRuntime(options: RuntimeOptions): Runtime {
  return new Runtime(options);
}
