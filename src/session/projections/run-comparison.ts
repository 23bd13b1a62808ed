/**
 * The comparison of two runs (ADR-0037, issue 40): a projection of their events, aligned by step
 * number. For each step: the request (provider, model, settings, system prompt and tool schemas by
 * content hash and, when they differ, by text; the fingerprint), the assistant text as a word diff,
 * the tool calls side by side (name, arguments, result, and whether the result was `executed` or
 * `reused`), the end reason, tokens, cost and latency. For the runs: status, tokens, cost, latency
 * and the final answer as a word diff. A pure function: the caller reads the events, records and
 * stored content it needs.
 */
import { canonicalJson, type RequestHeader } from '../../core/index.ts';
import type { JsonValue, ToolOutput, Usage } from '../../model/index.ts';
import type { RunRecord } from '../../store/index.ts';
import type { SessionEvent } from '../event-types.ts';
import { runEvents, type RunEventsSource } from '../run-events.ts';

/** One run's side of a comparison: its record, its events (any order; others' are ignored), and stored content by hash. */
export interface ComparedRunInput {
  run: RunRecord;
  events: readonly SessionEvent[];
  /** A request header's system prompt and tool schemas by content hash, parsed (Sessions.content). */
  content: ReadonlyMap<string, unknown>;
}

/** Where a run's side is read from: `Sessions` (its log, read by run, and its stored content). */
export interface ComparedRunSource {
  log: RunEventsSource;
  content(hashes: ReadonlyArray<string | null>): Promise<Map<string, unknown>>;
}

/** A run's side: its events (read by run, in pages), and the content its request headers name. */
export async function readComparedRun(source: ComparedRunSource, run: RunRecord): Promise<ComparedRunInput> {
  const events = await runEvents(source.log, run.sessionId, run.id);
  const headers = events.flatMap((e) => (e.type === 'request/header' ? [e.data as RequestHeader] : []));
  return { run, events, content: await source.content(headers.flatMap((h) => [h.system, h.tools])) };
}

/** A value on each side; null where the side has none. */
export interface Compared<T> {
  a: T | null;
  b: T | null;
  equal: boolean;
}

export interface DiffPart {
  op: 'equal' | 'delete' | 'insert';
  text: string;
}

/** A text on each side and the edit from a to b (`delete`: only in a, `insert`: only in b). */
export interface TextDiff {
  a: string | null;
  b: string | null;
  equal: boolean;
  parts: DiffPart[];
}

export interface ComparedTokens {
  input: Compared<number>;
  output: Compared<number>;
}

/** Content named by hash: equal when the hashes are; the text diff only when they differ. */
export interface ComparedContent {
  hash: Compared<string>;
  diff: TextDiff | null;
}

export interface ComparedRequest {
  provider: Compared<string>;
  modelId: Compared<string>;
  settings: Compared<Record<string, JsonValue>>;
  system: ComparedContent;
  tools: ComparedContent & { names: Compared<string[]> };
  /** The request's fingerprint (`promptHash`): equal only when everything sent was. */
  fingerprint: Compared<string>;
}

/** Where a call's result came from: the tool ran, or a rerun served the source run's recorded result or a mock. */
export type ToolCallSource = 'executed' | 'reused' | 'mocked';

export interface ToolCallSide {
  toolCallId: string;
  name: string;
  arguments: JsonValue;
  /** Null while the call has no result (it waits, or the run ended before it). */
  result: ToolOutput | null;
  durationMs: number | null;
  source: ToolCallSource;
}

/** The n-th call of a step in each run. */
export interface ComparedToolCall {
  index: number;
  presentIn: 'both' | 'a' | 'b';
  a: ToolCallSide | null;
  b: ToolCallSide | null;
  name: boolean;
  arguments: boolean;
  result: boolean;
  equal: boolean;
}

export interface ComparedStep {
  step: number;
  /** A step only one run has is reported as such, with the other side null. */
  presentIn: 'both' | 'a' | 'b';
  request: ComparedRequest | null;
  text: TextDiff;
  toolCalls: ComparedToolCall[];
  endReason: Compared<string>;
  tokens: ComparedTokens;
  cost: Compared<number>;
  /** From the step's start to its end (its model call and tools), in ms. */
  latencyMs: Compared<number>;
}

export interface ComparedRunSummary {
  id: string;
  sessionId: string;
  turn: number | null;
  agent: { name: string; version: string };
  status: string;
  steps: number;
}

export interface RunComparison {
  a: ComparedRunSummary;
  b: ComparedRunSummary;
  status: Compared<string>;
  tokens: ComparedTokens;
  cost: Compared<number>;
  /** From the run's start to its end, in ms; null while it has not ended. */
  latencyMs: Compared<number>;
  /** The text of each run's last assistant message. */
  finalAnswer: TextDiff;
  /**
   * When one run is a rerun of the other: the step it was rerun from. The source's steps before
   * it are the context both share (the rerun's session is a fork there): they are left out of `steps`.
   */
  forkedAt: number | null;
  steps: ComparedStep[];
}

/** The step `b` was rerun from when it is a rerun of `a` (its options' lineage; see src/runs/reruns). */
function rerunStepOf(a: RunRecord, b: RunRecord): number | null {
  const of = (b.options as { rerun?: { of?: { runId?: unknown; step?: unknown } } }).rerun?.of;
  return of?.runId === a.id && typeof of.step === 'number' ? of.step : null;
}

interface StepFacts {
  header: RequestHeader | null;
  text: string | null;
  usage: Usage | null;
  cost: number;
  startedAt: number | null;
  endedAt: number | null;
  endReason: string | null;
  calls: ToolCallSide[];
}

function stepsOf(input: ComparedRunInput): Map<number, StepFacts> {
  const steps = new Map<number, StepFacts>();
  const events = input.events.filter((e) => e.runId === input.run.id && e.step !== undefined);
  for (const e of [...events].sort((x, y) => x.seq - y.seq)) {
    const n = e.step!;
    let s = steps.get(n);
    if (!s) {
      s = {
        header: null,
        text: null,
        usage: null,
        cost: 0,
        startedAt: null,
        endedAt: null,
        endReason: null,
        calls: [],
      };
      steps.set(n, s);
    }
    switch (e.type) {
      case 'step/start':
        s.startedAt ??= e.time;
        break;
      case 'request/header':
        // Retries: the last attempt is the one that answered.
        s.header = e.data as RequestHeader;
        break;
      case 'assistant/message': {
        const text = e.data.message.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
        s.text = (s.text ?? '') + text;
        s.usage = e.data.usage;
        s.cost += e.data.cost;
        break;
      }
      case 'tool/call':
        s.calls.push({
          toolCallId: e.data.toolCallId,
          name: e.data.toolName,
          arguments: e.data.input,
          result: null,
          durationMs: null,
          source: 'executed',
        });
        break;
      case 'tool/result': {
        const call = s.calls.find((c) => c.toolCallId === e.data.toolCallId);
        if (call) {
          call.result = e.data.output;
          call.source = e.data.source ?? 'executed';
          call.durationMs = e.data.durationMs;
        }
        break;
      }
      case 'step/end':
        s.endedAt = e.time;
        s.endReason = e.data.reason;
        break;
      default:
        break;
    }
  }
  return steps;
}

const same = (x: unknown, y: unknown) => canonicalJson(x) === canonicalJson(y);

function compared<T>(a: T | null | undefined, b: T | null | undefined): Compared<T> {
  return { a: a ?? null, b: b ?? null, equal: same(a ?? null, b ?? null) };
}

/** The system prompt's text of a header: from stored content, or inline on a legacy header. */
function systemText(h: RequestHeader, content: ReadonlyMap<string, unknown>): string | null {
  if (h.legacy) return h.legacy.system;
  if (h.system === null) return null;
  const v = content.get(h.system);
  return typeof v === 'string' ? v : v === undefined ? null : JSON.stringify(v, null, 2);
}

function toolSchemas(h: RequestHeader, content: ReadonlyMap<string, unknown>): unknown[] {
  if (h.legacy) return h.legacy.tools;
  if (h.tools === null) return [];
  const v = content.get(h.tools);
  return Array.isArray(v) ? v : [];
}

function contentOf(
  ha: string | null,
  hb: string | null,
  ta: () => string | null,
  tb: () => string | null,
  lines: boolean,
): ComparedContent {
  const hash = compared(ha, hb);
  return { hash, diff: hash.equal ? null : textDiff(ta(), tb(), lines) };
}

function compareRequest(ha: RequestHeader | null, hb: RequestHeader | null, a: ComparedRunInput, b: ComparedRunInput) {
  if (!ha && !hb) return null;
  const toolsA = ha ? toolSchemas(ha, a.content) : [];
  const toolsB = hb ? toolSchemas(hb, b.content) : [];
  const names = (ts: unknown[]) =>
    ts.map((t) => (t && typeof t === 'object' && 'name' in t ? String((t as { name: unknown }).name) : '?'));
  const tools = contentOf(
    ha?.tools ?? null,
    hb?.tools ?? null,
    () => (ha ? JSON.stringify(toolsA, null, 2) : null),
    () => (hb ? JSON.stringify(toolsB, null, 2) : null),
    true,
  );
  return {
    provider: compared(ha?.provider, hb?.provider),
    modelId: compared(ha?.modelId, hb?.modelId),
    settings: compared(ha?.settings, hb?.settings),
    system: contentOf(
      ha?.system ?? null,
      hb?.system ?? null,
      () => (ha ? systemText(ha, a.content) : null),
      () => (hb ? systemText(hb, b.content) : null),
      true,
    ),
    tools: { ...tools, names: compared(ha ? names(toolsA) : null, hb ? names(toolsB) : null) },
    fingerprint: compared(ha?.promptHash, hb?.promptHash),
  } satisfies ComparedRequest;
}

function compareCalls(a: ToolCallSide[], b: ToolCallSide[]): ComparedToolCall[] {
  return Array.from({ length: Math.max(a.length, b.length) }, (_, index) => {
    const ca = a[index] ?? null;
    const cb = b[index] ?? null;
    const name = ca?.name === cb?.name;
    const args = same(ca?.arguments ?? null, cb?.arguments ?? null);
    const result = same(ca?.result ?? null, cb?.result ?? null);
    return {
      index,
      presentIn: ca && cb ? 'both' : ca ? 'a' : 'b',
      a: ca,
      b: cb,
      name,
      arguments: args,
      result,
      equal: ca !== null && cb !== null && name && args && result,
    };
  });
}

const tokensOf = (a: Partial<Usage> | null | undefined, b: Partial<Usage> | null | undefined): ComparedTokens => ({
  input: compared(a?.inputTokens, b?.inputTokens),
  output: compared(a?.outputTokens, b?.outputTokens),
});

const span = (from: number | null | undefined, to: number | null | undefined) =>
  from != null && to != null ? to - from : null;

function summary(r: RunRecord, steps: number): ComparedRunSummary {
  return { id: r.id, sessionId: r.sessionId, turn: r.turn, agent: r.agent, status: r.status, steps };
}

/** Compares run a with run b, step by step. */
export function compareRuns(a: ComparedRunInput, b: ComparedRunInput): RunComparison {
  const sa = stepsOf(a);
  const sb = stepsOf(b);
  const forkedAt = rerunStepOf(a.run, b.run) ?? rerunStepOf(b.run, a.run);
  const numbers = [...new Set([...sa.keys(), ...sb.keys()])]
    .filter((n) => forkedAt === null || n >= forkedAt)
    .sort((x, y) => x - y);
  const steps = numbers.map((step): ComparedStep => {
    const x = sa.get(step);
    const y = sb.get(step);
    return {
      step,
      presentIn: x && y ? 'both' : x ? 'a' : 'b',
      request: compareRequest(x?.header ?? null, y?.header ?? null, a, b),
      text: textDiff(x?.text ?? null, y?.text ?? null),
      toolCalls: compareCalls(x?.calls ?? [], y?.calls ?? []),
      endReason: compared(x?.endReason, y?.endReason),
      tokens: tokensOf(x?.usage, y?.usage),
      cost: compared(x?.cost, y?.cost),
      latencyMs: compared(span(x?.startedAt, x?.endedAt), span(y?.startedAt, y?.endedAt)),
    };
  });
  const finalText = (s: Map<number, StepFacts>) =>
    [...s.entries()]
      .sort(([m], [n]) => m - n)
      .map(([, f]) => f.text)
      .filter((t): t is string => t !== null && t !== '')
      .at(-1) ?? null;
  return {
    a: summary(a.run, sa.size),
    b: summary(b.run, sb.size),
    status: compared(a.run.status, b.run.status),
    tokens: tokensOf(a.run.usage as Partial<Usage>, b.run.usage as Partial<Usage>),
    cost: compared(a.run.cost, b.run.cost),
    latencyMs: compared(span(a.run.startedAt, a.run.endedAt), span(b.run.startedAt, b.run.endedAt)),
    finalAnswer: textDiff(finalText(sa), finalText(sb)),
    forkedAt,
    steps,
  };
}

/** Larger inputs are diffed as a whole (one delete, one insert) rather than token by token. */
const MAX_DIFF_CELLS = 4_000_000;

/** A word diff (words and the spaces between them), or with `lines` a line diff: the longest common subsequence. */
export function textDiff(a: string | null, b: string | null, lines = false): TextDiff {
  const split = (s: string) => (lines ? s.split(/(?<=\n)/) : s.split(/(\s+)/)).filter((t) => t !== '');
  const x = split(a ?? '');
  const y = split(b ?? '');
  const parts: DiffPart[] = [];
  const push = (op: DiffPart['op'], text: string) => {
    const last = parts.at(-1);
    if (last?.op === op) last.text += text;
    else parts.push({ op, text });
  };
  if (x.length * y.length > MAX_DIFF_CELLS) {
    if (a) push('delete', a);
    if (b) push('insert', b);
  } else {
    // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
    const w = y.length + 1;
    const lcs = new Uint32Array((x.length + 1) * w);
    for (let i = x.length - 1; i >= 0; i--)
      for (let j = y.length - 1; j >= 0; j--)
        lcs[i * w + j] =
          x[i] === y[j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!);
    let i = 0;
    let j = 0;
    while (i < x.length && j < y.length) {
      if (x[i] === y[j]) {
        push('equal', x[i]!);
        i++;
        j++;
      } else if (lcs[(i + 1) * w + j]! >= lcs[i * w + j + 1]!) push('delete', x[i++]!);
      else push('insert', y[j++]!);
    }
    while (i < x.length) push('delete', x[i++]!);
    while (j < y.length) push('insert', y[j++]!);
  }
  return { a, b, equal: a === b, parts };
}
