/**
 * The clock: where the runs layer (and flow control) reads the time for what waits on it: wait
 * deadlines, durable sleeps, schedules, webhook retries, limit windows. In core, the innermost layer
 * that needs it, so that no layer imports upward for it. The system clock by default; tests pass one
 * they move by hand (`manualClock`), so that a wait of hours takes no time.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told (tests). */
export function manualClock(start = Date.now()): Clock & { advance(ms: number): number; set(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => (t += ms),
    set: (ms) => {
      t = ms;
    },
  };
}
