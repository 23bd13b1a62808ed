/**
 * The agent of the chaos test, used by the worker processes (which execute it) and by the driver
 * (which only sends to it). Its model is a function of the conversation, so any worker that
 * recovers a run asks it the same thing:
 *
 * - a user message `task <name> steps=<n> [flag…]` starts a task: n tool steps, each calling
 *   `record` (idempotent) and `send_once` (not idempotent); each flag adds a call that makes the
 *   run wait, in a step chosen from the task's name (`stepOf`):
 *   - `danger`: `danger` (not idempotent, needs an approval; no deadline);
 *   - `risky`: `risky` (not idempotent, needs an approval; denied at its deadline);
 *   - `ask`: `ask_user` (a question; answered `{pick: 'default'}` at its deadline);
 *   - `confirm`: `confirm` (a question; a `timeout` error at its deadline);
 *   - `sleep`: `sleep` for 1 to 3 s (woken early by a message steered into the run);
 *   - `signal`: `await_signal` for `sig-<name>` (no deadline);
 *   - `sigdl`: `await_signal` for `sigdl-<name>`, its default payload at its deadline;
 *   - `cb`: `await_callback`: a callback URL for `cb-<name>` (its token in the ledger), then its wait;
 *   - `mix`: `danger` and `await_signal` for `mix-<name>` in the same step (a signal that comes
 *     while the run waits for the approval);
 * - then it answers `done <name>; saw: <every user message since the task>`, so the test can
 *   tell that each steering message reached the run it was accepted for.
 *
 * Every execution of `record`, `send_once`, `danger`, `risky` and `await_callback` appends a line
 * to a ledger file (one write(2) then fsync, O_APPEND), the outside world's record of what really
 * ran: a denied or undecided `danger` or `risky` call must have no line.
 */
import { fsyncSync, openSync, writeSync } from 'node:fs';
import { z } from 'zod';
import {
  askUser,
  askUserInput,
  callbackFor,
  defineAgent,
  runScope,
  ScriptedModel,
  sleepTool,
  tool,
  waitForSignal,
  type AgentDefinition,
  type ScriptedResponse,
} from '../../src/index.ts';

export interface ChaosLedgerLine {
  runId: string;
  toolCallId: string;
  key: string;
  tool: 'record' | 'send_once' | 'danger' | 'risky' | 'await_callback';
  gen: number;
  /** `await_callback`: the signal's name and the callback token the tool was given. */
  signal?: string;
  token?: string;
}

/** The flags of a task, each a kind of wait (see the file's comment). */
export const WAIT_FLAGS = ['danger', 'risky', 'ask', 'confirm', 'sleep', 'signal', 'sigdl', 'cb', 'mix'] as const;
export type WaitFlag = (typeof WAIT_FLAGS)[number];

/** How long an approval of `risky`, a question, or a `sigdl` signal waits before its deadline decides. */
export const WAIT_DEADLINE_MS = 2500;
/** The payload a `sigdl` wait gets at its deadline. */
export const DEADLINE_PAYLOAD = { nonce: 'deadline' } as const;
/** The answer an unanswered `ask_user` gets at its deadline. */
export const DEADLINE_ANSWER = { pick: 'default' } as const;

/** The signals a run waits for, by the flag that asks for one: the name it waits for. */
export const SIGNAL_FLAGS = { signal: 'sig', sigdl: 'sigdl', cb: 'cb', mix: 'mix' } as const;
export const signalName = (flag: keyof typeof SIGNAL_FLAGS, task: string): string => `${SIGNAL_FLAGS[flag]}-${task}`;

/** The payload every signal carries (a signal's wait checks it against this schema). */
export const signalPayload = z.object({ nonce: z.string() });

type PromptMessage = { role: string; content: unknown };
const textOf = (m: PromptMessage): string =>
  Array.isArray(m.content)
    ? (m.content as Array<{ type: string; text?: string }>)
        .map((p) => (p.type === 'text' ? (p.text ?? '') : ''))
        .join('')
    : String(m.content);

/** A small stable hash of a string (FNV-1a). */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** The parts of a task message: its name, its steps and its flags. */
export function parseTask(text: string): { name: string; steps: number; flags: WaitFlag[] } | undefined {
  const m = /^task (\S+) steps=(\d+)(.*)$/.exec(text);
  if (!m) return undefined;
  const flags = m[3]!.split(/\s+/).filter((f): f is WaitFlag => (WAIT_FLAGS as readonly string[]).includes(f));
  return { name: m[1]!, steps: Number(m[2]), flags };
}

/** The step (1..steps) in which a flag's call comes: from the task's name alone. */
export function stepOf(name: string, flag: WaitFlag, steps: number): number {
  return flag === 'danger' || flag === 'mix' ? 1 : 1 + (hash(`${name}/${flag}`) % steps);
}

/** The seconds a task's `sleep` sleeps (1 to 3). */
export const sleepSecondsOf = (name: string): number => 1 + (hash(`${name}/sleep`) % 3);

type Call = NonNullable<ScriptedResponse['toolCalls']>[number];

function callsFor(flag: WaitFlag, name: string, step: number): Call[] {
  const id = (what: string) => `${name}-s${step}-${what}`;
  switch (flag) {
    case 'danger':
      return [{ id: id('danger'), name: 'danger', input: { step } }];
    case 'risky':
      return [{ id: id('risky'), name: 'risky', input: { step } }];
    case 'ask':
      return [
        {
          id: id('ask'),
          name: 'ask_user',
          input: { questions: [{ id: 'pick', question: 'Which one?', choices: ['a', 'b', 'c'] }] },
        },
      ];
    case 'confirm':
      return [{ id: id('confirm'), name: 'confirm', input: { questions: [{ id: 'ok', question: 'Go on?' }] } }];
    case 'sleep':
      return [{ id: id('sleep'), name: 'sleep', input: { seconds: sleepSecondsOf(name) } }];
    case 'signal':
      return [{ id: id('signal'), name: 'await_signal', input: { name: signalName('signal', name) } }];
    case 'sigdl':
      return [
        {
          id: id('sigdl'),
          name: 'await_signal',
          input: { name: signalName('sigdl', name), deadlineMs: WAIT_DEADLINE_MS },
        },
      ];
    case 'cb':
      return [{ id: id('cb'), name: 'await_callback', input: { name: signalName('cb', name) } }];
    case 'mix':
      return [
        { id: id('mixdanger'), name: 'danger', input: { step } },
        { id: id('mix'), name: 'await_signal', input: { name: signalName('mix', name) } },
      ];
  }
}

/** What the model says next, from the conversation alone. */
export function respond(prompt: readonly PromptMessage[], delayMs = 1): ScriptedResponse {
  const taskAt = prompt.findLastIndex((m) => m.role === 'user' && textOf(m).startsWith('task '));
  if (taskAt < 0) return { text: 'no task' };
  const task = textOf(prompt[taskAt]!);
  const { name, steps, flags } = parseTask(task) ?? { name: '?', steps: 1, flags: [] };
  const after = prompt.slice(taskAt + 1);
  const done = after.filter((m) => m.role === 'tool').length;
  const seen = [task, ...after.filter((m) => m.role === 'user').map(textOf)];
  if (done >= steps) return { delayMs, text: `done ${name}; saw: ${seen.join(' | ')}` };
  const step = done + 1;
  const calls: Call[] = [
    { id: `${name}-s${step}-record`, name: 'record', input: { step } },
    { id: `${name}-s${step}-once`, name: 'send_once', input: { step } },
  ];
  for (const f of flags) if (stepOf(name, f, steps) === step) calls.push(...callsFor(f, name, step));
  return { delayMs, toolCalls: calls };
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

export interface ChaosAgentOptions {
  narrate?: boolean;
  /** How long each model call takes, at most (ms): a random part of it, so that calls overlap and wait for provider limits. Default 1. */
  modelDelayMs?: number;
}

export function chaosAgent(
  ledgerPath: string,
  gen: number,
  onTool?: () => void,
  o: ChaosAgentOptions = {},
): AgentDefinition {
  const ledger = openSync(ledgerPath, 'a');
  const write = (line: ChaosLedgerLine) => {
    writeSync(ledger, `${JSON.stringify(line)}\n`);
    fsyncSync(ledger);
    onTool?.();
  };
  const runId = () => runScope.getStore()!.runId;
  const effect =
    (name: 'record' | 'send_once' | 'danger' | 'risky') =>
    async (_input: { step: number }, ctx: { toolCallId: string; idempotencyKey: string }) => {
      write({ runId: runId(), toolCallId: ctx.toolCallId, key: ctx.idempotencyKey, tool: name, gen });
      await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 80)));
      return { gen, key: ctx.idempotencyKey };
    };
  const step = z.object({ step: z.number() });
  const delay = o.modelDelayMs ?? 1;
  return defineAgent({
    name: 'chaos',
    model: new ScriptedModel(
      [
        (call) =>
          narrated(
            respond(call.prompt as readonly PromptMessage[], delay <= 1 ? 1 : 1 + Math.floor(Math.random() * delay)),
            o.narrate === true,
          ),
      ],
      { loop: true, recordCalls: false },
    ),
    tools: [
      tool({
        name: 'record',
        description: 'records (safe to repeat)',
        input: step,
        idempotent: true,
        execute: effect('record'),
      }),
      tool({ name: 'send_once', description: 'sends (not safe to repeat)', input: step, execute: effect('send_once') }),
      tool({
        name: 'danger',
        description: 'does something that needs an approval',
        input: step,
        approval: 'always',
        execute: effect('danger'),
      }),
      tool({
        name: 'risky',
        description: 'does something that needs an approval, denied when nobody decides in time',
        input: step,
        approval: 'always',
        wait: { timeoutMs: WAIT_DEADLINE_MS, onTimeout: { deny: 'nobody decided in time' } },
        execute: effect('risky'),
      }),
      { ...askUser(), wait: { timeoutMs: WAIT_DEADLINE_MS, onTimeout: { answer: DEADLINE_ANSWER } } },
      tool({
        name: 'confirm',
        description: 'asks the user to confirm; no answer in time is a timeout',
        input: askUserInput,
        interactive: true,
        wait: { timeoutMs: WAIT_DEADLINE_MS, onTimeout: { deny: 'no answer in time' } },
        execute: () => {
          throw new Error('confirm is answered by the user, never executed');
        },
      }),
      sleepTool({ wakeOnSteer: true, maxSeconds: 60 }),
      tool({
        name: 'await_signal',
        description: 'waits for a signal',
        input: z.object({ name: z.string(), deadlineMs: z.number().optional() }),
        // Asking for the wait again after a crash is harmless.
        idempotent: true,
        execute: ({ name, deadlineMs }, ctx) =>
          waitForSignal(name, {
            schema: signalPayload,
            ...(deadlineMs !== undefined
              ? { deadline: ctx.now!() + deadlineMs, onTimeout: { answer: DEADLINE_PAYLOAD } }
              : {}),
          }),
      }),
      tool({
        name: 'await_callback',
        description: 'hands a callback URL out (to the ledger), then waits for it',
        input: z.object({ name: z.string() }),
        // Run again after a crash, it hands out another token for the same signal: either delivers it, once.
        idempotent: true,
        execute: async ({ name }, ctx) => {
          const { token } = await callbackFor(name);
          write({
            runId: runId(),
            toolCallId: ctx.toolCallId,
            key: ctx.idempotencyKey,
            tool: 'await_callback',
            gen,
            signal: name,
            token,
          });
          return waitForSignal(name, { schema: signalPayload });
        },
      }),
    ],
    limits: { maxSteps: 30 },
  });
}

/** How the worker processes and the driver set up their runtimes: short leases, so kills are recovered fast. */
export const CHAOS_RUNTIME = { leaseMs: 600, renewEveryMs: 150, controlPollMs: 100, maxAttempts: 10_000 } as const;

/**
 * What the chaos test's processes add to CHAOS_RUNTIME: a concurrency limit on the scripted model
 * (every process on the store shares it, so runs wait for a slot while workers die; a dead
 * holder's slot frees after a short lease), webhooks to the driver's receiver on this machine
 * retried soon, and a sweep four times a second.
 */
export const CHAOS_LIMIT_KEY = 'scripted:*';
export const CHAOS_CONCURRENCY = 2;
export const CHAOS_PROCESS = {
  limits: { [CHAOS_LIMIT_KEY]: { concurrency: CHAOS_CONCURRENCY } },
  flowControl: { slotLeaseMs: 1500, holdSlotMs: 300 },
  webhooks: { allowPrivateNetworks: true, timeoutMs: 3000, pollMs: 200, baseDelayMs: 300, maxDelayMs: 2000 },
} as const;
export const CHAOS_SWEEP_MS = 250;
