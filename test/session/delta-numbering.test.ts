import { afterEach, describe, expect, it } from 'vitest';
import { defineAgent, ScriptedModel, Sessions, SqliteStore } from '../../src/index.ts';

/**
 * Delta ids (`seq.n`) count from the latest event the session log published before them, where
 * the model call runs. A step's events are published when it commits, after its deltas
 * (ADR-0008), so a turn's first deltas count from the previous turn's last event, and ids only
 * grow. The recent deltas a feed replays are gone once their message is durable.
 */
describe('delta numbering in the session log', () => {
  let store: SqliteStore;
  afterEach(async () => store.close());

  it('numbers each turn’s deltas after the latest published event, so ids only grow across turns', async () => {
    store = new SqliteStore({ path: ':memory:' });
    const sessions = new Sessions({ store });
    const release = sessions.log.keepRecentDeltas();
    const s = await sessions.create();
    const ids: string[] = [];
    const off = sessions.log.subscribeAll((sessionId, item) => {
      if (sessionId === s.id && item.kind === 'delta') ids.push(item.id);
    });
    const agent = defineAgent({
      name: 'a',
      model: new ScriptedModel([{ chunks: ['one ', 'two'] }, { chunks: ['three ', 'four'] }]),
    });
    await (
      await sessions.startTurn(s.id, agent, { input: 'first' })
    ).result;
    const afterFirst = (await sessions.get(s.id)).lastSeq;
    await (
      await sessions.startTurn(s.id, agent, { input: 'second' })
    ).result;
    off();
    expect(ids.slice(2)).toEqual([`${afterFirst}.1`, `${afterFirst}.2`]);
    const key = (id: string) => id.split('.').map(Number) as [number, number];
    for (let i = 1; i < ids.length; i++) {
      const [a, b] = [key(ids[i - 1]!), key(ids[i]!)];
      expect(b[0] > a[0] || (b[0] === a[0] && b[1] > a[1])).toBe(true);
    }
    // Nothing streams once the turn has ended.
    expect(sessions.log.recentDeltas(s.id)).toEqual([]);
    release();
  });
});
