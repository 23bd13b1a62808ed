/**
 * Helpers for the side-effect contract tests (ADR-0018): an agent whose one tool step calls an
 * effectful `charge` and an idempotent `reserve` at once, each writing a line to a side-effect
 * ledger (a file opened with O_APPEND) when it starts; and a real crash: a worker process
 * (fixtures/effects-worker.ts) runs the step, is killed with SIGKILL while both calls run, and the
 * test recovers the run in its own process from the same SQLite file.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  runScope,
  ScriptedModel,
  SqliteStore,
  tool,
  type OutcomeCheck,
  type Runtime,
  type ScriptedResponse,
  type UnknownOutcomePolicy,
} from '../../src/index.ts';

export const AGENT = { name: 'payments', version: '1' };
export const LEASE_MS = 300;

export interface LedgerLine {
  tool: 'charge' | 'reserve';
  toolCallId: string;
  key: string;
  runId: string;
  pid: number;
}

export interface EffectsAgentOptions {
  ledger: string;
  /** Block forever once started (the worker that is killed). */
  hang?: boolean;
  /** Called when a tool started (after its ledger line). */
  onStart?: (line: LedgerLine) => void;
  onUnknownOutcome?: UnknownOutcomePolicy;
  /** The charge tool's own policy (overrides the agent's). */
  chargePolicy?: UnknownOutcomePolicy;
  check?: OutcomeCheck<{ amount: number }>;
}

/** Step 1: `reserve` and `charge` at once; after their results: a final answer quoting them. */
function respond(prompt: ReadonlyArray<{ role: string; content: unknown }>): ScriptedResponse {
  const results = prompt.filter((m) => m.role === 'tool');
  if (results.length === 0) {
    return {
      toolCalls: [
        { id: 'call-reserve', name: 'reserve', input: { seat: '12A' } },
        { id: 'call-charge', name: 'charge', input: { amount: 42 } },
      ],
    };
  }
  return { text: `done: ${JSON.stringify(results.map((m) => m.content))}` };
}

export function effectsAgent(o: EffectsAgentOptions) {
  const fd = openSync(o.ledger, 'a');
  const effect =
    (name: LedgerLine['tool']) => async (_input: unknown, ctx: { toolCallId: string; idempotencyKey: string }) => {
      const line: LedgerLine = {
        tool: name,
        toolCallId: ctx.toolCallId,
        key: ctx.idempotencyKey,
        runId: runScope.getStore()?.runId ?? '?',
        pid: process.pid,
      };
      writeSync(fd, `${JSON.stringify(line)}\n`);
      o.onStart?.(line);
      if (o.hang) await new Promise(() => {});
      return { [name === 'charge' ? 'charged' : 'reserved']: true, key: ctx.idempotencyKey };
    };
  return defineAgent({
    ...AGENT,
    model: new ScriptedModel([(call) => respond(call.prompt)], { loop: true }),
    tools: [
      tool({
        name: 'reserve',
        description: 'Reserves a seat',
        input: z.object({ seat: z.string() }),
        effect: 'idempotent',
        execute: effect('reserve'),
      }),
      tool({
        name: 'charge',
        description: 'Charges the card',
        input: z.object({ amount: z.number() }),
        effect: 'effectful',
        ...(o.chargePolicy ? { onUnknownOutcome: o.chargePolicy } : {}),
        ...(o.check ? { check: o.check } : {}),
        execute: effect('charge'),
      }),
    ],
    ...(o.onUnknownOutcome ? { onUnknownOutcome: o.onUnknownOutcome } : {}),
  });
}

export function readLedger(path: string): LedgerLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LedgerLine);
}

export function runtimeFor(db: string, agent: ReturnType<typeof effectsAgent>): { rt: Runtime; store: SqliteStore } {
  const store = new SqliteStore({ path: db, busyTimeoutMs: 30_000 });
  const rt = createRuntime({ store, agents: [agent], leaseMs: LEASE_MS, renewEveryMs: 50, maxAttempts: 10 });
  return { rt, store };
}

const FIXTURE = fileURLToPath(new URL('../runs/fixtures/effects-worker.ts', import.meta.url));

/**
 * Queues a run, lets a worker process start its tool step and kills it (SIGKILL) while both calls
 * run: the log holds both `tool/call`s and no result.
 */
export async function crashMidCall(): Promise<{
  dir: string;
  db: string;
  ledger: string;
  runId: string;
  sessionId: string;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-effects-'));
  const db = join(dir, 'keel.db');
  const ledger = join(dir, 'ledger.jsonl');
  const setup = runtimeFor(db, effectsAgent({ ledger }));
  const session = await setup.rt.sessions.create();
  const { run } = await setup.rt.sessions.send(session.id, 'book seat 12A and pay 42');
  await setup.rt.close();
  await setup.store.close().catch(() => {});

  const child = spawn(process.execPath, [FIXTURE, db, ledger], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const busy = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 20_000);
    child.on('message', (m: { type: string }) => {
      if (m.type === 'busy') {
        clearTimeout(timer);
        resolve(true);
      }
    });
    void exited.then(() => resolve(false));
  });
  child.kill('SIGKILL');
  await exited;
  if (!busy) throw new Error(`the worker process did not start both calls: ${stderr}`);
  return { dir, db, ledger, runId: run.id, sessionId: session.id };
}
