import type { Run, RunStatus } from 'keel/client';
import { useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { money, oneLine, shortId, time, tokens } from './format.ts';
import { keel } from './keel.ts';
import { McpTools } from './McpTools.tsx';
import { Link, navigate } from './router.tsx';
import { RunTimeline } from './RunTimeline.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import type { RerunLineage, RerunTools, Step, Usage } from './types.ts';
import { useAction } from './use-action.ts';
import { useResource, useThrottled } from './use-resource.ts';
import { useStream } from './use-stream.ts';
import { WaitingRequests } from './WaitingRequests.tsx';

const TERMINAL = new Set<RunStatus>(['completed', 'failed', 'cancelled', 'timed_out']);

/** A run: its state, what it waits for, its actions, and its timeline, live over the run's stream. */
export function RunPage(props: { id: string }) {
  const run = useResource(props.id, (c) => keel().runs.get(props.id, c));
  return (
    <section>
      <ErrorNote error={run.error} />
      {run.data && <RunView run={run.data} reloadRun={run.reload} nested={false} />}
    </section>
  );
}

function RunView(props: { run: Run; reloadRun: () => void; nested: boolean }) {
  const r = props.run;
  const steps = useResource(r.id, async (c) => (await keel().runs.steps(r.id, c)).data as Step[]);
  const events = useResource(r.session_id, (c) => keel().sessions.events(r.session_id, { limit: 1000 }, c));
  const reload = useThrottled(() => {
    props.reloadRun();
    steps.reload();
    events.reload();
  }, 200);
  // Follows the run from the start (the stream sends what happened so far, then what happens).
  const live = useStream(props.nested || TERMINAL.has(r.status) ? null : { runId: r.id }, reload);
  const usage = r.usage as Usage;
  const lifecycle = (events.data?.data ?? []).filter(
    (e) => e.run_id === r.id && (e.type === 'run/status' || e.type === 'run/interrupted'),
  );
  const streaming = [...live.streaming.values()].filter((m) => m.text !== '' || m.reasoning !== '');
  return (
    <div class={props.nested ? 'run nested' : 'run'}>
      <header class="run-header">
        {!props.nested && <h1>Run {shortId(r.id)}</h1>}
        {props.nested && (
          <h3>
            Subagent run <Link to={`/runs/${r.id}`}>{shortId(r.id)}</Link>
          </h3>
        )}
        <div class="row">
          <StatusBadge status={r.status} />
          <span>
            {r.agent.name}@{r.agent.version}
          </span>
          <span class="muted">turn {r.turn ?? '–'}</span>
          <span class="muted">attempt {r.attempt}</span>
          <Link to={`/sessions/${r.session_id}`}>session {shortId(r.session_id)}</Link>
          {r.parent_run_id && <Link to={`/runs/${r.parent_run_id}`}>parent run</Link>}
          {live.reconnecting && <span class="badge">reconnecting…</span>}
        </div>
        {r.rerun_of && <RerunOf run={r} rerunOf={r.rerun_of} />}
        <dl class="totals">
          <dt>Tokens</dt>
          <dd data-testid="run-tokens">
            {tokens(usage.inputTokens)} in / {tokens(usage.outputTokens)} out
            {usage.cachedInputTokens ? ` (${tokens(usage.cachedInputTokens)} cached)` : ''}
          </dd>
          <dt>Cost</dt>
          <dd>{money(r.cost)}</dd>
          <dt>Created</dt>
          <dd>{time(r.created_at)}</dd>
          <dt>Started</dt>
          <dd>{time(r.started_at)}</dd>
          <dt>Ended</dt>
          <dd>{time(r.ended_at)}</dd>
          {r.lease && (
            <>
              <dt>Lease</dt>
              <dd class="mono">
                {r.lease.owner} until {time(r.lease.expires_at)}
              </dd>
            </>
          )}
        </dl>
        {r.error && <pre class="args error">{JSON.stringify(r.error, null, 2)}</pre>}
      </header>
      <ErrorNote error={live.error} />
      {!props.nested && <RunActions run={r} onDone={reload} />}
      {!props.nested && TERMINAL.has(r.status) && <RerunForm run={r} steps={steps.data} />}
      {r.waiting && <WaitingRequests run={r} onDecided={reload} />}
      <McpTools run={r} />
      {streaming.map((m, i) => (
        <blockquote class="assistant-text streaming" data-testid="streaming" key={i}>
          {m.reasoning && <div class="muted">{m.reasoning}</div>}
          {m.text}
        </blockquote>
      ))}
      {!props.nested && <Reruns run={r} />}
      <h2>Timeline</h2>
      <ErrorNote error={steps.error} />
      {steps.data && <RunTimeline steps={steps.data} lifecycle={lifecycle} />}
      {r.child_run_ids.map((id) => (
        <ChildRun key={id} id={id} />
      ))}
    </div>
  );
}

/** A subagent's run, nested in its parent's timeline. */
function ChildRun(props: { id: string }) {
  const run = useResource(props.id, (c) => keel().runs.get(props.id, c), { pollMs: 3000 });
  if (!run.data) return <ErrorNote error={run.error} />;
  return <RunView run={run.data} reloadRun={run.reload} nested />;
}

function RunActions(props: { run: Run; onDone: () => void }) {
  const act = useAction(props.onDone);
  const [steer, setSteer] = useState('');
  const r = props.run;
  const ended = TERMINAL.has(r.status);
  const action = (name: 'cancel' | 'pause' | 'resume') => () => void act.run(() => keel().runs[name](r.id));
  return (
    <div class="actions">
      <div class="row">
        <button class="danger" disabled={ended || act.busy} onClick={action('cancel')}>
          Cancel
        </button>
        <button class="secondary" disabled={ended || r.status === 'paused' || act.busy} onClick={action('pause')}>
          Pause
        </button>
        <button class="secondary" disabled={r.status !== 'paused' || act.busy} onClick={action('resume')}>
          Resume
        </button>
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            if (steer.trim() === '') return;
            void act.run(async () => {
              await keel().runs.steer(r.id, steer.trim());
              setSteer('');
            });
          }}
        >
          <input
            aria-label="Steer the run"
            placeholder="Steer: input for the next step"
            value={steer}
            disabled={ended}
            onInput={(e) => setSteer(e.currentTarget.value)}
          />
          <button type="submit" class="secondary" disabled={ended || act.busy}>
            Steer
          </button>
        </form>
      </div>
      <ErrorNote error={act.error} />
    </div>
  );
}

/** Where a rerun came from: its source run and step, the agent it ran on, how its tools were served. */
function RerunOf(props: { run: Run; rerunOf: string }) {
  const r = props.run;
  const l = r.rerun;
  return (
    <p class="lineage" data-testid="rerun-of">
      Rerun of <Link to={`/runs/${props.rerunOf}`}>run {shortId(props.rerunOf)}</Link>
      {l && (
        <>
          {' '}
          from step {l.of.step} on {l.agent.name}@{l.agent.version}{' '}
          <span class="muted">
            · {toolPolicies(l.tools)}
            {l.overrides ? ` · overrides ${oneLine(l.overrides, 160)}` : ''}
            {l.message_replaced ? ' · message replaced' : ''}
          </span>
        </>
      )}{' '}
      · <Link to={`/compare/${props.rerunOf}/${r.id}`}>Compare with source</Link>
    </p>
  );
}

function toolPolicies(policies: RerunLineage['tools']): string {
  const t = policies as RerunTools;
  const named = Object.entries(t.tools ?? {}).map(([name, p]) => `${name} ${p.mode}`);
  const base = t.default ? `tools ${t.default}` : 'tools by default policy';
  return named.length > 0 ? `${base}, ${named.join(', ')}` : base;
}

/** Reruns the API lists for a run at once. */
const RERUNS = 100;

/** The runs that re-run this one, each with a link to compare it with this run. */
function Reruns(props: { run: Run }) {
  const id = props.run.id;
  // Reruns live in other sessions: no stream of this run tells of them, so the list is read every 3 s.
  const reruns = useResource(id, (c) => keel().runs.list({ rerun_of: id, limit: RERUNS }, c), { pollMs: 3000 });
  const rows = reruns.data?.data ?? [];
  if (rows.length === 0) return <ErrorNote error={reruns.error} />;
  return (
    <section data-testid="reruns">
      <h2>Reruns</h2>
      <ErrorNote error={reruns.error} />
      <table class="list">
        <thead>
          <tr>
            <th>Run</th>
            <th>Agent</th>
            <th>From step</th>
            <th>Status</th>
            <th>Created</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {rows.map((x) => (
            <tr key={x.id} data-testid="rerun-row">
              <td>
                <Link to={`/runs/${x.id}`}>run {shortId(x.id)}</Link>
              </td>
              <td>
                {x.agent.name}@{x.agent.version}
              </td>
              <td>{x.rerun?.of.step ?? '–'}</td>
              <td>
                <StatusBadge status={x.status} />
              </td>
              <td>{time(x.created_at)}</td>
              <td>
                <Link to={`/compare/${id}/${x.id}`}>compare</Link>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {reruns.data?.next_cursor && <p class="muted">The first {RERUNS} reruns are shown.</p>}
    </section>
  );
}

/** How the rerun form serves the tools: the default policy (''), or every call reused or executed. */
type ToolsChoice = '' | 'reuse' | 'execute';

/** Reruns a finished run from one of its steps, on another agent version, tools reused or executed; opens the rerun. */
function RerunForm(props: { run: Run; steps: Step[] | undefined }) {
  const r = props.run;
  const [from, setFrom] = useState('');
  const [agent, setAgent] = useState('');
  const [tools, setTools] = useState<ToolsChoice>('');
  const act = useAction();
  return (
    <div class="actions">
      <form
        class="row"
        data-testid="rerun-form"
        onSubmit={(e) => {
          e.preventDefault();
          void act.run(async () => {
            const rerun = await keel().runs.rerun(r.id, {
              ...(from !== '' ? { from: Number(from) } : {}),
              ...(agent.trim() !== '' ? { agent: agent.trim() } : {}),
              ...(tools !== '' ? { tools } : {}),
            });
            navigate(`/runs/${rerun.id}`);
          });
        }}
      >
        <select aria-label="Rerun from step" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
          <option value="">from the first step</option>
          {(props.steps ?? []).map((s) => (
            <option key={s.step} value={String(s.step)}>
              from step {s.step}
            </option>
          ))}
        </select>
        <input
          class="rerun-agent"
          aria-label="Rerun on agent"
          placeholder={`on ${r.agent.name}@${r.agent.version} (name@version)`}
          value={agent}
          onInput={(e) => setAgent(e.currentTarget.value)}
        />
        <select aria-label="Rerun tools" value={tools} onChange={(e) => setTools(e.currentTarget.value as ToolsChoice)}>
          <option value="">tools: read-only run, others reuse</option>
          <option value="reuse">tools: reuse recorded results</option>
          <option value="execute">tools: execute again</option>
        </select>
        <button type="submit" class="secondary" disabled={act.busy}>
          Rerun
        </button>
      </form>
      <ErrorNote error={act.error} />
    </div>
  );
}
