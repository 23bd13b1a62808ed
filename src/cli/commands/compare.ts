import {
  compareRuns,
  readComparedRun,
  Sessions,
  type Compared,
  type ComparedToolCall,
  type RunComparison,
  type TextDiff,
} from '../../session/index.ts';
import type { JsonValue, ToolOutput } from '../../model/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { clip, duration, openDb, table } from '../common.ts';

export const compareHelp = `keel compare <run-a> <run-b>   two runs side by side, step by step
  Aligned by step number: what changed in each request (model, settings, system prompt, tools,
  fingerprint), the assistant's text as a word diff ([-removed-]{+added+}), each tool call (name,
  arguments, result, executed or reused), the final answer, status, tokens, cost and latency.
  --json prints the comparison as GET /v1/runs/{a}/compare/{b} answers it.
  --db PATH (default $KEEL_DB or ./.keel/keel.db).`;

export async function compareCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('compare', argv, { db: { type: 'string' }, json: { type: 'boolean' } });
  const [a, b, ...more] = positionals;
  if (!a || !b || more.length > 0) throw new UsageError('compare: give two run ids, e.g. keel compare <run-a> <run-b>');
  const { store } = await openDb(io, values.db);
  try {
    const sessions = new Sessions({ store });
    const runs = await Promise.all(
      [a, b].map(async (id) => {
        const run = await store.runs.get(id);
        if (!run) throw new Error(`run ${id} does not exist`);
        return readComparedRun(sessions, run);
      }),
    );
    const c = compareRuns(runs[0]!, runs[1]!);
    if (values.json) json(io, c);
    else render(io, c);
    return 0;
  } finally {
    await store.close();
  }
}

/** A word diff inline: `[-removed-]` and `{+added+}`, as git's --word-diff writes it. */
export function inlineDiff(d: TextDiff): string {
  return d.parts
    .map((p) => (p.op === 'equal' ? p.text : p.op === 'delete' ? `[-${p.text}-]` : `{+${p.text}+}`))
    .join('');
}

/** A line diff's changed lines only (`-` in A, `+` in B), at most `max` of them. */
export function changedLines(d: TextDiff, max = 8): string {
  const changed = d.parts.flatMap((p) =>
    p.op === 'equal'
      ? []
      : p.text
          .split('\n')
          .filter((l) => l.trim() !== '')
          .map((l) => `${p.op === 'delete' ? '-' : '+'} ${clip(l, 100)}`),
  );
  const more = changed.length > max ? [`… ${changed.length - max} more changed lines (--json has them all)`] : [];
  return indent([...changed.slice(0, max), ...more].join('\n'));
}

const mark = (equal: boolean) => (equal ? '=' : '≠');
const show = <T>(v: Compared<T>, f: (x: T) => string = String) => [
  v.a === null ? '-' : f(v.a),
  v.b === null ? '-' : f(v.b),
  mark(v.equal),
];
const money = (n: number) => `$${n.toFixed(4)}`;
const ms = (n: number) => duration(n);

function output(o: ToolOutput | null): string {
  if (o === null) return '(no result)';
  if (o.type === 'error') return `error ${o.code}: ${o.message}`;
  return typeof o.value === 'string' ? o.value : JSON.stringify(o.value);
}

function call(side: ComparedToolCall['a']): string {
  if (!side) return '(none)';
  const args = clip(JSON.stringify(side.arguments as JsonValue), 60);
  return `${side.name} ${args} → ${clip(output(side.result), 60)} [${side.source}]`;
}

function render(io: Io, c: RunComparison): void {
  line(io, `A ${c.a.id}  ${c.a.agent.name}@${c.a.agent.version}  session ${c.a.sessionId}`);
  line(io, `B ${c.b.id}  ${c.b.agent.name}@${c.b.agent.version}  session ${c.b.sessionId}`);
  line(io);
  line(
    io,
    table(
      ['', 'A', 'B', ''],
      [
        ['status', ...show(c.status)],
        ['steps', String(c.a.steps), String(c.b.steps), mark(c.a.steps === c.b.steps)],
        ['input tokens', ...show(c.tokens.input)],
        ['output tokens', ...show(c.tokens.output)],
        ['cost', ...show(c.cost, money)],
        ['latency', ...show(c.latencyMs, ms)],
      ],
    ),
  );
  if (c.forkedAt !== null) {
    line(io);
    line(
      io,
      `one is a rerun of the other from step ${c.forkedAt}: the steps before it are shared context, not compared`,
    );
  }
  for (const s of c.steps) {
    line(io);
    const only = s.presentIn === 'both' ? '' : `  (only in ${s.presentIn.toUpperCase()})`;
    line(io, `step ${s.step}${only}`);
    const rows: string[][] = [];
    if (s.request) {
      const r = s.request;
      rows.push(['model', ...show(r.modelId)], ['provider', ...show(r.provider)]);
      rows.push(['settings', ...show(r.settings, (x) => clip(JSON.stringify(x), 40))]);
      rows.push(['system', ...show(r.system.hash, (h) => h.slice(0, 15))]);
      rows.push(['tools', ...show(r.tools.names, (n) => clip(n.join(', '), 40))]);
      rows.push(['fingerprint', ...show(r.fingerprint, (h) => h.slice(0, 15))]);
    }
    rows.push(['end', ...show(s.endReason)]);
    rows.push(['tokens in/out', ...tokens(s.tokens)]);
    rows.push(['cost', ...show(s.cost, money)], ['latency', ...show(s.latencyMs, ms)]);
    line(io, indent(table(['', 'A', 'B', ''], rows)));
    if (s.request?.system.diff) line(io, indent(`system prompt:\n${changedLines(s.request.system.diff)}`));
    if (s.request?.tools.diff) line(io, indent(`tool schemas:\n${changedLines(s.request.tools.diff)}`));
    if (s.text.a !== null || s.text.b !== null)
      line(io, indent(`text ${mark(s.text.equal)} ${s.text.equal ? (s.text.a ?? '') : inlineDiff(s.text)}`));
    for (const t of s.toolCalls) {
      const what =
        t.presentIn !== 'both'
          ? `only in ${t.presentIn.toUpperCase()}`
          : t.equal
            ? '='
            : ['name', 'arguments', 'result'].filter((k) => !t[k as 'name']).join(', ') + ' ≠';
      line(io, indent(`tool call ${t.index + 1} ${what}`));
      line(io, indent(`A ${call(t.a)}`, 4));
      line(io, indent(`B ${call(t.b)}`, 4));
    }
  }
  line(io);
  line(io, `final answer ${mark(c.finalAnswer.equal)}`);
  line(io, indent(c.finalAnswer.equal ? (c.finalAnswer.a ?? '') : inlineDiff(c.finalAnswer)));
}

function tokens(t: RunComparison['tokens']): string[] {
  const f = (i: number | null, o: number | null) => (i === null && o === null ? '-' : `${i ?? '-'}/${o ?? '-'}`);
  return [f(t.input.a, t.output.a), f(t.input.b, t.output.b), mark(t.input.equal && t.output.equal)];
}

const indent = (s: string, n = 2) =>
  s
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
