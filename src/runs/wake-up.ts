/**
 * A wake-up that is never lost, for the loops that poll for work (the worker, the scheduler, the
 * webhook dispatcher): `wake()` ends the naps in progress, and when nobody naps right now (the
 * loop is busy claiming, checking or delivering) the next nap returns at once, so work announced
 * meanwhile is not left for the next poll.
 */
export class WakeUp {
  private woken = false;
  private readonly napping = new Set<() => void>();

  /** Ends every nap in progress; or the next one at once, when none is. */
  wake(): void {
    this.woken = true;
    for (const end of [...this.napping]) end();
  }

  /**
   * Waits for a wake-up (true) or `ms` (false). `unref`: the wait keeps no process alive (a loop
   * that is not the reason the process runs).
   */
  nap(ms: number, o: { unref?: boolean } = {}): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const end = (woken: boolean) => {
        clearTimeout(timer);
        this.napping.delete(wake);
        this.woken = false;
        resolve(woken);
      };
      const wake = () => end(true);
      const timer = setTimeout(() => end(false), ms);
      if (o.unref) timer.unref?.();
      this.napping.add(wake);
    });
  }

  /** Forgets a wake-up nobody took (a loop that stops and may start again). */
  reset(): void {
    this.woken = false;
  }
}
