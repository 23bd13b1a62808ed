import { useState } from 'preact/hooks';
import { post } from './api.ts';
import { ErrorNote } from './ErrorNote.tsx';
import { money, shortId, time, tokens } from './format.ts';
import { McpTools } from './McpTools.tsx';
import { Link } from './router.tsx';
import { RunTimeline } from './RunTimeline.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import type { Run, SessionEvent, Step } from './types.ts';
import { useAction } from './use-action.ts';
import { useResource, useThrottled } from './use-resource.ts';
import { useStream } from './use-stream.ts';
import { WaitingRequests } from './WaitingRequests.tsx';

const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'timed_out']);

/** A run: its state, what it waits for, its actions, and its timeline, live over the run's stream. */
export function RunPage(props: { id: string }) {
  const run = useResource<Run>(`/v1/runs/${props.id}`);
  return (
    <section>
      <ErrorNote error={run.error} />
      {run.data && <RunView run={run.data} reloadRun={run.reload} nested={false} />}
    </section>
  );
}

function RunView(props: { run: Run; reloadRun: () => void; nested: boolean }) {
  const r = props.run;
  const steps = useResource<{ data: Step[] }>(`/v1/runs/${r.id}/steps`);
  const events = useResource<{ data: SessionEvent[] }>(`/v1/sessions/${r.session_id}/events?limit=1000`);
  const reload = useThrottled(() => {
    props.reloadRun();
    steps.reload();
    events.reload();
  }, 200);
  // Follows the run from the start (the stream sends what happened so far, then what happens).
  const live = useStream(props.nested || TERMINAL.has(r.status) ? null : `/v1/runs/${r.id}/stream`, 0, reload);
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
        </div>
        <dl class="totals">
          <dt>Tokens</dt>
          <dd data-testid="run-tokens">
            {tokens(r.usage.inputTokens)} in / {tokens(r.usage.outputTokens)} out
            {r.usage.cachedInputTokens ? ` (${tokens(r.usage.cachedInputTokens)} cached)` : ''}
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
      {!props.nested && <RunActions run={r} onDone={reload} />}
      {r.waiting && <WaitingRequests run={r} onDecided={reload} />}
      <McpTools run={r} />
      {streaming.map((m, i) => (
        <blockquote class="assistant-text streaming" data-testid="streaming" key={i}>
          {m.reasoning && <div class="muted">{m.reasoning}</div>}
          {m.text}
        </blockquote>
      ))}
      <h2>Timeline</h2>
      <ErrorNote error={steps.error} />
      {steps.data && <RunTimeline steps={steps.data.data} lifecycle={lifecycle} />}
      {r.child_run_ids.map((id) => (
        <ChildRun key={id} id={id} />
      ))}
    </div>
  );
}

/** A subagent's run, nested in its parent's timeline. */
function ChildRun(props: { id: string }) {
  const run = useResource<Run>(`/v1/runs/${props.id}`, { pollMs: 3000 });
  if (!run.data) return <ErrorNote error={run.error} />;
  return <RunView run={run.data} reloadRun={run.reload} nested />;
}

function RunActions(props: { run: Run; onDone: () => void }) {
  const act = useAction(props.onDone);
  const [steer, setSteer] = useState('');
  const r = props.run;
  const ended = TERMINAL.has(r.status);
  const action = (name: string) => () => void act.run(() => post(`/v1/runs/${r.id}/${name}`));
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
              await post(`/v1/runs/${r.id}/steer`, { content: steer.trim() });
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
