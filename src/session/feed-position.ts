/**
 * A position in a session's feed: durable event `seq`, and `n` deltas after it (n = 0 is the event
 * itself). Its text form is what an SSE id, a `Last-Event-ID`, an `?after=` cursor and a relayed
 * delta's id hold: `12` for an event, `12.3` for the third delta after it. This file is the only
 * place that text is made (`formatPosition`) or read (`parsePosition`).
 *
 * Order: `12` < `12.1` < `12.2` < `13`.
 */
export interface FeedPosition {
  readonly seq: number;
  readonly n: number;
}

/** Before everything: the start of the feed. */
export const FEED_START: FeedPosition = { seq: 0, n: 0 };

/** A durable event's position. */
export const eventPosition = (seq: number): FeedPosition => ({ seq, n: 0 });

/** `12` (an event) or `12.3` (a delta). */
export function formatPosition(p: FeedPosition): string {
  return p.n === 0 ? String(p.seq) : `${p.seq}.${p.n}`;
}

/** Reads `12` or `12.3` (surrounding blanks ignored); undefined for anything else, empty included. */
export function parsePosition(text: string | undefined | null): FeedPosition | undefined {
  if (text === undefined || text === null || text === '') return undefined;
  const m = /^(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!m) return undefined;
  return { seq: Number(m[1]), n: m[2] === undefined ? 0 : Number(m[2]) };
}

/** Negative when `a` comes before `b`, 0 when they are the same, positive after. */
export function comparePositions(a: FeedPosition, b: FeedPosition): number {
  return a.seq !== b.seq ? a.seq - b.seq : a.n - b.n;
}

/** Whether `a` comes after `b`. */
export const isAfter = (a: FeedPosition, b: FeedPosition): boolean => comparePositions(a, b) > 0;
