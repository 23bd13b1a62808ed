/**
 * The cluster test (test/cluster/cluster.ts): 3 API processes and 2 worker processes on one
 * PostgreSQL schema; a few hundred runs with tools, approvals, steering and messages sent while
 * an answer streams; one worker killed with SIGKILL midway; SSE clients of runs and of sessions
 * hopping between API processes. Nothing lost, nothing doubled.
 */
import { afterAll, expect, it } from 'vitest';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';
import { runCluster } from './cluster.ts';

const schema = freshSchema();
afterAll(() => dropSchema(postgresUrl(), schema));

it('3 API processes and 2 workers on PostgreSQL: every run completes, every client gets every event once, in order, across hops and a worker killed midway', async () => {
  const report = await runCluster({
    url: postgresUrl(),
    schema,
    apis: 3,
    workers: 2,
    runs: Number(process.env.CLUSTER_RUNS ?? 200),
    parallel: 40,
    killAt: 0.3,
  });
  expect(report.violations).toEqual([]);
  expect(report.completed).toBe(report.runs);
  expect(report.killed).toBe(1);
  expect(report.hops).toBeGreaterThan(report.runs);
  expect(report.approvals).toBeGreaterThan(0);
  expect(report.steered).toBeGreaterThan(0);
  // Messages sent while an answer streamed, enqueued: their sessions' streams lost no delta either.
  expect(report.enqueued).toBeGreaterThan(0);
  // Token deltas streamed on the workers reached the clients through the API processes.
  expect(report.deltas).toBeGreaterThan(report.runs);
}, 300_000);
