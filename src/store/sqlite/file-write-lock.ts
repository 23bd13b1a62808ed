import { resolve } from 'node:path';
import { StoreError } from '../port/index.ts';

/**
 * The turns to write one database file, among the stores of this process that opened it.
 *
 * SQLite's own lock waits by sleeping the thread (`busy_timeout`). Two connections of one process
 * on one file would wait on each other in the one thread that could end either transaction: a
 * store's transaction that awaits (a unit of work, `transaction`) is suspended while the other
 * store's `BEGIN IMMEDIATE` sleeps, and the sleeper gives up with SQLITE_BUSY after the timeout.
 * So stores of one process on one file take turns here, without blocking the thread. Other
 * processes still wait on SQLite's lock, in their own threads.
 *
 * Uncontended, a turn is taken at once (no wait, no extra turn of the event loop).
 */
export class FileWriteLock {
  private static readonly byFile = new Map<string, FileWriteLock>();

  /** The lock of `path`'s file, shared by every store of this process that opened it; `release` when closed. */
  static open(path: string): FileWriteLock {
    const file = resolve(path);
    let lock = FileWriteLock.byFile.get(file);
    if (!lock) FileWriteLock.byFile.set(file, (lock = new FileWriteLock(file)));
    lock.users++;
    return lock;
  }

  private readonly file: string;
  private users = 0;
  private held = false;
  private readonly waiting: Array<() => void> = [];

  private constructor(file: string) {
    this.file = file;
  }

  /** A store closed: the last one forgets the file. */
  release(): void {
    if (--this.users === 0 && FileWriteLock.byFile.get(this.file) === this) FileWriteLock.byFile.delete(this.file);
  }

  /**
   * Runs `fn` (a write transaction, from its BEGIN to its COMMIT or ROLLBACK) in its turn. A turn
   * that does not come within `timeoutMs` (the store's busy timeout, as SQLite's own wait) fails
   * with a `busy` StoreError: a transaction that waits for another store's write would otherwise
   * wait forever.
   */
  run<T>(fn: () => T | Promise<T>, timeoutMs: number): T | Promise<T> {
    if (!this.held) {
      this.held = true;
      return this.holding(fn);
    }
    return new Promise<void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(turn);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(
          new StoreError(
            'busy',
            `another store of this process held the write lock of ${this.file} for more than ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      this.waiting.push(turn);
    }).then(() => this.holding(fn));
  }

  private holding<T>(fn: () => T | Promise<T>): T | Promise<T> {
    let value: T | Promise<T>;
    try {
      value = fn();
    } catch (e) {
      this.next();
      throw e;
    }
    if (value instanceof Promise) return value.finally(() => this.next());
    this.next();
    return value;
  }

  /** Hands the turn to the next waiting write, or frees it. */
  private next(): void {
    const wake = this.waiting.shift();
    if (wake) wake();
    else this.held = false;
  }
}
