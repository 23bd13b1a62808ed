import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Usage } from '../model/index.ts';
import type { SessionEvent } from '../session/index.ts';
import { isTerminal, RUN_STATUSES } from '../runs/lifecycle/run-status.ts';
import type { RunRecord, RunStatus } from '../store/index.ts';

/** Seconds: from a millisecond to ten minutes (model calls, steps, runs, claims). */
const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Seconds for store commits: from 50 µs to a second. */
const COMMIT_SECONDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** What a run's events are labelled with: its agent, and the model of its latest call. */
interface RunLabels {
  agent: string;
  model: string;
}

/** Runs whose labels are remembered (the least recently started go first). */
const MAX_RUNS = 10_000;

/**
 * Keel's Prometheus metrics for one process (a registry of its own, so several runtimes in one
 * process do not mix). Everything is counted as it happens, from the events this process commits,
 * the claims of its workers and its store's commits; a scrape reads two small gauges from the
 * store (runs by status, kept as runs move: no scan) and renders the rest from memory.
 */
export class KeelMetrics {
  readonly registry = new Registry();
  private readonly runs = new Map<string, RunLabels>();
  private readonly runStarted = new Map<string, number>();
  private readonly stepStarted = new Map<string, number>();

  readonly httpRequests = new Counter({
    name: 'keel_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'keel_http_request_duration_seconds',
    help: 'Time to the response headers, by method and route.',
    labelNames: ['method', 'route'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly sseConnections = new Gauge({
    name: 'keel_sse_connections',
    help: 'Open SSE connections.',
    registers: [this.registry],
  });
  readonly sseConnectionsTotal = new Counter({
    name: 'keel_sse_connections_total',
    help: 'SSE connections opened.',
    registers: [this.registry],
  });
  readonly sseDropped = new Counter({
    name: 'keel_sse_slow_clients_dropped_total',
    help: 'SSE connections dropped because the client read too slowly (it resumes from the log).',
    registers: [this.registry],
  });
  readonly eventsCommitted = new Counter({
    name: 'keel_events_committed_total',
    help: 'Durable events committed by this process.',
    registers: [this.registry],
  });
  readonly runDuration = new Histogram({
    name: 'keel_run_duration_seconds',
    help: 'From the first claim of a run to its end, by agent and final status (runs started in this process).',
    labelNames: ['agent', 'status'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly stepDuration = new Histogram({
    name: 'keel_step_duration_seconds',
    help: 'Steps: a model decision and the tools it called, by agent.',
    labelNames: ['agent'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly modelCallDuration = new Histogram({
    name: 'keel_model_call_duration_seconds',
    help: 'Model calls, request to complete response, by model.',
    labelNames: ['model'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly timeToFirstToken = new Histogram({
    name: 'keel_model_time_to_first_token_seconds',
    help: 'Model calls, request to first chunk, by model.',
    labelNames: ['model'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly modelErrors = new Counter({
    name: 'keel_model_errors_total',
    help: 'Model calls that failed (retried: kind="retry"; for good: kind="error"), by model.',
    labelNames: ['model', 'kind'],
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'keel_tokens_total',
    help: 'Tokens of model calls, by agent, model and type (input, output, cached_input, reasoning).',
    labelNames: ['agent', 'model', 'type'],
    registers: [this.registry],
  });
  readonly cost = new Counter({
    name: 'keel_cost_total',
    help: 'Cost of model calls (in the unit of the configured prices), by agent and model.',
    labelNames: ['agent', 'model'],
    registers: [this.registry],
  });
  readonly toolDuration = new Histogram({
    name: 'keel_tool_call_duration_seconds',
    help: 'Tool executions, by tool.',
    labelNames: ['tool'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly claimLatency = new Histogram({
    name: 'keel_run_claim_latency_seconds',
    help: 'From the creation of a run to its first claim by a worker.',
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly claims = new Counter({
    name: 'keel_run_claims_total',
    help: 'Claims of runs by this process, by kind: start (first claim), resume (after a wait or pause), recovery (after a lost lease or a release).',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly leaseExpiries = new Counter({
    name: 'keel_lease_expiries_total',
    help: 'Runs recovered here whose previous worker lost its lease (crashed, stalled, cut off).',
    registers: [this.registry],
  });
  readonly leasesLost = new Counter({
    name: 'keel_leases_lost_total',
    help: 'Runs this process was executing when their lease was lost (another worker may have claimed them).',
    registers: [this.registry],
  });
  readonly storeCommit = new Histogram({
    name: 'keel_store_commit_seconds',
    help: 'Store write transactions, from their start to their commit.',
    buckets: COMMIT_SECONDS,
    registers: [this.registry],
  });
  readonly limitWait = new Histogram({
    name: 'keel_model_limit_wait_seconds',
    help: 'Time model calls waited for provider limits (concurrency, requests, tokens, a 429 pause), by limit key.',
    labelNames: ['model'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'keel_model_rate_limited_total',
    help: 'Provider answers 429 (rate limited) seen by this process, by limit key.',
    labelNames: ['model'],
    registers: [this.registry],
  });
  readonly retentionArchived = new Counter({
    name: 'keel_retention_sessions_archived_total',
    help: 'Sessions this process moved to the archive store (retention).',
    registers: [this.registry],
  });
  readonly retentionArchivedBytes = new Counter({
    name: 'keel_retention_archive_bytes_total',
    help: 'Bytes of the (compressed) archives this process wrote.',
    registers: [this.registry],
  });
  readonly retentionDeleted = new Counter({
    name: 'keel_retention_sessions_deleted_total',
    help: 'Archived sessions this process deleted (erased, their archive removed).',
    registers: [this.registry],
  });
  readonly retentionRestored = new Counter({
    name: 'keel_retention_sessions_restored_total',
    help: 'Sessions this process restored from the archive store.',
    registers: [this.registry],
  });
  readonly retentionRowsDeleted = new Counter({
    name: 'keel_retention_rows_deleted_total',
    help: 'Finished rows of the operational tables this process pruned, by table.',
    labelNames: ['table'],
    registers: [this.registry],
  });
  readonly executing = new Gauge({
    name: 'keel_runs_executing',
    help: 'Runs this process is executing now.',
    registers: [this.registry],
  });
  private readonly runsByStatus = new Gauge({
    name: 'keel_runs',
    help: 'Runs by status (terminal statuses count every run that ended so).',
    labelNames: ['status'],
    registers: [this.registry],
  });
  private readonly queueDepth = new Gauge({
    name: 'keel_queue_depth',
    help: 'Runs waiting for a worker (queued).',
    registers: [this.registry],
  });
  // The process's own, read at each scrape (prom-client's default collectors would start timers
  // and observers per registry, for the life of the process).
  private readonly rss = new Gauge({
    name: 'process_resident_memory_bytes',
    help: 'Resident memory of this process.',
    registers: [this.registry],
  });
  private readonly heapUsed = new Gauge({
    name: 'nodejs_heap_used_bytes',
    help: 'V8 heap in use.',
    registers: [this.registry],
  });
  private readonly cpu = new Gauge({
    name: 'process_cpu_seconds',
    help: 'CPU time of this process, by mode (user, system).',
    labelNames: ['mode'],
    registers: [this.registry],
  });

  private readonly gauges: { countByStatus(): Promise<Record<RunStatus, number>>; executing(): number };

  /** `countByStatus`: runs by status, read at each scrape (the store keeps them as runs move). */
  constructor(gauges: { countByStatus(): Promise<Record<RunStatus, number>>; executing(): number }) {
    this.gauges = gauges;
  }

  /** The exposition text (Prometheus format 0.0.4) and its content type. */
  async render(): Promise<{ body: string; contentType: string }> {
    const counts = await this.gauges.countByStatus();
    for (const s of RUN_STATUSES) this.runsByStatus.set({ status: s }, counts[s]);
    this.queueDepth.set(counts.queued);
    this.executing.set(this.gauges.executing());
    const memory = process.memoryUsage();
    this.rss.set(memory.rss);
    this.heapUsed.set(memory.heapUsed);
    const cpu = process.cpuUsage();
    this.cpu.set({ mode: 'user' }, cpu.user / 1e6);
    this.cpu.set({ mode: 'system' }, cpu.system / 1e6);
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }

  /** A worker of this process claimed `run` (at `now`), which was `previous`. */
  claimed(run: RunRecord, previous: RunStatus, now: number): void {
    const first = run.startedAt === now && run.attempt <= 1;
    if (first) this.claimLatency.observe(Math.max(0, now - run.createdAt) / 1000);
    this.claims.inc({ kind: previous === 'running' || run.attempt > 1 ? 'recovery' : first ? 'start' : 'resume' });
    if (previous === 'running') this.leaseExpiries.inc();
    this.remember(run.id, { agent: run.agent.name, model: modelOf(run) });
    if (!this.runStarted.has(run.id)) this.runStarted.set(run.id, now);
  }

  /** An event this process committed. */
  event(e: SessionEvent): void {
    this.eventsCommitted.inc();
    const runId = e.runId ?? undefined;
    const labels = runId !== undefined ? this.runs.get(runId) : undefined;
    const agent = labels?.agent ?? 'unknown';
    switch (e.type) {
      case 'turn/start': {
        const d = e.data as { agent?: { name?: string }; model?: { modelId?: string } };
        if (runId !== undefined)
          this.remember(runId, {
            agent: d.agent?.name ?? agent,
            model: d.model?.modelId ?? labels?.model ?? 'unknown',
          });
        break;
      }
      case 'step/start':
        if (runId !== undefined) this.stepStarted.set(runId, e.time);
        break;
      case 'step/end': {
        const started = runId !== undefined ? this.stepStarted.get(runId) : undefined;
        if (started !== undefined) {
          this.stepDuration.observe({ agent }, Math.max(0, e.time - started) / 1000);
          this.stepStarted.delete(runId!);
        }
        break;
      }
      case 'request/header': {
        const model = (e.data as { modelId?: string }).modelId;
        if (labels && model) labels.model = model;
        break;
      }
      case 'assistant/message': {
        const d = e.data;
        const model = labels?.model ?? d.responseModelId ?? 'unknown';
        if (d.timing?.durationMs !== undefined) this.modelCallDuration.observe({ model }, d.timing.durationMs / 1000);
        if (d.timing?.firstChunkMs !== undefined)
          this.timeToFirstToken.observe({ model }, d.timing.firstChunkMs / 1000);
        for (const [type, key] of TOKEN_TYPES) {
          const n = d.usage?.[key];
          if (typeof n === 'number' && n > 0) this.tokens.inc({ agent, model, type }, n);
        }
        if (typeof d.cost === 'number' && d.cost > 0) this.cost.inc({ agent, model }, d.cost);
        break;
      }
      case 'model/retry':
        this.modelErrors.inc({ model: labels?.model ?? 'unknown', kind: 'retry' });
        break;
      case 'model/error':
        this.modelErrors.inc({ model: labels?.model ?? 'unknown', kind: 'error' });
        break;
      case 'tool/result': {
        const d = e.data as { toolName?: string; durationMs?: number };
        if (d.durationMs !== undefined)
          this.toolDuration.observe({ tool: d.toolName ?? 'unknown' }, d.durationMs / 1000);
        break;
      }
      case 'run/status': {
        const to = (e.data as { to?: RunStatus }).to;
        if (runId === undefined || to === undefined || !isTerminal(to)) break;
        const started = this.runStarted.get(runId);
        if (started !== undefined)
          this.runDuration.observe({ agent, status: to }, Math.max(0, e.time - started) / 1000);
        this.runStarted.delete(runId);
        this.runs.delete(runId);
        this.stepStarted.delete(runId);
        break;
      }
    }
  }

  private remember(runId: string, labels: RunLabels): void {
    this.runs.delete(runId);
    this.runs.set(runId, labels);
    if (this.runs.size > MAX_RUNS) {
      const oldest = this.runs.keys().next().value!;
      this.runs.delete(oldest);
      this.runStarted.delete(oldest);
      this.stepStarted.delete(oldest);
    }
  }
}

/** Usage fields counted as tokens, by the `type` label they get. */
const TOKEN_TYPES: ReadonlyArray<[string, keyof Usage]> = [
  ['input', 'inputTokens'],
  ['output', 'outputTokens'],
  ['cached_input', 'cachedInputTokens'],
  ['reasoning', 'reasoningTokens'],
];

/** The model a run was created with (its agent spec records it), as `modelId`. */
function modelOf(run: RunRecord): string {
  const m = (run.agentSpec as { model?: unknown }).model;
  if (typeof m === 'string') return m;
  if (m && typeof m === 'object' && typeof (m as { modelId?: unknown }).modelId === 'string')
    return (m as { modelId: string }).modelId;
  return 'unknown';
}
