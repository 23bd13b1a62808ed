/**
 * The built-in control tools that make a run wait (ADR-0015): `ask_user` (a person answers) and
 * `sleep` (the run sleeps until a time). The waiting model itself is in wait-spec.ts.
 */
import { z } from 'zod';
import { tool, type Tool, type ToolContext } from './tools.ts';
import { sleepUntil } from './wait-spec.ts';

export const askUserInput = z.object({
  questions: z
    .array(
      z.object({
        id: z.string().min(1).describe('A short stable key for the answer'),
        question: z.string().min(1),
        choices: z.array(z.string()).optional().describe('When the answer must be one of these'),
      }),
    )
    .min(1),
});

/**
 * The built-in `ask_user` control tool: the model asks the user structured questions; the turn
 * (and its run) waits for the answer, which comes back as the call's result. A deterministic
 * tool call, never inferred from the model's prose.
 */
export function askUser(): Tool {
  return tool({
    name: 'ask_user',
    description:
      'Ask the user one or more questions and wait for the answers. Use it when you need information or a decision only the user can give. Offer choices when the answer must be one of a few options.',
    input: askUserInput,
    interactive: true,
    execute: () => {
      throw new Error('ask_user is answered by the user, never executed');
    },
  });
}

/** The longest sleep the built-in `sleep` tool takes by default: 30 days. */
export const MAX_SLEEP_SECONDS = 30 * 24 * 3600;

export const sleepInput = (maxSeconds: number) =>
  z
    .strictObject({
      until: z.iso
        .datetime({ offset: true })
        .optional()
        .describe('Wake at this time (ISO 8601, with a time zone offset or Z)'),
      seconds: z
        .number()
        .positive()
        .max(maxSeconds)
        .optional()
        .describe(`Sleep this many seconds (at most ${maxSeconds})`),
      reason: z.string().max(500).optional().describe('Why: shown to whoever looks at the waiting run'),
    })
    .refine((i) => (i.until === undefined) !== (i.seconds === undefined), {
      message: 'give exactly one of until and seconds',
    });

/**
 * The built-in `sleep` control tool: the run sleeps, durably and without a worker, until a time
 * or for a while, then goes on in the same run; the model sees "slept until …". `wakeOnSteer`:
 * a message steered into the run wakes it early.
 */
export function sleepTool(o: { maxSeconds?: number; wakeOnSteer?: boolean } = {}): Tool {
  const maxSeconds = o.maxSeconds ?? MAX_SLEEP_SECONDS;
  return tool({
    name: 'sleep',
    description:
      'Pause this task until a time (until, ISO 8601) or for a number of seconds, then continue. Nothing runs meanwhile. Use it to wait for something that takes time (a deployment, a report due later).',
    input: sleepInput(maxSeconds),
    // Computing the wake time again after a crash is harmless.
    idempotent: true,
    execute: (input, ctx: ToolContext) => {
      const now = ctx.now?.() ?? Date.now();
      const until = input.until !== undefined ? Date.parse(input.until) : now + input.seconds! * 1000;
      if (until - now > maxSeconds * 1000)
        throw new Error(
          `cannot sleep past ${new Date(now + maxSeconds * 1000).toISOString()} (at most ${maxSeconds} seconds)`,
        );
      if (until <= now) return `no need to sleep: ${new Date(until).toISOString()} has passed`;
      return sleepUntil(until, {
        ...(o.wakeOnSteer ? { wakeOnSteer: true } : {}),
        ...(input.reason ? { reason: input.reason } : {}),
      });
    },
  });
}
