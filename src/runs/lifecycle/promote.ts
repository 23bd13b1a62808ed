/**
 * The session's next run comes up, in the transaction that ended its active run: the oldest run
 * queued behind it (its message enters the log), or one made of a message a Keel before queued runs enqueued.
 */
import { newId, type AgentDefinition } from '../../core/index.ts';
import type { UserMessage } from '../../model/index.ts';
import type { SessionEvent } from '../../session/index.ts';
import type { RunInput, RunRecord, StoreOps } from '../../store/index.ts';
import { createRun } from './accept.ts';
import { appendIn, type LifecycleContext } from './context.ts';
import { queuedStatus } from './run-spec.ts';
import { transition } from './transition.ts';
import type { RunOptions } from './types.ts';

/**
 * The session's oldest run queued behind comes up (in the transaction that ended the active
 * run): its message enters the log as its turn's first event, and it becomes claimable. A run
 * whose agent is no longer registered ends `failed`, saying so, and the next one comes up.
 * Messages enqueued by a Keel before queued runs (inputs without a run) become runs here.
 */
export async function promote(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  resolveAgent: (name: string, version?: string) => AgentDefinition | undefined,
  /** What `readInLine` read already, in this transaction. */
  read?: Promise<InLine>,
): Promise<{ run?: RunRecord; events: SessionEvent[] }> {
  const events: SessionEvent[] = [];
  for (let inLine = read; ; inLine = undefined) {
    const { queued, legacies } = await (inLine ?? readInLine(tx, sessionId));
    const [behind] = queued
      .filter((r) => r.queuedBehind)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
    const [legacy] = behind ? [] : legacies;
    if (!behind && !legacy) return { events };
    if (legacy) {
      await tx.inputs.remove(legacy.id);
      const p = legacy.payload as {
        message: UserMessage;
        agent: string;
        agentVersion?: string;
        options?: RunOptions;
      };
      const agent = resolveAgent(p.agent, p.agentVersion) ?? resolveAgent(p.agent);
      if (agent) {
        const session = (await tx.sessions.get(sessionId))!;
        const created = await createRun(tx, c, session, p.message, agent, p.options ?? {});
        return { run: created.run, events: [...events, ...created.events] };
      }
      // Recorded as a run that failed, so that the message is not dropped without a trace.
      const run = await tx.runs.create({
        id: newId(),
        sessionId,
        agent: { name: p.agent, version: p.agentVersion ?? 'unknown' },
        agentSpec: { name: p.agent },
        triggerMessageId: p.message.id,
        queuedBehind: true,
        createdAt: Date.now(),
      });
      events.push(
        ...(await appendIn(tx, c, sessionId, [{ type: 'run/status', runId: run.id, data: queuedStatus(run.agent) }])),
      );
      events.push(...(await agentGone(tx, c, run)));
      continue;
    }
    const [input] = await tx.inputs.take(sessionId, 'message', behind!.id, 1);
    const agent = resolveAgent(behind!.agent.name, behind!.agent.version);
    if (!agent || !input) {
      events.push(...(await agentGone(tx, c, behind!, input ? undefined : 'its message is missing from the inbox')));
      continue;
    }
    const message = (input.payload as { message: UserMessage }).message;
    const session = (await tx.sessions.get(sessionId))!;
    const turn = session.lastTurn + 1;
    events.push(
      ...(await appendIn(tx, c, sessionId, [
        { type: 'user/message', runId: behind!.id, turn, data: { message, via: 'input' } },
      ])),
    );
    const run = await tx.runs.update(behind!.id, { queuedBehind: false, turn }, { statuses: ['queued'] });
    return { run, events };
  }
}

/** The runs queued in a session, and the oldest message a Keel before queued runs enqueued in it. */
export interface InLine {
  queued: RunRecord[];
  legacies: RunInput[];
}

/**
 * What comes up next in the session, read at once (one round trip where the store pipelines; the
 * second read matters without the first). A finish starts it early, beside its other reads: its
 * own run's end changes neither.
 */
export function readInLine(tx: StoreOps, sessionId: string): Promise<InLine> {
  const read = Promise.all([
    tx.runs.list({ sessionId, statuses: ['queued'], limit: 10_000 }),
    tx.inputs.list(sessionId, 'message', null, 1),
  ]).then(([queued, legacies]) => ({ queued, legacies }));
  read.catch(() => {});
  return read;
}

/** A run queued behind whose agent is gone (or whose message is): it ends failed, with the reason. */
async function agentGone(tx: StoreOps, c: LifecycleContext, run: RunRecord, why?: string): Promise<SessionEvent[]> {
  const message = why ?? `agent ${run.agent.name}@${run.agent.version} is not registered any more`;
  const t = await transition(tx, c, run, 'failed', {
    reason: `the run cannot start: ${message}`,
    error: { code: why ? 'message_missing' : 'agent_not_found', message },
  });
  return t.events;
}
