import { close, fdatasync, openSync } from 'node:fs';

/** Commits between two background syncs of the WAL: a tool step writes about 8 WAL frames, so about 250 frames (1 MB). */
const EVERY_COMMITS = 32;

/**
 * Syncs a database's WAL file to disk in the background (an `fdatasync` on libuv's thread pool)
 * every EVERY_COMMITS commits, one at a time. With synchronous=NORMAL a commit writes its frames
 * to the WAL without syncing it; SQLite syncs the WAL in the checkpoint, inside the commit that
 * crossed the checkpoint limit, which then waits for every frame written since the last one (about
 * 5 ms for 1,000 frames measured, most of a NORMAL commit's average cost). Synced here meanwhile,
 * the checkpoint finds little left to write (ADR-0020). It syncs what SQLite would sync later
 * anyway: durability only improves.
 */
export class WalFlusher {
  private readonly path: string;
  private fd: number | undefined;
  private commits = 0;
  private inFlight: Promise<void> | undefined;
  private closed = false;
  private started = 0;

  constructor(path: string) {
    this.path = path;
  }

  /** Syncs started so far. */
  get flushes(): number {
    return this.started;
  }

  /** The store committed; every EVERY_COMMITS commits, a sync starts unless one still runs. */
  committed(): void {
    if (++this.commits < EVERY_COMMITS || this.inFlight || this.closed) return;
    this.commits = 0;
    if (this.fd === undefined) {
      try {
        // The WAL exists once the first commit wrote it, and stays while the store's connection is
        // open. A descriptor of the WAL only: SQLite takes its POSIX locks on the database and -shm
        // files, which closing another descriptor of them would release, never on the WAL.
        this.fd = openSync(this.path, 'r');
      } catch {
        return;
      }
    }
    const fd = this.fd;
    this.started++;
    // A failed sync is left to SQLite's own, in the checkpoint: it reports what it cannot write.
    this.inFlight = new Promise<void>((resolve) => fdatasync(fd, () => resolve())).finally(
      () => (this.inFlight = undefined),
    );
  }

  /** Waits for a sync still running, then closes the file. */
  async close(): Promise<void> {
    this.closed = true;
    await this.inFlight;
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    await new Promise<void>((resolve) => close(fd, () => resolve()));
  }
}
