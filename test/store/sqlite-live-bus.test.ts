/**
 * The live feed of a SQLite file across its processes (ADR-0035): store instances on one file
 * relay their broadcasts (token deltas) and the notices of their commits to each other through
 * the file's local bus, in order: the deltas broadcast before a commit arrive before its notice,
 * as on PostgreSQL. Members that die leave stale sockets that the others remove; `close` leaves
 * nothing behind. Instances on one file in one process are members like processes are; the tests
 * with another process kill it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore, type EventDraft, type StoreChange } from '../../src/index.ts';
import { LocalBus } from '../../src/store/sqlite/local-bus.ts';
import { until } from '../support/sse-helpers.ts';

const MEMBER = join(import.meta.dirname, 'fixtures', 'live-bus-member.ts');
const T0 = 1_700_000_000_000;

const note = (n: number): EventDraft => ({
  id: randomUUID(),
  type: 'test/note',
  v: 1,
  time: T0,
  entry: false,
  data: { n },
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A process's state letter in /proc (`T` stopped, `Z` dead and not yet reaped). */
function processState(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0]!;
}

/** `promise`, or a failure with `message` after `ms`. */
async function within<T>(ms: number, promise: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

function dbFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bus-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'keel.db');
}

/** A store on the file that listens: what it hears (changes without details left out), in order. */
function member(path: string) {
  const store = new SqliteStore({ path });
  const heard: StoreChange[] = [];
  store.notices.changes((c) => c && heard.push(c));
  cleanups.push(() => store.close());
  return {
    store,
    heard,
    messages: () => heard.flatMap((c) => (c.message ? [c.message] : [])),
    notices: () => heard.flatMap((c) => (c.message ? [] : [c])),
  };
}

/**
 * Every member's barrier answered: each pair of members knows each other both ways (of two that
 * joined together, at least one found the other's socket, and its barrier waits for the other's
 * answer, which comes on the connection the other opened to it).
 */
const allJoined = (...stores: SqliteStore[]) => Promise.all(stores.map((s) => s.notices.caughtUp!()));

/** What a member process heard (see fixtures/live-bus-member.ts). */
function heardBy(child: ChildProcess): Promise<{ messages: number[]; notices: StoreChange[] }> {
  return new Promise((resolve) => {
    const take = (m: { messages?: number[]; notices: StoreChange[] }) => {
      if (!m.messages) return;
      child.off('message', take);
      resolve(m as { messages: number[]; notices: StoreChange[] });
    };
    child.on('message', take);
    child.send('heard');
  });
}

function spawnMember(path: string): { child: ChildProcess; socket: Promise<string>; exited: Promise<void> } {
  const child = spawn(process.execPath, [MEMBER, path], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const socket = new Promise<string>((resolve, reject) => {
    child.once('message', (m: { socket: string }) => resolve(m.socket));
    void exited.then(() => reject(new Error('the member process exited before it joined')));
  });
  socket.catch(() => {});
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await exited;
    // Killed, it leaves its socket, which the next member to meet it would remove: none will.
    rmSync(await socket.catch(() => ''), { force: true });
  });
  return { child, socket, exited };
}

describe('SqliteStore: the live feed across the processes of a file (local bus)', () => {
  it('a broadcast reaches every other store on the file, in the order sent, never its sender', async () => {
    const path = dbFile();
    const [a, b, c] = [member(path), member(path), member(path)];
    await allJoined(a.store, b.store, c.store);

    a.store.notices.broadcast!('s1', { n: 1 });
    a.store.notices.broadcast!('s1', { n: 2 });
    b.store.notices.broadcast!('s2', { n: 3 });
    a.store.notices.broadcast!('s1', { n: 4 });
    // After a member's barrier, what the others sent before it answered has arrived.
    await allJoined(a.store, b.store, c.store);

    expect(b.heard).toEqual([
      { sessionId: 's1', message: { n: 1 } },
      { sessionId: 's1', message: { n: 2 } },
      { sessionId: 's1', message: { n: 4 } },
    ]);
    expect(a.heard).toEqual([{ sessionId: 's2', message: { n: 3 } }]);
    expect(c.messages().filter((m) => m.n !== 3)).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
    expect(c.messages()).toContainEqual({ n: 3 });
    expect(a.store.droppedBroadcasts).toBe(0);
  });

  it("the deltas broadcast before a commit arrive before its notice; every member's commits are noticed with their session and seq, the committer's own too", async () => {
    const path = dbFile();
    const [a, b] = [member(path), member(path)];
    await allJoined(a.store, b.store);
    await a.store.sessions.create({ id: 's', createdAt: T0 });

    a.store.notices.broadcast!('s', { kind: 'delta', id: '0.1' });
    a.store.notices.broadcast!('s', { kind: 'delta', id: '0.2' });
    await a.store.events.append('s', [note(1), note(2)]);
    a.store.notices.broadcast!('s', { kind: 'delta', id: '2.1' });
    await b.store.notices.caughtUp!();
    await b.store.events.append('s', [note(3)]);
    await allJoined(a.store, b.store);

    expect(b.heard).toEqual([
      { sessionId: 's', message: { kind: 'delta', id: '0.1' } },
      { sessionId: 's', message: { kind: 'delta', id: '0.2' } },
      { sessionId: 's', lastSeq: 2 },
      { sessionId: 's', message: { kind: 'delta', id: '2.1' } },
      { sessionId: 's', lastSeq: 3, own: true },
    ]);
    // A notice of the store's own commits says so (its session log published those events already).
    expect(a.notices()).toEqual([
      { sessionId: 's', lastSeq: 2, own: true },
      { sessionId: 's', lastSeq: 3 },
    ]);
  });

  it('a notice past seqs committed off the bus (a store that never listened) is passed on once every member answered a barrier', async () => {
    const path = dbFile();
    const [a, b] = [member(path), member(path)];
    const offBus = new SqliteStore({ path });
    cleanups.push(() => offBus.close());
    await allJoined(a.store, b.store);
    await offBus.sessions.create({ id: 's', createdAt: T0 });
    await offBus.events.append('s', [note(1), note(2)]);
    await a.store.events.append('s', [note(3)]);
    // Seqs 1 and 2 were never noticed: b learns that nothing else is on its way, and passes on 3.
    await b.store.notices.caughtUp!();
    expect(b.notices()).toEqual([{ sessionId: 's', lastSeq: 3 }]);
    await a.store.notices.caughtUp!();
    expect(a.notices()).toEqual([{ sessionId: 's', lastSeq: 3 }]);
    expect(offBus.liveSocket).toBeUndefined();
  });

  it('a store that closes right after a commit still tells the others of it', async () => {
    const path = dbFile();
    const [a, b] = [member(path), member(path)];
    await allJoined(a.store, b.store);
    await a.store.sessions.create({ id: 's', createdAt: T0 });
    await a.store.events.append('s', [note(1)]);
    await a.store.close();
    await until(() => b.notices().length > 0);
    expect(b.notices()).toEqual([{ sessionId: 's', lastSeq: 1 }]);
  });

  it('close removes the socket and, with the last member, the directory; a :memory: store is on no bus', async () => {
    const path = dbFile();
    const [a, b] = [member(path), member(path)];
    await allJoined(a.store, b.store);
    const sockets = [a.store.liveSocket!, b.store.liveSocket!];
    const dir = dirname(sockets[0]!);
    expect(readdirSync(dir).sort()).toEqual(sockets.map((s) => s.slice(dir.length + 1)).sort());
    await a.store.close();
    expect(existsSync(sockets[0]!)).toBe(false);
    // b goes on without a: its broadcasts and barriers do not wait for it.
    b.store.notices.broadcast!('s', { n: 1 });
    await b.store.notices.caughtUp!();
    await b.store.close();
    expect(existsSync(dir)).toBe(false);

    const memory = new SqliteStore({ path: ':memory:' });
    cleanups.push(() => memory.close());
    expect(memory.notices.broadcast).toBeUndefined();
    expect(memory.notices.caughtUp).toBeUndefined();
    memory.notices.changes(() => {});
    expect(memory.liveSocket).toBeUndefined();
  });

  it('a member that does not read (stopped) misses the deltas past 1 MB waiting for it, instead of growing the sender; the commit notices still reach it', async () => {
    const path = dbFile();
    const a = member(path);
    await allJoined(a.store);
    const stopped = spawnMember(path);
    await stopped.socket;
    await a.store.notices.caughtUp!();
    stopped.child.kill('SIGSTOP');
    await a.store.sessions.create({ id: 's', createdAt: T0 });
    // 4 MB of deltas at once: what the socket does not take waits in the sender, up to 1 MB.
    for (let i = 0; i < 4000; i++) a.store.notices.broadcast!('s', { kind: 'delta', i, text: 'x'.repeat(1000) });
    expect(a.store.droppedBroadcasts).toBeGreaterThan(1000);
    await a.store.events.append('s', [note(1)]);
    stopped.child.kill('SIGCONT');
    const heard = await heardBy(stopped.child);
    // The first deltas, in order, then none: the rest was dropped; the commit's notice came after them.
    expect(heard.messages.length).toBe(4000 - a.store.droppedBroadcasts);
    expect(heard.messages).toEqual(Array.from({ length: heard.messages.length }, (_, i) => i));
    expect(heard.notices).toEqual([{ sessionId: 's', lastSeq: 1 }]);
  });

  it('a member killed with SIGKILL leaves its socket: the members connected to it remove it and go on', async () => {
    const path = dbFile();
    const a = member(path);
    await allJoined(a.store);
    const killed = spawnMember(path);
    const socket = await killed.socket;
    expect(existsSync(socket)).toBe(true);
    // The killed member answered a barrier: a and it know each other.
    await a.store.notices.caughtUp!();
    killed.child.kill('SIGKILL');
    await killed.exited;
    // Nobody closed it: a finds its connection ended, tries again, and is refused.
    await until(() => !existsSync(socket));

    // a goes on: its broadcasts and commits, and a member joining later.
    const b = member(path);
    await allJoined(a.store, b.store);
    await a.store.sessions.create({ id: 's', createdAt: T0 });
    a.store.notices.broadcast!('s', { n: 1 });
    await a.store.events.append('s', [note(1)]);
    await b.store.notices.caughtUp!();
    expect(b.heard).toEqual([
      { sessionId: 's', message: { n: 1 } },
      { sessionId: 's', lastSeq: 1 },
    ]);
  });

  // /proc tells a process's state (Linux).
  it.skipIf(!existsSync('/proc/self/stat'))(
    'a member that dies while a connection to it waits to be accepted is found dead: the reset is tried again, and its socket removed',
    async () => {
      const path = dbFile();
      const killed = spawnMember(path);
      const socket = await killed.socket;
      const pid = killed.child.pid!;
      // Stopped, it accepts nothing: a connection to it waits in its socket's backlog.
      killed.child.kill('SIGSTOP');
      await until(() => processState(pid) === 'T');
      const bus = new LocalBus(LocalBus.directoriesFor(path), () => {});
      cleanups.push(() => bus.close());
      await bus.joined;
      // Joined, the bus has connected to it, and its event loop has not yet seen the connection
      // made: the member dies now, before it does (no I/O is polled until this block ends), so the
      // connection is reset instead of refused.
      killed.child.kill('SIGKILL');
      while (processState(pid) !== 'Z') {
        // Until the kernel has closed its sockets.
      }
      await killed.exited;
      await within(
        5_000,
        until(() => !existsSync(socket)),
        "the dead member's socket is still there",
      );
      expect(bus.peerCount).toBe(0);
    },
  );

  it('a socket left by a member killed before anyone else listened is removed by the next store that joins', async () => {
    const path = dbFile();
    const killed = spawnMember(path);
    const socket = await killed.socket;
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(existsSync(socket)).toBe(true);

    const a = member(path);
    // a's barrier waits for every member it found to answer or to be found dead.
    await a.store.notices.caughtUp!();
    expect(existsSync(socket)).toBe(false);
    expect(readdirSync(dirname(socket))).toEqual([a.store.liveSocket!.slice(dirname(socket).length + 1)]);
  });
});
