/**
 * Where a protocol's stream event stands in its run's output (ADR-0038): a number that only grows,
 * is the same whether the event was made live from deltas or rebuilt from the log, and lets a
 * resumed stream send exactly what a client lacks. Shared by the protocol encoders (Responses
 * `sequence_number`, AG-UI event ids):
 *
 *   position = i · 2^30 + chars · 2^4 + k
 *
 * `i` is an ordinal in the run's output (what it counts is the protocol's: Responses counts
 * assistant messages with text, AG-UI model calls), `chars` how much of that output's text the
 * client has after the event, and `k` the event's index among those at that point. Text resumes
 * by characters, never by delta count: deltas are ephemeral, and a client may reconnect after the
 * message became durable, when the server has only its whole text.
 */

/** One ordinal's range of positions. */
export const ORDINAL = 2 ** 30;
/** One character's range of positions (16 events at each point of a text). */
export const CHAR = 2 ** 4;
/** Characters an ordinal's text may have before its positions would run into the next ordinal's. */
export const MAX_CHARS = 2 ** 26 - 1;
/** Ordinals a run may have before its positions would pass 2^53. */
export const MAX_ORDINALS = 2 ** 23 - 1;

export const position = (i: number, chars: number, k: number): number => i * ORDINAL + chars * CHAR + k;

/** The ordinal a position is in (-1 for "before everything", the position -1). */
export const ordinalOf = (p: number): number => Math.floor(p / ORDINAL);

/**
 * How many characters of ordinal `i`'s text a client whose last position is `after` has: those up
 * to its position when that is within `i`, none when it is before `i`.
 */
export const charsHad = (after: number, i: number): number =>
  ordinalOf(after) === i ? Math.floor((after % ORDINAL) / CHAR) : 0;

/**
 * The part of a text delta a client lacks: the delta starts at character `from` of ordinal `i`'s
 * text; the client, at `after`, may have had some of it.
 */
export function unsentText(after: number, i: number, from: number, delta: string): string {
  const had = charsHad(after, i);
  return had > from ? delta.slice(had - from) : delta;
}
