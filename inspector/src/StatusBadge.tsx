import type { RunStatus } from 'keel/client';

const LABELS: Record<RunStatus, string> = {
  queued: 'queued',
  running: 'running',
  waiting_approval: 'waiting for approval',
  waiting_for_user: 'waiting for an answer',
  sleeping: 'sleeping',
  waiting_for_signal: 'waiting for a signal',
  waiting_for_quota: 'waiting for quota',
  paused: 'paused',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
  timed_out: 'timed out',
};

/** A run's status as a coloured label (an experiment's too: `running`, `completed`, `cancelled`). */
export function StatusBadge(props: { status: RunStatus | (string & {}) | undefined }) {
  if (!props.status) return <span class="badge">no runs</span>;
  return <span class={`badge status-${props.status}`}>{LABELS[props.status as RunStatus] ?? props.status}</span>;
}
