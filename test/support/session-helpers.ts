import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { z } from 'zod';
import {
  defineAgent,
  exportSession,
  openSqliteStore,
  ScriptedModel,
  Sessions,
  tool,
  type AgentOptions,
  type Message,
  type SessionEvent,
  type SessionEventType,
  type SessionTurnOptions,
  type SqliteStore,
  type TurnResult,
  type UserInput,
} from '../../src/index.ts';

/** A private in-memory SQLite store with a `Sessions` on it. */
export function memorySessions(options: { snapshotEvery?: number } = {}): { store: SqliteStore; sessions: Sessions } {
  const store = openSqliteStore({ path: ':memory:' });
  return { store, sessions: new Sessions({ store, ...options }) };
}

/** A fresh directory under the OS temp dir for a database file that a test reopens. */
export function tempDbPath(): { path: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'keel-session-'));
  return { path: join(dir, 'keel.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A tool that answers `lookup({ q })` with `found <q>`. */
export const lookup = tool({
  name: 'lookup',
  description: 'Looks something up',
  input: z.object({ q: z.string() }),
  execute: ({ q }) => `found ${q}`,
});

export function agentWith(model: ScriptedModel, options: Partial<Omit<AgentOptions, 'model'>> = {}) {
  return defineAgent({ name: 'test-agent', tools: [lookup], ...options, model });
}

/** Runs one turn on a session to its end. */
export async function turn(
  sessions: Sessions,
  sessionId: string,
  agent: ReturnType<typeof defineAgent>,
  input?: UserInput,
  options: SessionTurnOptions = {},
): Promise<TurnResult> {
  const handle = await sessions.startTurn(sessionId, agent, { ...options, ...(input !== undefined ? { input } : {}) });
  return handle.result;
}

/** A summarizer whose n-th call (from 1) answers `${prefix} n`, with fixed usage. */
export function summarizerModel(prefix = 'SUMMARY', usage = { input: 200, output: 40 }): ScriptedModel {
  let n = 0;
  return new ScriptedModel([() => ({ text: `${prefix} ${++n}`, usage })], {
    loop: true,
    provider: 'scripted',
    modelId: 'summarizer-1',
  });
}

/** Every event of a session, in seq order. */
export async function allEvents(sessions: Sessions, sessionId: string): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for (;;) {
    const page = await sessions.events(sessionId, { after: out.at(-1)?.seq ?? 0, limit: 1000 });
    if (page.length === 0) return out;
    out.push(...page);
  }
}

export function ofType<T extends SessionEventType>(events: readonly SessionEvent[], type: T): Array<SessionEvent<T>> {
  return events.filter((e) => e.type === type) as Array<SessionEvent<T>>;
}

/** The entry event that carries the message with this id (assistant/user message or first tool result). */
export function entryOfMessage(events: readonly SessionEvent[], messageId: string): SessionEvent {
  const e = events.find(
    (x) =>
      ((x.type === 'user/message' || x.type === 'assistant/message') && x.data.message.id === messageId) ||
      (x.type === 'tool/result' && x.data.toolMessageId === messageId),
  );
  if (!e) throw new Error(`no entry carries message ${messageId}`);
  return e;
}

/** The text a message shows (summary text, user/assistant text, tool outputs). */
export function textOf(m: Message): string {
  switch (m.role) {
    case 'summary':
      return m.text;
    case 'tool':
      return m.content
        .map((r) =>
          r.output.type === 'error'
            ? r.output.message
            : r.output.type === 'text'
              ? r.output.value
              : JSON.stringify(r.output.value),
        )
        .join('|');
    default:
      return m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
  }
}

/** A compact, readable shape of a context: `user:hi`, `assistant:hello`, `call:lookup`, `tool:found x`, `summary:...`. */
export function shape(messages: readonly Message[]): string[] {
  return messages.map((m) => {
    if (m.role === 'assistant') {
      const calls = m.content
        .filter((p) => p.type === 'tool-call')
        .map((p) => (p.type === 'tool-call' ? p.toolName : ''));
      return calls.length > 0 ? `call:${calls.join(',')}${textOf(m) ? `+${textOf(m)}` : ''}` : `assistant:${textOf(m)}`;
    }
    return `${m.role}:${textOf(m)}`;
  });
}

/** Asserts every assistant tool call is answered by the message right after it (as providers require). */
export function unpairedToolCalls(messages: readonly Message[]): string[] {
  const problems: string[] = [];
  messages.forEach((m, i) => {
    if (m.role === 'tool') {
      const prev = messages[i - 1];
      const calls =
        prev?.role === 'assistant' ? prev.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])) : [];
      for (const r of m.content)
        if (!calls.includes(r.toolCallId)) problems.push(`result ${r.toolCallId} at ${i} has no call right before it`);
    }
    if (m.role !== 'assistant') return;
    const next = messages[i + 1];
    const answered = new Set(next?.role === 'tool' ? next.content.map((r) => r.toolCallId) : []);
    for (const p of m.content)
      if (p.type === 'tool-call' && !answered.has(p.toolCallId))
        problems.push(`call ${p.toolCallId} at ${i} has no result right after it`);
  });
  return problems;
}

/** The whole prompt text of a model call (system, messages, tool results), for `toContain` checks. */
export function promptText(call: LanguageModelV4CallOptions | undefined): string {
  return JSON.stringify(call?.prompt ?? []);
}

/** The text of the single user message a summarizer call received. */
export function summarizerInput(call: LanguageModelV4CallOptions | undefined): string {
  const user = call?.prompt.find((m) => m.role === 'user');
  return user?.role === 'user' ? user.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '';
}

/** Collects an export into its text (lines joined with newlines). */
export async function exportText(sessions: Sessions, sessionId: string): Promise<string> {
  const lines: string[] = [];
  for await (const line of exportSession(sessions.log, sessionId)) lines.push(line);
  return lines.join('\n');
}

/** A system prompt large enough to be stored as a blob. */
export const LONG_SYSTEM = `You are the test assistant of Keel. ${'Answer briefly, use the lookup tool for facts, and never guess. '.repeat(12)}`;

/**
 * A session with a bit of everything: a rate-limit retry, opaque reasoning, parallel tool calls, a
 * branch switch between turns, a long tool loop compacted mid-turn, a fork with a summary, a manual
 * compaction, a message appended between turns and a renamed title.
 */
export async function richSession(
  sessions: Sessions,
  options: { system?: string } = {},
): Promise<{ id: string; summarizer: ScriptedModel }> {
  const system = options.system ?? LONG_SYSTEM;
  const agent = (model: ScriptedModel) => agentWith(model, { system, settings: { temperature: 0 } });
  const summarizer = summarizerModel('RICH SUMMARY');
  const s = await sessions.create({
    title: 'rich',
    metadata: { project: 'keel', tags: ['test'] },
    agent: 'test-agent',
  });

  const m1 = new ScriptedModel([
    { error: { kind: 'rate_limit', retryAfterMs: 1 } },
    {
      reasoning: 'plan the lookups',
      reasoningSignature: 'sig-rich-1',
      text: 'Looking both up.',
      toolCalls: [
        { id: 'r1', name: 'lookup', input: { q: 'alpha' } },
        { id: 'r2', name: 'lookup', input: { q: 'beta' } },
      ],
      usage: { input: 150 },
    },
    {
      reasoning: 'combine them',
      reasoningSignature: 'sig-rich-2',
      text: 'Alpha and beta are found.',
      usage: { input: 220 },
    },
  ]);
  await turn(sessions, s.id, agent(m1), 'Find alpha and beta.');
  const turnOneAnswer = (await sessions.get(s.id)).leafId!;

  await turn(sessions, s.id, agent(new ScriptedModel([{ text: 'Gamma is next.' }])), 'What is next?');
  await sessions.switchBranch(s.id, turnOneAnswer);

  const m3 = new ScriptedModel([
    {
      reasoning: 'loop over items',
      reasoningSignature: 'sig-rich-3',
      toolCalls: [{ id: 'l1', name: 'lookup', input: { q: 'one' } }],
      usage: { input: 400 },
    },
    {
      reasoning: 'one more',
      reasoningSignature: 'sig-rich-4',
      toolCalls: [{ id: 'l2', name: 'lookup', input: { q: 'two' } }],
      usage: { input: 900 },
    },
    { text: 'Loop finished.', usage: { input: 300 } },
  ]);
  const r3 = await turn(sessions, s.id, agent(m3), 'Run the loop.', {
    compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 60, model: summarizer },
  });
  const all = await allEvents(sessions, s.id);
  if (r3.reason !== 'completed' || !all.some((e) => e.type === 'compaction'))
    throw new Error('richSession: turn 3 did not compact mid-turn');
  const loopQuestion = ofType(all, 'user/message').find((e) => e.turn === r3.turn)!;

  await sessions.fork(s.id, loopQuestion.id, {
    into: 'branch',
    summary: 'The loop already ran once; both items were found.',
  });
  await turn(sessions, s.id, agent(new ScriptedModel([{ text: 'Trying again.' }])), 'Try again differently.');
  const compacted = await sessions.compact(s.id, { model: summarizer, keepRecentTokens: 1 });
  if (!compacted.compacted) throw new Error(`richSession: ${compacted.reason}`);
  await sessions.appendUserMessage(s.id, 'A note from the user.');
  await turn(sessions, s.id, agent(new ScriptedModel([{ text: 'Noted.' }])));
  await sessions.update(s.id, { title: 'rich (renamed)' });
  return { id: s.id, summarizer };
}
