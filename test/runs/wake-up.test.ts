import { describe, expect, it } from 'vitest';
import { WakeUp } from '../../src/runs/wake-up.ts';

const elapsed = async (p: Promise<void>): Promise<number> => {
  const t0 = performance.now();
  await p;
  return performance.now() - t0;
};

describe('WakeUp: the wake-up of the polling loops (worker, scheduler, webhook dispatcher)', () => {
  it('a nap without a wake-up lasts its time', async () => {
    expect(await elapsed(new WakeUp().nap(60))).toBeGreaterThanOrEqual(55);
  });

  it('a wake-up ends every nap in progress at once', async () => {
    const w = new WakeUp();
    const naps = [w.nap(10_000), w.nap(10_000, { unref: true })];
    setTimeout(() => w.wake(), 20);
    const t0 = performance.now();
    await Promise.all(naps);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  it('a wake-up while nobody naps is not lost: the next nap returns at once, and only that one', async () => {
    const w = new WakeUp();
    w.wake();
    expect(await elapsed(w.nap(10_000))).toBeLessThan(50);
    expect(await elapsed(w.nap(60))).toBeGreaterThanOrEqual(55);
  });

  it('reset forgets a wake-up nobody took', async () => {
    const w = new WakeUp();
    w.wake();
    w.reset();
    expect(await elapsed(w.nap(60))).toBeGreaterThanOrEqual(55);
  });
});
