/** How the experiment pages show modes, progress, scores and differences. */
import type { ExperimentCounts, ExperimentMode } from './types.ts';

export const modeLabel = (m: ExperimentMode | (string & {})): string =>
  m === 'step_replay' ? 'step replay' : 'full rerun';

/** "3 of 4 done · 1 failed · 2 running": what is not zero, besides how many are done. */
export function countsText(c: ExperimentCounts | Record<string, number>): string {
  const n = (k: string) => (c as Record<string, number>)[k] ?? 0;
  const total = n('pending') + n('running') + n('done') + n('failed');
  const parts = [`${n('done')} of ${total} done`];
  for (const k of ['failed', 'running', 'pending']) if (n(k) > 0) parts.push(`${n(k)} ${k}`);
  return parts.join(' · ');
}

/** A score from 0 to 1, to two places. */
export const score = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(2));

/** A difference to the baseline with its sign; `cls` colours it (better, worse, even). */
export function delta(d: number | null): { text: string; cls: string } {
  if (d === null) return { text: '–', cls: 'delta' };
  if (Math.abs(d) < 0.005) return { text: '±0.00', cls: 'delta even' };
  return d > 0
    ? { text: `+${d.toFixed(2)}`, cls: 'delta better' }
    : { text: `−${(-d).toFixed(2)}`, cls: 'delta worse' };
}
