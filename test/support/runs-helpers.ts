import { z } from 'zod';
import { tool } from '../../src/index.ts';
import { aborted, deferred } from './deferred.ts';

/**
 * A tool that reports its start (with its call's abort signal) and then waits until the test
 * opens `gate`, or until its call is aborted (it then returns 'aborted').
 */
export function gated(name = 'work') {
  const started = deferred<AbortSignal>();
  const gate = deferred<string>();
  let executions = 0;
  const t = tool({
    name,
    description: 'Does slow work',
    input: z.object({}),
    execute: async (_input, ctx) => {
      executions++;
      started.resolve(ctx.signal);
      return Promise.race([gate.promise, aborted(ctx.signal).then(() => 'aborted')]);
    },
  });
  return { tool: t, started, gate, executions: () => executions };
}
