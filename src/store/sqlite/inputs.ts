/** SQLite: the inputs operations of the port (`store.inputs`), synchronous, on the connection's shared state. */
import { toInput } from '../rows.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function inputOps(c: Shared): SyncOpsOf<'inputs'> {
  const { st, limited } = c;
  return {
    addInput: (i) => {
      st.addInput.run(i.id, i.sessionId, i.kind, i.runId, JSON.stringify(i.payload), i.createdAt);
    },
    takeInputs: (sessionId, kind, runId, limit = 1000, options) => {
      if (options?.unlessEnded && typeof runId === 'string' && st.runEnded.get(runId)) return [];
      const inputs = c.self.listInputs(sessionId, kind, runId, limit);
      for (const i of inputs) st.deleteInput.run(i.id);
      return inputs;
    },
    listInputs: (sessionId, kind, runId, limit = 1000) => {
      const filter = runId === undefined ? 0 : 1;
      return limited(st.takeInputs, limit)
        .all(sessionId, kind, filter, runId ?? null, runId ?? null)
        .map(toInput);
    },
    removeInput: (id) => st.deleteInput.run(id).changes === 1,
    countInputs: (sessionId, kind) => st.countInputs.get(sessionId, kind)!.n,
  };
}
