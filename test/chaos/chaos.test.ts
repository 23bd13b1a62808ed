/**
 * The chaos test, short, on both backends at once (each its own database, workers and driver):
 * see chaos.ts (`npm run chaos` runs the full version).
 */
import { describe, expect, it } from 'vitest';
import { postgresUrl } from '../support/postgres.ts';
import { runChaos } from './chaos.ts';

describe('chaos: kill -9 the workers at random moments while tasks, steering, cancels, every kind of wait, schedules, webhooks, provider limits and erasures are in flight', () => {
  it('on SQLite and on PostgreSQL: loses no message, answers each once, runs no effect twice nor a denied call, ends each wait once, fires each tick once, delivers each webhook, leaves nothing of an erased session', async () => {
    const reports = await Promise.all(
      (['sqlite', 'postgres'] as const).map((backend) =>
        runChaos({
          backend,
          ...(backend === 'postgres' ? { postgresUrl: postgresUrl() } : {}),
          sessions: 8,
          actionsPerSession: 4,
          kills: 10,
          log: (l) => console.log(l),
        }),
      ),
    );
    for (const report of reports) {
      expect(report.violations, report.backend).toEqual([]);
      expect(report.kills, report.backend).toBe(10);
      expect(report.runs, report.backend).toBeGreaterThan(8);
      expect(report.steered, report.backend).toBeGreaterThan(0);
      expect(report.decisions, report.backend).toBeGreaterThan(0);
    }
  }, 240_000);
});
