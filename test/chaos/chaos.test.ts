/**
 * The chaos test, short: see chaos.ts (`npm run chaos` runs the full version).
 */
import { describe, expect, it } from 'vitest';
import { runChaos } from './chaos.ts';

describe('chaos: kill -9 the worker at random moments while tasks, steering, approvals and cancels are in flight', () => {
  it('loses no accepted message, answers each once, runs no effect twice, and leaves every run terminal', async () => {
    const report = await runChaos({ sessions: 10, actionsPerSession: 4, kills: 12, log: (l) => console.log(l) });
    expect(report.violations).toEqual([]);
    expect(report.kills).toBe(12);
    expect(report.runs).toBeGreaterThan(10);
    expect(report.steered).toBeGreaterThan(0);
    expect(report.decisions).toBeGreaterThan(0);
  }, 180_000);
});
