import { describe, expect, it } from 'vitest';
import { WakeUp } from '../../src/runs/wake-up.ts';

const elapsed = async (p: Promise<unknown>): Promise<number> => {
  const t0 = performance.now();
  await p;
  return performance.now() - t0;
};

describe('WakeUp: the wake-up of the polling loops (worker, scheduler, webhook dispatcher)', () => {
  it('a nap without a wake-up lasts its time, and says it was not woken', async () => {
    expect(await elapsed(new WakeUp().nap(60))).toBeGreaterThanOrEqual(55);
    expect(await new WakeUp().nap(5)).toBe(false);
  });

  it('a wake-up ends every nap in progress at once', async () => {
    const w = new WakeUp();
    const naps = [w.nap(10_000), w.nap(10_000, { unref: true })];
    setTimeout(() => w.wake(), 20);
    const t0 = performance.now();
    expect(await Promise.all(naps)).toEqual([true, true]);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  it('a wake-up while nobody naps is not lost: the next nap returns at once, and only that one', async () => {
    const w = new WakeUp();
    w.wake();
    expect(await elapsed(w.nap(10_000))).toBeLessThan(50);
    expect(await elapsed(w.nap(60))).toBeGreaterThanOrEqual(55);
    w.wake();
    expect(await w.nap(10_000)).toBe(true);
  });

  it('reset forgets a wake-up nobody took', async () => {
    const w = new WakeUp();
    w.wake();
    w.reset();
    expect(await elapsed(w.nap(60))).toBeGreaterThanOrEqual(55);
  });
});
