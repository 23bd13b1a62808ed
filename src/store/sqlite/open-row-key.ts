/**
 * An open row's key (ADR-0028): its session's log number in the high bits, its first seq in the
 * low 32. The open rows of a session are one range of keys, in seq order, in a table keyed by its
 * rowid: an append writes one B-tree, and no index beside it. The key is made and taken apart in
 * SQL only (log numbers past 2^21 make keys past JavaScript's exact integers).
 */

/** The largest log number of a session: the key has 31 bits for it (the 64th is the sign). */
export const MAX_LOG_NO = 2 ** 31 - 1;

/** The largest seq an open row can start at (the key's low 32 bits). */
export const MAX_OPEN_SEQ = 2 ** 32 - 1;

/** The key, in SQL, of the open row of log number `logNo` starting at `seq` (SQL expressions). */
export const openRowKey = (logNo: string, seq: string): string => `((${logNo} << 32) | ${seq})`;

/** An open row's first seq, in SQL, from its key `pos`. */
export const openRowFirstSeq = (pos: string): string => `(${pos} & ${MAX_OPEN_SEQ})`;

/** In SQL, whether the key `pos` is one of log number `logNo`'s open rows starting after seq `afterSeq`. */
export const openRowsAfter = (pos: string, logNo: string, afterSeq: string): string =>
  `${pos} > ${openRowKey(logNo, afterSeq)} AND ${pos} <= ${openRowKey(logNo, String(MAX_OPEN_SEQ))}`;
