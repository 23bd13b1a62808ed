import type { RunStatus } from 'keel/client';
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { json, money, ms, oneLine, shortId, tokens } from './format.ts';
import { keel } from './keel.ts';
import { Link } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import type { Compared, ComparedRunSummary, ComparedStep, TextDiff, ToolCallSide, ToolOutput } from './types.ts';
import { useResource } from './use-resource.ts';

const TERMINAL = new Set<string>(['completed', 'failed', 'cancelled', 'timed_out'] satisfies RunStatus[]);

/**
 * Two runs side by side, step by step (GET /v1/runs/{a}/compare/{b}): the totals, the final answer,
 * and for each step the request, the assistant's text, the tool calls, end reason, tokens, cost and
 * latency, each marked same or different. Text only in A is struck out in red, text only in B is
 * green. Read again every 2 s until both runs have ended.
 */
export function ComparePage(props: { a: string; b: string }) {
  const [live, setLive] = useState(true);
  const cmp = useResource(
    `${props.a} ${props.b}`,
    (c) => keel().runs.compare(props.a, props.b, c),
    live ? { pollMs: 2000 } : {},
  );
  const c = cmp.data;
  useEffect(() => {
    if (c && TERMINAL.has(c.a.status) && TERMINAL.has(c.b.status)) setLive(false);
  }, [c]);
  if (!c) return <ErrorNote error={cmp.error} />;
  return (
    <section class="compare">
      <div class="row spread">
        <h1>Compare runs</h1>
        <Link to={`/compare/${c.b.id}/${c.a.id}`}>swap A and B</Link>
      </div>
      <ErrorNote error={cmp.error} />
      <div class="pair">
        <RunSide label="A" run={c.a} />
        <RunSide label="B" run={c.b} />
      </div>
      <h2>Totals</h2>
      <table class="list compare-table" data-testid="compare-totals">
        <SidesHead />
        <tbody>
          <Row label="Status" v={c.status} show={(s) => <StatusBadge status={s} />} />
          <Row label="Tokens in" v={c.tokens.input} show={tokens} />
          <Row label="Tokens out" v={c.tokens.output} show={tokens} />
          <Row label="Cost" v={c.cost} show={money} />
          <Row label="Latency" v={c.latencyMs} show={ms} />
        </tbody>
      </table>
      <h2>
        Final answer <Mark equal={c.finalAnswer.equal} />
      </h2>
      <Diff diff={c.finalAnswer} testid="final-answer" />
      <h2>Steps</h2>
      {c.forkedAt !== null && (
        <p class="empty" data-testid="forked-at">
          One run is a rerun of the other from step {c.forkedAt}: the steps before it are the context both share, not
          compared.
        </p>
      )}
      {c.steps.length === 0 && <p class="empty">Neither run has a step yet.</p>}
      {c.steps.map((s, i) => (
        <StepBlock key={s.step} step={s} openSystem={s.presentIn === 'both' && newSystemDiff(s, c.steps[i - 1])} />
      ))}
    </section>
  );
}

function RunSide(props: { label: string; run: ComparedRunSummary }) {
  const r = props.run;
  return (
    <div class="card" data-testid={`side-${props.label.toLowerCase()}`}>
      <h3>
        {props.label}: <Link to={`/runs/${r.id}`}>run {shortId(r.id)}</Link>
      </h3>
      <div class="row">
        <StatusBadge status={r.status} />
        <span>
          {r.agent.name}@{r.agent.version}
        </span>
        <span class="muted">
          turn {r.turn ?? '–'} · {r.steps} {r.steps === 1 ? 'step' : 'steps'}
        </span>
        <Link to={`/sessions/${r.sessionId}`}>session {shortId(r.sessionId)}</Link>
      </div>
    </div>
  );
}

function Mark(props: { equal: boolean }) {
  return props.equal ? <span class="mark same">= same</span> : <span class="mark differs">≠ differs</span>;
}

function SidesHead() {
  return (
    <thead>
      <tr>
        <th />
        <th>A</th>
        <th>B</th>
        <th />
      </tr>
    </thead>
  );
}

/** A compared value: A's, B's, and whether they are the same (not marked when only one run has it: `alone`). */
function Row<T>(props: { label: string; v: Compared<T>; show: (x: T) => ComponentChildren; alone?: boolean }) {
  const { a, b, equal } = props.v;
  return (
    <tr class={equal || props.alone ? '' : 'differs'} data-testid="compare-row">
      <th>{props.label}</th>
      <td>{a === null ? '–' : props.show(a)}</td>
      <td>{b === null ? '–' : props.show(b)}</td>
      <td>{!props.alone && <Mark equal={equal} />}</td>
    </tr>
  );
}

/**
 * A text of each run side by side: A's with what only it has struck out, B's with what only it has
 * in green (`lines`: a line diff, for prompts and schemas). The same text is shown once; a text only
 * one run has is shown plain, beside "Not in …".
 */
function Diff(props: { diff: TextDiff; testid?: string; lines?: boolean }) {
  const d = props.diff;
  const Block = props.lines ? 'pre' : 'blockquote';
  const cls = props.lines ? 'args diff' : 'assistant-text diff';
  if (d.equal)
    return d.a ? (
      <Block class={cls} data-testid={props.testid}>
        {d.a}
      </Block>
    ) : (
      <p class="empty" data-testid={props.testid}>
        No text in either run.
      </p>
    );
  const side = (which: 'a' | 'b') => {
    const text = d[which];
    if (text === null) return <p class="empty">Not in {which.toUpperCase()}.</p>;
    if (d[which === 'a' ? 'b' : 'a'] === null)
      return (
        <Block class={cls} data-testid={`diff-${which}`}>
          {text}
        </Block>
      );
    const parts = d.parts.filter((p) => p.op !== (which === 'a' ? 'insert' : 'delete'));
    return (
      <Block class={cls} data-testid={`diff-${which}`}>
        {parts.map((p, i) =>
          p.op === 'delete' ? <del key={i}>{p.text}</del> : p.op === 'insert' ? <ins key={i}>{p.text}</ins> : p.text,
        )}
      </Block>
    );
  };
  return (
    <div class="pair" data-testid={props.testid}>
      {side('a')}
      {side('b')}
    </div>
  );
}

/** Whether a step's system prompt diff is not the one the step before showed. */
function newSystemDiff(s: ComparedStep, before: ComparedStep | undefined): boolean {
  const d = s.request?.system.diff;
  const p = before?.presentIn === 'both' ? before.request?.system.diff : undefined;
  return !!d && !(p && p.a === d.a && p.b === d.b);
}

const hash = (h: string) => h.replace(/^sha256:/, '').slice(0, 12);

/**
 * One step of both runs. `openSystem`: the system prompt's diff is shown open (only where it is not
 * the same as the step before's, so that a changed prompt is not repeated in every step).
 */
function StepBlock(props: { step: ComparedStep; openSystem: boolean }) {
  const s = props.step;
  const alone = s.presentIn !== 'both';
  const q = s.request;
  const model = (side: 'a' | 'b') =>
    q?.provider[side] !== null && q?.provider[side] !== undefined ? `${q.provider[side]}:${q.modelId[side]}` : null;
  return (
    <article class={`card compare-step only-${s.presentIn}`} data-testid="compare-step">
      <h3>
        Step {s.step}{' '}
        {s.presentIn === 'both' ? (
          <Mark equal={isSame(s)} />
        ) : (
          <span class="badge only">only in {s.presentIn.toUpperCase()}</span>
        )}
      </h3>
      {q && (
        <table class="list compare-table">
          <SidesHead />
          <tbody>
            <Row
              alone={alone}
              label="Model"
              v={{ a: model('a'), b: model('b'), equal: q.provider.equal && q.modelId.equal }}
              show={(m) => <span class="mono">{m}</span>}
            />
            <Row
              alone={alone}
              label="Settings"
              v={q.settings}
              show={(x) => <span class="mono">{oneLine(x, 200)}</span>}
            />
            <Row
              alone={alone}
              label="System prompt"
              v={q.system.hash}
              show={(h) => <span class="mono">{hash(h)}</span>}
            />
            <Row
              alone={alone}
              label="Tools"
              v={q.tools.names}
              show={(n) => <span class="mono">{n.join(', ') || '–'}</span>}
            />
            <Row
              alone={alone}
              label="Fingerprint"
              v={q.fingerprint}
              show={(h) => <span class="mono">{hash(h)}</span>}
            />
          </tbody>
        </table>
      )}
      {q?.system.diff && (
        <details open={props.openSystem}>
          <summary>system prompt</summary>
          <Diff diff={q.system.diff} lines />
        </details>
      )}
      {q?.tools.diff && (
        <details>
          <summary>tool schemas</summary>
          <Diff diff={q.tools.diff} lines />
        </details>
      )}
      <div class="row">
        <span class="kind">assistant text</span>
        {s.presentIn === 'both' && <Mark equal={s.text.equal} />}
      </div>
      <Diff diff={s.text} testid="step-text" />
      {s.toolCalls.map((t) => (
        <div class="tool-call" data-testid="compare-call" key={t.index}>
          <div class="row">
            <span class="kind">tool call {t.index + 1}</span>
            {t.presentIn === 'both' ? (
              <Mark equal={t.equal} />
            ) : (
              <span class="badge only">only in {t.presentIn.toUpperCase()}</span>
            )}
          </div>
          <div class="pair">
            <CallSide label="A" call={t.a} same={t.presentIn === 'both' ? t : ALONE} />
            <CallSide label="B" call={t.b} same={t.presentIn === 'both' ? t : ALONE} />
          </div>
        </div>
      ))}
      <table class="list compare-table">
        <SidesHead />
        <tbody>
          <Row alone={alone} label="End reason" v={s.endReason} show={(x) => x} />
          <Row alone={alone} label="Tokens in" v={s.tokens.input} show={tokens} />
          <Row alone={alone} label="Tokens out" v={s.tokens.output} show={tokens} />
          <Row alone={alone} label="Cost" v={s.cost} show={money} />
          <Row alone={alone} label="Latency" v={s.latencyMs} show={ms} />
        </tbody>
      </table>
    </article>
  );
}

/** A step is the same in both runs when what was sent, said and done is (not its tokens, cost or timing). */
const isSame = (s: ComparedStep) =>
  (s.request === null || s.request.fingerprint.equal) &&
  s.text.equal &&
  s.toolCalls.every((t) => t.equal) &&
  s.endReason.equal;

/** A call only one run made is marked as such, not field by field. */
const ALONE = { name: true, arguments: true, result: true };

function CallSide(props: {
  label: string;
  call: ToolCallSide | null;
  same: { name: boolean; arguments: boolean; result: boolean };
}) {
  const c = props.call;
  if (!c) return <p class="call-side empty">No call in {props.label}.</p>;
  const differs = (equal: boolean) => (equal ? 'mono' : 'mono differs');
  const output = (c.result ?? null) as ToolOutput | null;
  const result = output === null ? '–' : oneLine(output.value ?? output.reason ?? output, 300);
  return (
    <div class="call-side" data-testid={`call-${props.label.toLowerCase()}`}>
      <div>
        <span class="muted">{props.label}</span>{' '}
        <strong class={props.same.name ? 'tool-name' : 'tool-name differs'}>{c.name}</strong>
        <span
          class={`badge source-${c.source}`}
          data-testid="call-source"
          title={
            c.source === 'reused'
              ? "the source run's recorded result, served again"
              : c.source === 'mocked'
                ? 'a mock result from the rerun request'
                : 'the tool ran'
          }
        >
          {c.source}
        </span>
        {c.durationMs !== null && <span class="muted"> · {ms(c.durationMs)}</span>}
      </div>
      <div class={differs(props.same.arguments)} title={json(c.arguments)}>
        args: {oneLine(c.arguments, 200)}
      </div>
      <div class={differs(props.same.result)} title={output === null ? undefined : json(output)}>
        result: {result}
      </div>
    </div>
  );
}
