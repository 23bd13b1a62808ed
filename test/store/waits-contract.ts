/**
 * The waiting model's part of the storage contract (src/store/port/waits.ts, ADR-0015): the new run
 * statuses are stored and counted; a signal is delivered once per run and name (also when two
 * nodes deliver it at once), kept until its wait takes it, and taken once; callback tokens are
 * found by their hash only. Every backend passes it.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, type Store } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;

export function waitsContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`waits store contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const run = async () => {
      const s = await store.sessions.create({ id: randomUUID(), createdAt: T0 });
      return store.runs.create({
        id: randomUUID(),
        sessionId: s.id,
        agent: { name: 'a', version: '1' },
        agentSpec: {},
        createdAt: T0,
      });
    };

    it('stores and counts runs that sleep or wait for a signal', async () => {
      const before = await store.runs.countByStatus();
      expect(before).toMatchObject({ sleeping: expect.any(Number), waiting_for_signal: expect.any(Number) });
      const a = await run();
      const b = await run();
      await store.runs.update(a.id, { status: 'running' });
      await store.runs.update(a.id, {
        status: 'sleeping',
        waiting: { kind: 'sleep', calls: [], decisions: {}, expiresAt: T0 },
      });
      await store.runs.update(b.id, { status: 'waiting_for_signal' });
      expect((await store.runs.get(a.id))!.status).toBe('sleeping');
      expect(
        (await store.runs.list({ statuses: ['sleeping', 'waiting_for_signal'], limit: 10 })).map((r) => r.id).sort(),
      ).toEqual([a.id, b.id].sort());
      const after = await store.runs.countByStatus();
      expect(after.sleeping - before.sleeping).toBe(1);
      expect(after.waiting_for_signal - before.waiting_for_signal).toBe(1);
      // A sleeping run is the session's active run: another cannot start beside it.
      await store.runs.update(a.id, { status: 'queued' }, { statuses: ['sleeping'] });
      expect((await store.runs.get(a.id))!.status).toBe('queued');
    });

    it('delivers a signal once per run and name, keeps it until it is taken, and takes it once', async () => {
      const r = await run();
      const signal = {
        runId: r.id,
        name: 'ci',
        payload: { ok: true, n: [1, 2] },
        source: 'api' as const,
        receivedAt: T0,
        consumedAt: null,
      };
      expect(await store.waits.putSignal(signal)).toBe(true);
      expect(await store.waits.putSignal({ ...signal, payload: { ok: false } })).toBe(false);
      expect(await store.waits.getSignal(r.id, 'ci')).toEqual(signal);
      // Another name, another run: other signals.
      expect(await store.waits.putSignal({ ...signal, name: 'deploy', payload: null })).toBe(true);
      expect((await store.waits.getSignal(r.id, 'deploy'))!.payload).toBeNull();
      expect(await store.waits.getSignal(r.id, 'nothing')).toBeUndefined();
      expect(await store.waits.consumeSignal(r.id, 'ci', T0 + 5)).toBe(true);
      expect(await store.waits.consumeSignal(r.id, 'ci', T0 + 6)).toBe(false);
      expect(await store.waits.consumeSignal(r.id, 'nothing', T0 + 6)).toBe(false);
      expect((await store.waits.getSignal(r.id, 'ci'))!.consumedAt).toBe(T0 + 5);
    });

    it('a signal written in a transaction that rolls back is not delivered', async () => {
      const r = await run();
      await expect(
        store.transaction(async (tx) => {
          expect(
            await tx.waits.putSignal({
              runId: r.id,
              name: 'ci',
              payload: 1,
              source: 'api',
              receivedAt: T0,
              consumedAt: null,
            }),
          ).toBe(true);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.waits.getSignal(r.id, 'ci')).toBeUndefined();
      expect(
        await store.waits.putSignal({
          runId: r.id,
          name: 'ci',
          payload: 2,
          source: 'api',
          receivedAt: T0,
          consumedAt: null,
        }),
      ).toBe(true);
    });

    it('two nodes delivering the same signal at once: one delivery', async () => {
      const r = await run();
      const other = opened.another ? await opened.another() : store;
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          (i % 2 ? other : store).waits.putSignal({
            runId: r.id,
            name: 'ci',
            payload: { i },
            source: 'callback',
            receivedAt: T0 + i,
            consumedAt: null,
          }),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const taken = await Promise.all([
        store.waits.consumeSignal(r.id, 'ci', T0),
        other.waits.consumeSignal(r.id, 'ci', T0),
      ]);
      expect(taken.filter(Boolean)).toHaveLength(1);
    });

    it('finds a callback token by its hash; a hash is stored once', async () => {
      const r = await run();
      const cb = { tokenHash: 'a'.repeat(64), runId: r.id, name: 'ci', createdAt: T0 };
      await store.waits.putCallback(cb);
      expect(await store.waits.findCallback(cb.tokenHash)).toEqual(cb);
      expect(await store.waits.findCallback('b'.repeat(64))).toBeUndefined();
      const err = await store.waits.putCallback({ ...cb, name: 'other' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe('conflict');
    });
  });
}
