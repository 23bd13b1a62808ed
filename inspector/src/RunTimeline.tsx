import type { KeelEvent } from 'keel/client';
import { json, ms, money, oneLine, tokens } from './format.ts';
import type { Step } from './types.ts';

/**
 * A run's steps, in order: each model call (model, attempt, latency, tokens, cost, the request
 * header), retries and errors, the assistant's text, each tool call (arguments, approval,
 * result, duration); with the run's lifecycle (status changes, interruptions and recoveries).
 */
export function RunTimeline(props: { steps: Step[]; lifecycle: KeelEvent[] }) {
  const items: Array<{ at: number; node: preact.JSX.Element }> = [];
  for (const e of props.lifecycle)
    items.push({ at: Date.parse(e.time), node: <LifecycleItem key={`e${e.seq}`} event={e} /> });
  for (const s of props.steps) items.push({ at: s.startedAt, node: <StepItem key={`s${s.step}`} step={s} /> });
  items.sort((a, b) => a.at - b.at);
  if (items.length === 0) return <p class="empty">No steps yet.</p>;
  return <ol class="timeline">{items.map((i) => i.node)}</ol>;
}

function LifecycleItem(props: { event: KeelEvent }) {
  const d = props.event.data as {
    from?: string | null;
    to?: string;
    attempt?: number;
    reason?: string;
    step?: number;
    error?: unknown;
  };
  const text =
    props.event.type === 'run/interrupted'
      ? `interrupted (${d.reason ?? '?'}) at attempt ${d.attempt ?? '?'}, after step ${d.step ?? '?'}: another worker recovers it`
      : `${d.from ?? 'new'} → ${d.to ?? '?'}${d.attempt !== undefined ? ` · attempt ${d.attempt}` : ''}${d.reason ? ` · ${d.reason}` : ''}`;
  return (
    <li class={`lifecycle ${props.event.type === 'run/interrupted' ? 'recovery' : ''}`} data-testid="lifecycle">
      <span class="seq">#{props.event.seq}</span>{' '}
      <span class="kind">{props.event.type === 'run/interrupted' ? 'recovery' : 'status'}</span> {text}
      {d.error !== undefined && <pre class="args">{json(d.error)}</pre>}
    </li>
  );
}

function StepItem(props: { step: Step }) {
  const s = props.step;
  const a = s.assistant;
  return (
    <li class="step" data-testid="step">
      <h3>
        Step {s.step}
        <span class="muted">
          {' '}
          · {s.endedAt !== undefined ? ms(s.endedAt - s.startedAt) : 'running'}
          {s.endReason ? ` · ${s.endReason}` : ''}
        </span>
      </h3>
      {s.requests.map((r) => {
        const usage = a && a.messageId === r.messageId ? a.usage : undefined;
        return (
          <div class="model-call" data-testid="model-call" key={r.seq}>
            <div>
              <span class="kind">model call</span> <strong>{r.modelId}</strong>{' '}
              <span class="muted">({r.provider})</span> · attempt {r.attempt}
              {a && a.messageId === r.messageId && (
                <>
                  {' '}
                  · {ms(a.timing.durationMs)}{' '}
                  {a.timing.firstChunkMs !== undefined && (
                    <span class="muted">(first chunk {ms(a.timing.firstChunkMs)})</span>
                  )}{' '}
                  · {tokens(usage?.inputTokens)} in / {tokens(usage?.outputTokens)} out · {money(a.cost)} ·{' '}
                  {a.finishReason}
                  {a.interrupted && <span class="error"> · interrupted</span>}
                </>
              )}
            </div>
            <details>
              <summary>request header #{r.seq}</summary>
              <pre class="args">{json(r)}</pre>
            </details>
          </div>
        );
      })}
      {s.retries.map((r) => (
        <div class="retry" key={`r${r.seq}`}>
          <span class="kind">retry</span> attempt {r.attempt} after {ms(r.delayMs)}: {r.error.kind}: {r.error.message}
        </div>
      ))}
      {s.errors.map((r) => (
        <div class="retry error" key={`x${r.seq}`}>
          <span class="kind">error</span> attempt {r.attempt}: {r.error.kind}: {r.error.message}
        </div>
      ))}
      {a && a.text && <blockquote class="assistant-text">{a.text}</blockquote>}
      {s.tools.map((t) => (
        <div class="tool-call" data-testid="tool-call" key={t.toolCallId}>
          <div>
            <span class="kind">tool call</span> <strong>{t.toolName}</strong>
            {t.approval && <span class={`approval approval-${t.approval}`}> · {t.approval}</span>}
            {t.outcomeUnknown && (
              <span
                class="error outcome-unknown"
                data-testid="outcome-unknown"
                title="the run was interrupted while this call ran: it may or may not have taken effect"
              >
                {' '}
                · outcome unknown ({t.outcomeUnknown.resolution.replaceAll('_', ' ')})
              </span>
            )}
            {t.durationMs !== undefined && <span class="muted"> · {ms(t.durationMs)}</span>}
          </div>
          <div class="mono">args: {oneLine(t.input, 200)}</div>
          {t.output !== undefined && (
            <div class="mono">result: {oneLine(t.output.value ?? t.output.reason ?? t.output, 300)}</div>
          )}
        </div>
      ))}
    </li>
  );
}
