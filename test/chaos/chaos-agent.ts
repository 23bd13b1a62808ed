/**
 * The agent of the chaos test, used by the worker processes (which execute it) and by the driver
 * (which only sends to it). Its model is a function of the conversation, so any worker that
 * recovers a run asks it the same thing:
 *
 * - a user message `task <name> steps=<n> [danger]` starts a task: n tool steps, each calling
 *   `record` (idempotent) and `send_once` (not idempotent); with `danger`, the first step also
 *   calls `danger` (not idempotent, needs an approval);
 * - then it answers `done <name>; saw: <every user message since the task>`, so the test can
 *   tell that each steering message reached the run it was accepted for.
 *
 * Every tool execution appends a line to a ledger file (one write(2) then fsync, O_APPEND), the
 * outside world's record of what really ran.
 */
import { fsyncSync, openSync, writeSync } from 'node:fs';
import { z } from 'zod';
import { defineAgent, runScope, ScriptedModel, tool, type AgentDefinition, type ScriptedResponse } from '../../src/index.ts';

export interface ChaosLedgerLine {
  runId: string;
  toolCallId: string;
  key: string;
  tool: 'record' | 'send_once' | 'danger';
  gen: number;
}

type PromptMessage = { role: string; content: unknown };
const textOf = (m: PromptMessage): string =>
  Array.isArray(m.content) ? (m.content as Array<{ type: string; text?: string }>).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('') : String(m.content);

/** What the model says next, from the conversation alone. */
export function respond(prompt: readonly PromptMessage[]): ScriptedResponse {
  const taskAt = prompt.findLastIndex((m) => m.role === 'user' && textOf(m).startsWith('task '));
  if (taskAt < 0) return { text: 'no task' };
  const task = textOf(prompt[taskAt]!);
  const [, name = '?', steps = '1'] = /^task (\S+) steps=(\d+)/.exec(task) ?? [];
  const after = prompt.slice(taskAt + 1);
  const done = after.filter((m) => m.role === 'tool').length;
  const seen = [task, ...after.filter((m) => m.role === 'user').map(textOf)];
  if (done >= Number(steps)) return { delayMs: 1, text: `done ${name}; saw: ${seen.join(' | ')}` };
  const step = done + 1;
  const calls = [
    { id: `${name}-s${step}-record`, name: 'record', input: { step } },
    { id: `${name}-s${step}-once`, name: 'send_once', input: { step } },
  ];
  if (step === 1 && /\bdanger\b/.test(task)) calls.push({ id: `${name}-s1-danger`, name: 'danger', input: { step } });
  return { delayMs: 1, toolCalls: calls };
}

/**
 * `narrate`: every answer also streams text, word by word with a pause between words (the cluster
 * test follows token deltas across nodes); the conversation decides the same tool calls.
 */
function narrated(r: ScriptedResponse, narrate: boolean): ScriptedResponse {
  if (!narrate) return r;
  const text = r.text ?? `working on ${r.toolCalls?.map((c) => c.id).join(' and ') ?? 'it'} now, one moment please`;
  return { ...r, text, chunkDelayMs: 2 };
}

export function chaosAgent(ledgerPath: string, gen: number, onTool?: () => void, o: { narrate?: boolean } = {}): AgentDefinition {
  const ledger = openSync(ledgerPath, 'a');
  const effect = (name: ChaosLedgerLine['tool']) => async (_input: { step: number }, ctx: { toolCallId: string; idempotencyKey: string }) => {
    const line: ChaosLedgerLine = { runId: runScope.getStore()!.runId, toolCallId: ctx.toolCallId, key: ctx.idempotencyKey, tool: name, gen };
    writeSync(ledger, `${JSON.stringify(line)}\n`);
    fsyncSync(ledger);
    onTool?.();
    await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 80)));
    return { gen, key: ctx.idempotencyKey };
  };
  return defineAgent({
    name: 'chaos',
    model: new ScriptedModel([(call) => narrated(respond(call.prompt as readonly PromptMessage[]), o.narrate === true)], { loop: true, recordCalls: false }),
    tools: [
      tool({ name: 'record', description: 'records (safe to repeat)', input: z.object({ step: z.number() }), idempotent: true, execute: effect('record') }),
      tool({ name: 'send_once', description: 'sends (not safe to repeat)', input: z.object({ step: z.number() }), execute: effect('send_once') }),
      tool({ name: 'danger', description: 'does something that needs an approval', input: z.object({ step: z.number() }), approval: 'always', execute: effect('danger') }),
    ],
    limits: { maxSteps: 30 },
  });
}

/** How the worker processes and the driver set up their runtimes: short leases, so kills are recovered fast. */
export const CHAOS_RUNTIME = { leaseMs: 600, renewEveryMs: 150, controlPollMs: 100, maxAttempts: 10_000 } as const;
