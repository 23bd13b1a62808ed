/**
 * Fair dispatch through the runtime (ADR-0042): a tenant's run sent behind another tenant's backlog
 * is started at the next claim but one, and weights share a worker's claims, on SQLite and
 * PostgreSQL. One worker slot: claims happen one at a time, in the order the runs start.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  ScriptedModel,
  type Runtime,
  type ScriptedResponse,
  type Store,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';

describe.each(['sqlite', 'postgres'] as const)('fair dispatch through the runtime (%s)', (backend) => {
  let rt: Runtime;
  let store: Store;
  let close: () => Promise<void>;
  /** The tenants of the runs in the order their model calls ran: with one slot, the claims' order. */
  let order: string[];

  afterEach(async () => {
    await rt.close();
    await close();
  });

  async function open(): Promise<void> {
    ({ store, close } = await openBackendStore(backend));
    order = [];
    // Each run's message is its tenant's name.
    const model = new ScriptedModel(
      [
        (call): ScriptedResponse => {
          const user = call.prompt.filter((m) => m.role === 'user').at(-1)!;
          const parts = user.content as Array<{ type: string; text?: string }>;
          order.push(parts.map((p) => p.text ?? '').join(''));
          return { text: 'done' };
        },
      ],
      { loop: true },
    );
    const agent = defineAgent({ name: 'a', model });
    rt = createRuntime({ store, agents: [agent] });
  }

  /** Sends one run of `tenant` (with no worker running: it stays queued). */
  const send = async (tenant: string) => {
    const s = await rt.sessions.create({ tenant });
    return (await rt.sessions.send(s.id, tenant)).run.id;
  };

  /** Starts a one-slot worker and waits for `runs` to end: `order` is then the claims' order. */
  async function runAll(runs: string[]): Promise<void> {
    const worker = rt.startWorker({ concurrency: 1 });
    const ended = await Promise.all(runs.map((id) => rt.runs.wait(id, { until: 'terminal', timeoutMs: 30_000 })));
    await worker.stop();
    expect(ended.every((r) => r.status === 'completed')).toBe(true);
    expect(order).toHaveLength(runs.length);
  }

  it("a tenant's run sent behind another's backlog starts at the next claim but one", async () => {
    await open();
    const runs: string[] = [];
    for (let i = 0; i < 12; i++) runs.push(await send('busy'));
    runs.push(await send('small'));
    await runAll(runs);
    // busy's oldest first (both equal, its run is older), then small's.
    expect(order.slice(0, 3)).toEqual(['busy', 'small', 'busy']);
  });

  it('weights share the claims while tenants compete', async () => {
    await open();
    await rt.tenants.put({ id: 'heavy', weight: 3 });
    const runs: string[] = [];
    for (let i = 0; i < 9; i++) runs.push(await send('heavy'));
    for (let i = 0; i < 9; i++) runs.push(await send('light'));
    await runAll(runs);
    // The first 8 claims: 6 of heavy's, 2 of light's (3 to 1), never light's alone.
    const first = order.slice(0, 8);
    expect(first.filter((t) => t === 'heavy')).toHaveLength(6);
    expect(first.filter((t) => t === 'light')).toHaveLength(2);
  });
});
