import { z } from 'zod';
import { tool, type Tool } from '../core/index.ts';
import { runScope } from './execution.ts';

/**
 * A tool that hands a task to another agent as a child run (in a child session linked to the
 * parent's run and call). The parent's step waits for the child durably, without holding a worker
 * slot: after a crash of either side the same child is found again (never started twice) and
 * waited for. Cancelling the parent
 * cancels the child; the child's usage and cost roll up into the parent run.
 */
export function subagent(options: { name: string; description: string; agent: string }): Tool {
  return tool({
    name: options.name,
    description: options.description,
    input: z.object({
      task: z.string().min(1).describe('What the subagent should do, with everything it needs to know'),
    }),
    // Re-running after a crash finds the same child run instead of starting another.
    idempotent: true,
    // ...which needs the call on record before the child starts: a step redone after a crash
    // would otherwise ask the model again and start a second child under another call id.
    recordCallFirst: true,
    execute: async ({ task }, ctx) => {
      const scope = runScope.getStore();
      if (!scope) throw new Error(`${options.name} starts a subagent run, which needs a Keel runtime worker`);
      if (scope.depth + 1 > scope.host.maxDepth)
        throw new Error(`subagents may nest at most ${scope.host.maxDepth} deep`);
      const child = await scope.host.childRun(scope.runId, ctx.toolCallId, options.agent, task, ctx.step);
      // Only a parent that is ended ends its child: one that is handed back to another worker finds
      // the same child again (by this call's id) and goes on waiting for it.
      const onAbort = () => {
        if (scope.ending()) void scope.host.runs.cancel(child.id, { reason: 'parent run cancelled' }).catch(() => {});
      };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        // Waiting for the child holds no worker slot: the child (or another run) may take it.
        const done = await scope.waitOutside(scope.host.runs.wait(child.id, { until: 'terminal', signal: ctx.signal }));
        const items = await scope.host.sessions.transcript(done.sessionId);
        const answer = items.findLast((i) => i.kind === 'assistant')?.text ?? '';
        if (done.status !== 'completed') {
          const why = (done.error as { message?: string } | null)?.message;
          throw new Error(`subagent ${options.agent} ended ${done.status}${why ? `: ${why}` : ''}`);
        }
        return { answer, runId: done.id, sessionId: done.sessionId };
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
      }
    },
  });
}
