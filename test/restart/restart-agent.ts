/**
 * The agent of the database-restart test (database-restart.test.ts), executed by its worker
 * processes (restart-worker.ts). Its model is a function of the conversation, so a worker that
 * recovers a run asks it the same thing:
 *
 * - a user message `task <name> steps=<n> [slow]` starts a task: n steps, each calling
 *   `send_once` (effectful: not safe to repeat) after streaming a few words; with `slow`, step 1
 *   also calls `slow` (effectful too), which lasts until the test says the outage is over (it
 *   creates the file `<ledger>.restarted`): its execution spans the whole outage;
 * - then it answers `done <name>`.
 *
 * Every execution of a tool appends a line to a ledger file (one write(2), then fsync, O_APPEND):
 * the outside world's record of what ran. Each tool's `check` reads it, so a call whose outcome the
 * log does not know (cut off by the outage) is resolved from there, never run twice.
 */
import { existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { z } from 'zod';
import {
  defineAgent,
  runScope,
  ScriptedModel,
  tool,
  type AgentDefinition,
  type ScriptedResponse,
} from '../../src/index.ts';

export interface RestartLedgerLine {
  runId: string;
  toolCallId: string;
  key: string;
  tool: 'send_once' | 'slow';
  pid: number;
}

type PromptMessage = { role: string; content: unknown };
const textOf = (m: PromptMessage): string =>
  Array.isArray(m.content)
    ? (m.content as Array<{ type: string; text?: string }>)
        .map((p) => (p.type === 'text' ? (p.text ?? '') : ''))
        .join('')
    : String(m.content);

/** What the model says next, from the conversation alone. */
function respond(prompt: readonly PromptMessage[]): ScriptedResponse {
  const taskAt = prompt.findLastIndex((m) => m.role === 'user' && textOf(m).startsWith('task '));
  const m = /^task (\S+) steps=(\d+)( slow)?/.exec(taskAt >= 0 ? textOf(prompt[taskAt]!) : '');
  if (!m) return { text: 'no task' };
  const [, name, stepsText, slow] = m as unknown as [string, string, string, string | undefined];
  const done = prompt.slice(taskAt + 1).filter((p) => p.role === 'tool').length;
  const delayMs = 50 + Math.floor(Math.random() * 150);
  const step = done + 1;
  if (done >= Number(stepsText)) return { delayMs, chunks: ['done ', `${name} `, 'all ', 'steps'], chunkDelayMs: 10 };
  const calls = [{ id: `${name}-s${step}-once`, name: 'send_once', input: { step } }];
  if (slow && step === 1) calls.push({ id: `${name}-s${step}-slow`, name: 'slow', input: { step } });
  return { delayMs, chunks: ['working ', 'on ', `${name} `, `step ${step}`], chunkDelayMs: 10, toolCalls: calls };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The file the test creates once the database is back: `slow` calls end then. */
export const restartedMarker = (ledgerPath: string): string => `${ledgerPath}.restarted`;

export function restartAgent(ledgerPath: string): AgentDefinition {
  const ledger = openSync(ledgerPath, 'a');
  const lines = (): RestartLedgerLine[] =>
    readFileSync(ledgerPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as RestartLedgerLine);
  const effect =
    (name: RestartLedgerLine['tool'], wait: () => Promise<unknown>) =>
    async (_input: { step: number }, ctx: { toolCallId: string; idempotencyKey: string }) => {
      const line: RestartLedgerLine = {
        runId: runScope.getStore()!.runId,
        toolCallId: ctx.toolCallId,
        key: ctx.idempotencyKey,
        tool: name,
        pid: process.pid,
      };
      writeSync(ledger, `${JSON.stringify(line)}\n`);
      fsyncSync(ledger);
      await wait();
      return { key: ctx.idempotencyKey };
    };
  // The ledger says whether a call whose outcome is unknown ran: then its result is what it returned.
  const check = (_input: unknown, ctx: { idempotencyKey: string }) =>
    lines().some((l) => l.key === ctx.idempotencyKey)
      ? { done: true as const, output: { key: ctx.idempotencyKey } }
      : { done: false as const };
  const step = z.object({ step: z.number() });
  return defineAgent({
    name: 'restart',
    model: new ScriptedModel([(call) => respond(call.prompt as readonly PromptMessage[])], {
      loop: true,
      recordCalls: false,
    }),
    tools: [
      tool({
        name: 'send_once',
        description: 'sends (not safe to repeat)',
        input: step,
        effect: 'effectful',
        check,
        execute: effect('send_once', () => sleep(10 + Math.floor(Math.random() * 40))),
      }),
      tool({
        name: 'slow',
        description: 'takes long (not safe to repeat)',
        input: step,
        effect: 'effectful',
        check,
        execute: effect('slow', async () => {
          while (!existsSync(restartedMarker(ledgerPath))) await sleep(50);
        }),
      }),
    ],
    limits: { maxSteps: 20 },
  });
}

/** Leases of the test's processes: short, so that a lost run would be taken over within the test. */
export const RESTART_RUNTIME = { leaseMs: 2000, renewEveryMs: 400, controlPollMs: 250, maxAttempts: 20 } as const;
