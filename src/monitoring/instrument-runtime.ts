import type { Runtime } from '../runs/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { RunRecord } from '../store/index.ts';
import { silentLogger, type Logger } from './logger.ts';
import { KeelMetrics } from './metrics.ts';

export interface RuntimeTelemetry {
  metrics: KeelMetrics;
  logger: Logger;
  /** Stops listening to the runtime. */
  stop(): void;
}

/** The W3C trace id a run carries (its creating request's `traceparent`, see the run's options), if any. */
export function traceIdOf(run: Pick<RunRecord, 'options'> | undefined): string | undefined {
  const trace = (run?.options as { trace?: { traceparent?: unknown } } | undefined)?.trace;
  const m =
    typeof trace?.traceparent === 'string'
      ? /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/.exec(trace.traceparent)
      : null;
  return m?.[1];
}

/**
 * Metrics and log lines of a runtime, from what this process does: the events it commits (through
 * the session log's live feed, so nothing on the hot path waits for them), the claims and lost
 * leases of its workers, and its store's commits. Every line names the session, the run and the
 * trace it concerns.
 */
export function instrumentRuntime(rt: Runtime, o: { logger?: Logger } = {}): RuntimeTelemetry {
  const logger = o.logger ?? silentLogger();
  const metrics = new KeelMetrics({
    countByStatus: () => rt.runs.countByStatus(),
    executing: () => rt.executions.size,
  });
  const ids = (sessionId: string, runId: string | null | undefined) => {
    const run = runId ? rt.executions.get(runId)?.run : undefined;
    const traceId = traceIdOf(run);
    return { session_id: sessionId, ...(runId ? { run_id: runId } : {}), ...(traceId ? { trace_id: traceId } : {}) };
  };
  const offEvents = rt.sessions.log.subscribeAll((sessionId, item) => {
    if (item.kind !== 'event') return;
    metrics.event(item.event);
    if (logger.level !== 'silent') logEvent(logger, item.event, ids(sessionId, item.event.runId));
  });
  const offRuns = rt.observe({
    claimed(run, previous, now) {
      metrics.claimed(run, previous, now);
      const line = {
        session_id: run.sessionId,
        run_id: run.id,
        ...(traceIdOf(run) ? { trace_id: traceIdOf(run) } : {}),
        agent: run.agent.name,
        attempt: run.attempt,
      };
      if (previous === 'running') logger.warn(line, 'run recovered: its previous worker lost the lease');
      else logger.info(line, run.startedAt === now ? 'run started' : 'run resumed');
    },
    leaseLost(run) {
      metrics.leasesLost.inc();
      logger.warn(
        { session_id: run.sessionId, run_id: run.id, ...(traceIdOf(run) ? { trace_id: traceIdOf(run) } : {}) },
        'lease lost: this worker stops the run (another worker recovers it)',
      );
    },
  });
  const offRetention = rt.retention.observe({
    archived: (a) => {
      metrics.retentionArchived.inc();
      metrics.retentionArchivedBytes.inc(a.bytes);
      logger.info({ session_id: a.sessionId, tenant: a.tenant, bytes: a.bytes }, 'session archived');
    },
    deleted: (d) => {
      metrics.retentionDeleted.inc();
      logger.info({ session_id: d.sessionId, tenant: d.tenant }, 'archived session deleted');
    },
    restored: (r) => {
      metrics.retentionRestored.inc();
      logger.info({ session_id: r.sessionId, tenant: r.tenant }, 'session restored from its archive');
    },
    pruned: (table, rows) => metrics.retentionRowsDeleted.inc({ table }, rows),
    swept: (r) =>
      logger.info(
        {
          archived: r.sessions.archived,
          deleted: r.sessions.deleted,
          skipped: r.sessions.skipped,
          errors: r.sessions.errors.length,
          rows: Object.fromEntries(Object.entries(r.tables).map(([t, v]) => [t, v.rows])),
          duration_ms: r.durationMs,
        },
        'retention sweep',
      ),
    sweepFailed: (message) => logger.warn({ error: message }, 'retention sweep failed'),
  });
  const offCommits = rt.store.observeCommits?.((seconds) => metrics.storeCommit.observe(seconds));
  const offLimits = rt.flowControl?.observe({
    waited: (model, s) => metrics.limitWait.observe({ model }, s),
    rateLimited: (model) => metrics.rateLimited.inc({ model }),
  });
  return {
    metrics,
    logger,
    stop() {
      offEvents();
      offRuns();
      offRetention();
      offCommits?.();
      offLimits?.();
    },
  };
}

/** The log line of an event worth one (run ends, waits, retries, failures), at its level. */
function logEvent(logger: Logger, e: SessionEvent, ids: Record<string, string>): void {
  switch (e.type) {
    case 'run/status': {
      const d = e.data;
      if (d.to === 'completed') logger.info({ ...ids, attempt: d.attempt }, 'run completed');
      else if (d.to === 'failed')
        logger.error(
          {
            ...ids,
            attempt: d.attempt,
            ...(d.error ? { error: d.error } : {}),
            ...(d.reason ? { reason: d.reason } : {}),
          },
          'run failed',
        );
      else if (d.to === 'cancelled' || d.to === 'timed_out')
        logger.warn(
          { ...ids, ...(d.reason ? { reason: d.reason } : {}) },
          `run ${d.to === 'cancelled' ? 'cancelled' : 'timed out'}`,
        );
      else if (d.to === 'waiting_approval' || d.to === 'waiting_for_user')
        logger.info(ids, d.to === 'waiting_approval' ? 'run waits for an approval' : 'run waits for an answer');
      else if (d.to === 'sleeping' || d.to === 'waiting_for_signal')
        logger.info(ids, d.to === 'sleeping' ? 'run sleeps' : 'run waits for a signal');
      else if (d.to === 'waiting_for_quota')
        logger.info({ ...ids, ...(d.reason ? { reason: d.reason } : {}) }, 'run waits for its quota');
      else if (d.to === 'paused') logger.info(ids, 'run paused');
      else if (d.to === 'queued' && d.from === null)
        logger.debug({ ...ids, ...(d.agent ? { agent: d.agent.name } : {}) }, 'run queued');
      break;
    }
    case 'turn/end':
      logger.info(
        { ...ids, reason: e.data.reason, steps: e.data.steps, usage: e.data.usage, cost: e.data.cost },
        'turn ended',
      );
      break;
    case 'model/retry':
      logger.warn(
        { ...ids, attempt: e.data.attempt, delay_ms: e.data.delayMs, error: e.data.error },
        'model call failed; retrying',
      );
      break;
    case 'model/error':
      logger.error({ ...ids, attempt: e.data.attempt, error: e.data.error }, 'model call failed');
      break;
    case 'tool/result':
      if (e.data.output.type === 'error')
        logger.warn(
          {
            ...ids,
            tool: e.data.toolName,
            tool_call_id: e.data.toolCallId,
            code: e.data.output.code,
            error: e.data.output.message,
          },
          'tool call failed',
        );
      break;
    case 'compaction':
      logger.info(
        { ...ids, reason: e.data.reason, tokens_before: e.data.tokensBefore, tokens_after: e.data.tokensAfter },
        'session compacted',
      );
      break;
    case 'compaction/failed':
      logger.warn({ ...ids, error: e.data.error }, 'compaction failed; the turn goes on uncompacted');
      break;
    case 'step/end':
      logger.debug({ ...ids, step: e.step, reason: e.data.reason }, 'step ended');
      break;
  }
}
