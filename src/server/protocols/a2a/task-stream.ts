/**
 * A task's event stream (issue 41, ADR-0038): the run's feed (`follow`) through the task encoder
 * (task-encoder.ts), from the run's start. Two ways to begin:
 *
 * - `events`: every event from the task's creation (the first stream of a new task).
 * - `snapshot`: what the feed replays (everything up to now) is folded into one `task` event, sent
 *   when the replay is over; then the events that follow. A resubscription, and the stream of a
 *   message that answers a task, begin so: nothing the task had is sent twice, nothing after is lost.
 *
 * Either ends when the task reaches a terminal or an interrupted (input-required) state after it
 * began, or when the client goes (the run goes on).
 */
import type { StreamResponse } from '@a2a-js/sdk';
import { eventPosition, follow, type SessionEvent } from '../../../session/index.ts';
import { isTerminal, WAITING_FOR_PEOPLE } from '../../../runs/lifecycle/run-status.ts';
import type { Runtime } from '../../../runs/index.ts';
import type { RunRecord, RunStatus } from '../../../store/index.ts';
import { TaskEncoder } from './task-encoder.ts';

/** A stream ends at these statuses: the run ended, or waits for the client. */
const ends = (s: RunStatus): boolean => isTerminal(s) || WAITING_FOR_PEOPLE.includes(s);

/**
 * A bounded hand-over between the feed's pump and the stream's reader: the pump waits while the
 * reader is `highWater` events behind (the feed's own queue limit then drops a client that does
 * not read). Closed by the reader when it stops: the pump's pushes then return at once.
 */
class Channel<T> {
  private readonly items: T[] = [];
  private ended = false;
  private closed = false;
  private error: unknown;
  private wake: (() => void) | undefined;
  private drained: (() => void) | undefined;
  private readonly highWater: number;

  constructor(highWater: number) {
    this.highWater = highWater;
  }

  async push(x: T): Promise<void> {
    if (this.closed) return;
    this.items.push(x);
    this.wake?.();
    if (this.items.length >= this.highWater) await new Promise<void>((r) => (this.drained = r));
  }

  end(error?: unknown): void {
    this.ended = true;
    this.error = error;
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.drained?.();
  }

  async *read(): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const x = this.items.shift();
      if (x !== undefined) {
        if (this.items.length < this.highWater) {
          this.drained?.();
          this.drained = undefined;
        }
        yield x;
        continue;
      }
      if (this.ended) {
        if (this.error !== undefined) throw this.error;
        return;
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

export interface TaskStreamOptions {
  mode: 'events' | 'snapshot';
  /** The client went: the stream stops (the run goes on). */
  signal: AbortSignal;
  /** Feed items a slow client may leave unread before it is dropped. */
  queueLimit: number;
}

export async function* taskStream(
  rt: Runtime,
  run: RunRecord,
  o: TaskStreamOptions,
): AsyncGenerator<StreamResponse, void, undefined> {
  const log = rt.sessions.log;
  const channel = new Channel<StreamResponse>(Math.max(16, o.queueLimit));
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  o.signal.addEventListener('abort', onAbort, { once: true });
  const pump = async () => {
    const encoder = new TaskEncoder(run);
    let live = o.mode === 'events';
    const send = async (events: StreamResponse[]) => {
      for (const e of events) await channel.push(e);
    };
    const first = (await log.read(run.sessionId, { runId: run.id, limit: 1 }))[0];
    const feed = follow(log, run.sessionId, {
      runId: run.id,
      ...(first ? { after: eventPosition(first.seq - 1) } : {}),
      endAt: (e: SessionEvent) => e.type === 'run/status' && e.runId === run.id && ends(e.data.to),
      isDone: async () => ends((await rt.runs.get(run.id)).status),
      queueLimit: o.queueLimit,
      onOverflow: () => stop.abort(),
      signal: stop.signal,
      onReplayed: async () => {
        if (live) return;
        live = true;
        await send([encoder.snapshotEvent()]);
      },
    });
    try {
      for await (const item of feed) {
        if (stop.signal.aborted) return;
        const events = encoder.item(item);
        if (live) await send(events);
      }
    } catch (e) {
      // The client went, or fell too far behind (it resubscribes): the stream just ends.
      if (stop.signal.aborted) return;
      throw e;
    }
    if (stop.signal.aborted) return;
    // The feed ended with its replay (the task was at an end already): all of it in one.
    if (!live) await send([encoder.snapshotEvent()]);
    // The run's state as its record has it, if the feed's last status was not it.
    await send(encoder.settle(await rt.runs.get(run.id)));
  };
  const pumped = pump().then(
    () => channel.end(),
    (e: unknown) => channel.end(e),
  );
  try {
    yield* channel.read();
  } finally {
    stop.abort();
    channel.close();
    o.signal.removeEventListener('abort', onAbort);
    await pumped;
  }
}
