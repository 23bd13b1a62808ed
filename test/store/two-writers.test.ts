import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { WorkerMessage } from './fixtures/append-worker.ts';

const WORKER = fileURLToPath(new URL('./fixtures/append-worker.ts', import.meta.url));
const BATCHES = 300;
// A slow shared CI box may keep the other writer's lock for a long time: wait rather than fail.
const BUSY_TIMEOUT_MS = 60_000;

interface Worker {
  name: string;
  child: ChildProcess;
  ready: Promise<void>;
  done: Promise<number[]>;
  exited: Promise<number | null>;
  stderr: () => string;
}

function startWorker(dbPath: string, sessionId: string, name: string, pauseMs?: number): Worker {
  const args = [
    WORKER,
    dbPath,
    sessionId,
    String(BATCHES),
    name,
    String(BUSY_TIMEOUT_MS),
    ...(pauseMs !== undefined ? [String(pauseMs)] : []),
  ];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
  const failed = (why: string) => new Error(`worker ${name} ${why}\n${stderr}`);
  const message = (type: WorkerMessage['type']) =>
    new Promise<WorkerMessage>((resolve, reject) => {
      child.on('message', (m: WorkerMessage) => {
        if (m.type === type) resolve(m);
        else if (m.type === 'error') reject(failed(`failed: ${m.error}`));
      });
      void exited.then((code) => reject(failed(`exited with ${code} before '${type}'`)), reject);
    });
  const ready = message('ready').then(() => undefined);
  const done = message('done').then((m) => (m.type === 'done' ? m.seqs : []));
  // Avoid unhandled rejections if the test fails before awaiting these.
  ready.catch(() => {});
  done.catch(() => {});
  return { name, child, ready, done, exited, stderr: () => stderr };
}

type Data = { worker: string; i: number; kind: 'entry' | 'note' };

describe('two writer processes on one SQLite file', () => {
  let dir: string;
  let workers: Worker[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-two-writers-'));
  });

  afterEach(() => {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill();
    workers = [];
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Runs both writers against one session and checks the log they leave. Returns how often the
   * writer changed from one batch to the next (how interleaved the run was).
   */
  async function twoWriters(pauseMs?: number): Promise<number> {
    const dbPath = join(dir, 'keel.db');
    const setup = new SqliteStore({ path: dbPath });
    await setup.sessions.create({ id: 'shared', createdAt: Date.now() });
    await setup.close();

    workers = [startWorker(dbPath, 'shared', 'A', pauseMs), startWorker(dbPath, 'shared', 'B', pauseMs)];
    await Promise.all(workers.map((w) => w.ready));
    // Both are connected and waiting: release them at the same moment.
    for (const w of workers) w.child.send('go');
    const [seqsA, seqsB] = await Promise.all(workers.map((w) => w.done));
    const codes = await Promise.all(workers.map((w) => w.exited));
    expect(codes, workers.map((w) => w.stderr()).join('\n')).toEqual([0, 0]);

    const total = 2 * 2 * BATCHES;
    const oneToTotal = Array.from({ length: total }, (_, i) => i + 1);
    // What each writer was handed back: disjoint, and together exactly 1..total.
    expect(seqsA).toHaveLength(2 * BATCHES);
    expect(seqsB).toHaveLength(2 * BATCHES);
    expect([...seqsA!, ...seqsB!].sort((a, b) => a - b)).toEqual(oneToTotal);

    const store = new SqliteStore({ path: dbPath, busyTimeoutMs: BUSY_TIMEOUT_MS });
    try {
      const events = await store.events.read('shared');
      expect(events.map((e) => e.seq)).toEqual(oneToTotal);
      expect(new Set(events.map((e) => e.id)).size).toBe(total);

      // Each batch landed as one contiguous pair: its entry at an odd seq, its note right after.
      let switches = 0;
      for (let k = 0; k < total; k += 2) {
        const [e, n] = [events[k]!, events[k + 1]!];
        const [de, dn] = [e.data as Data, n.data as Data];
        expect(e.entry && !n.entry).toBe(true);
        expect(dn).toEqual({ ...de, kind: 'note' });
        if (k > 0 && de.worker !== (events[k - 2]!.data as Data).worker) switches++;
      }
      // Each writer's batches are in its own order.
      for (const name of ['A', 'B']) {
        const mine = events.filter((e) => e.entry && (e.data as Data).worker === name).map((e) => (e.data as Data).i);
        expect(mine).toEqual(Array.from({ length: BATCHES }, (_, i) => i));
      }

      // The entries form one linear chain in seq order; notes have no parent.
      const entries = events.filter((e) => e.entry);
      expect(entries).toHaveLength(total / 2);
      expect(entries[0]!.parentId).toBeUndefined();
      for (let i = 1; i < entries.length; i++) {
        if (entries[i]!.parentId !== entries[i - 1]!.id) {
          expect.fail(
            `entry at seq ${entries[i]!.seq} has parent ${entries[i]!.parentId}, not the entry at seq ${entries[i - 1]!.seq}`,
          );
        }
      }
      expect(events.filter((e) => !e.entry).every((e) => e.parentId === undefined)).toBe(true);

      const session = await store.sessions.get('shared');
      expect(session).toMatchObject({ lastSeq: total, leafId: entries.at(-1)!.id });
      // The store's own walk from the leaf reaches the root through every entry.
      const path = await store.events.ancestors('shared', entries.at(-1)!.id, total);
      expect(path.map((e) => e.id)).toEqual(entries.map((e) => e.id).reverse());
      return switches;
    } finally {
      await store.close();
    }
  }

  it('appending as fast as they can: seqs 1..n without gap, one linear entry chain', async () => {
    // SQLite's busy handler polls with growing sleeps, so a writer in a tight loop tends to keep the
    // lock for long stretches: this run may interleave only a few times, but every hand-over counts.
    await twoWriters();
  }, 180_000);

  it('appending with a pause between batches: the writers interleave and the chain still holds', async () => {
    // With a timer between batches each writer leaves room for the other (hundreds of hand-overs in
    // practice); at least one is needed for the run to mean anything.
    expect(await twoWriters(1)).toBeGreaterThan(0);
  }, 180_000);
});
