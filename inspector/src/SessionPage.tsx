import type { KeelEvent, SendMessage, Session } from 'keel/client';
import { useState } from 'preact/hooks';
import { BranchTree } from './BranchTree.tsx';
import { ErrorNote } from './ErrorNote.tsx';
import { json, money, oneLine, shortId, time } from './format.ts';
import { keel } from './keel.ts';
import { Link, navigate } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import { textOfContent } from './text-of.ts';
import type { ModelContext, TranscriptItem } from './types.ts';
import { useAction } from './use-action.ts';
import { useResource, useThrottled } from './use-resource.ts';
import { useStream } from './use-stream.ts';

/**
 * A session: its runs, its branch tree, and side by side what people saw (transcript), what the
 * model sees next (context) and the raw log; live over the session's stream.
 */
export function SessionPage(props: { id: string }) {
  const id = props.id;
  const session = useResource(id, (c) => keel().sessions.get(id, c));
  const runs = useResource(id, (c) => keel().sessions.runs(id, { limit: 1000 }, c));
  const transcript = useResource(id, async (c) => (await keel().sessions.transcript(id, c)).items as TranscriptItem[]);
  const context = useResource(id, async (c) => (await keel().sessions.context(id, c)) as ModelContext);
  const events = useResource(id, (c) => keel().sessions.events(id, { limit: 1000 }, c));
  const reload = useThrottled(() => {
    session.reload();
    runs.reload();
    transcript.reload();
    context.reload();
    events.reload();
  }, 250);
  // Follows the session from the seq first read: each durable event reloads the views; text streams in.
  const [startSeq] = useState<{ seq?: number }>({});
  if (startSeq.seq === undefined && session.data) startSeq.seq = session.data.last_seq;
  const live = useStream(startSeq.seq !== undefined ? { sessionId: id } : null, reload, startSeq.seq);
  const s = session.data;
  if (!s) return <ErrorNote error={session.error} />;
  const entries = (events.data?.data ?? []).filter((e) => e.entry);
  const streaming = [...live.streaming.values()].filter((m) => m.text !== '');
  const totalCost = (runs.data?.data ?? []).reduce((t, r) => t + r.cost, 0);
  return (
    <section>
      <h1>{s.title ?? <em>untitled session</em>}</h1>
      <div class="row muted">
        <span class="mono">{s.id}</span>
        <span>agent {s.agent ?? 'default'}</span>
        <span>{s.last_seq} events</span>
        <span>leaf {s.leaf_id ? shortId(s.leaf_id) : '–'}</span>
        <span>cost {money(totalCost)}</span>
        {s.origin && <Link to={`/sessions/${s.origin.session_id}`}>forked from {shortId(s.origin.session_id)}</Link>}
        {s.archived_at && <span class="badge">archived</span>}
        {live.reconnecting && <span class="badge">reconnecting…</span>}
      </div>
      <ErrorNote error={live.error} />
      <SessionActions session={s} onDone={reload} />
      <h2>Runs</h2>
      <ul class="runs">
        {(runs.data?.data ?? []).map((r) => (
          <li key={r.id} data-testid="run-row">
            <Link to={`/runs/${r.id}`}>run {shortId(r.id)}</Link> <StatusBadge status={r.status} />{' '}
            <span class="muted">
              turn {r.turn ?? '–'} · {time(r.created_at)} · {money(r.cost)}
            </span>
          </li>
        ))}
        {runs.data?.data.length === 0 && <li class="empty">No runs yet: send a message.</li>}
      </ul>
      <h2>Branch tree</h2>
      <Tree session={s} entries={entries} onDone={reload} />
      <div class="columns">
        <div class="column">
          <h2>Transcript</h2>
          <ol class="transcript" data-testid="transcript">
            {(transcript.data ?? []).map((t, i) => (
              <li key={i} class={`msg msg-${t.kind}`}>
                <span class="kind">{t.kind}</span> {t.text ?? oneLine(t)}
                {t.tools?.map((x) => (
                  <div key={x.toolCallId} class="muted mono">
                    ↳ {x.toolName}: {x.status}
                    {x.error ? ` (${x.error})` : ''}
                  </div>
                ))}
              </li>
            ))}
            {streaming.map((m, i) => (
              <li key={`live${i}`} class="msg msg-assistant streaming" data-testid="streaming">
                <span class="kind">assistant</span> {m.text}
              </li>
            ))}
          </ol>
        </div>
        <div class="column">
          <h2>Model context</h2>
          {context.data && (
            <p class="muted">
              {context.data.messages.length} messages · ~{context.data.tokens} tokens
              {context.data.omitted ? ` · ${context.data.omitted} omitted` : ''}
            </p>
          )}
          <ol class="context" data-testid="context">
            {(context.data?.messages ?? []).map((m, i) => (
              <li key={i} class={`msg msg-${m.role}`}>
                <span class="kind">{m.role}</span> {oneLine(textOfContent(m.content) || m.content, 300)}
              </li>
            ))}
          </ol>
        </div>
        <div class="column">
          <h2>Event log</h2>
          <table class="events" data-testid="event-log">
            <tbody>
              {(events.data?.data ?? []).map((e) => (
                <tr key={e.seq}>
                  <td class="seq">{e.seq}</td>
                  <td class="kind">{e.type}</td>
                  <td>
                    <details>
                      <summary class="mono">{oneLine(e.data, 60)}</summary>
                      <pre class="args">{json(e)}</pre>
                    </details>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {events.data?.next_cursor && <p class="muted">The first 1,000 events are shown.</p>}
        </div>
      </div>
    </section>
  );
}

function Tree(props: { session: Session; entries: KeelEvent[]; onDone: () => void }) {
  const act = useAction(props.onDone);
  const id = props.session.id;
  return (
    <div>
      <ErrorNote error={act.error} />
      <BranchTree
        entries={props.entries}
        leafId={props.session.leaf_id}
        onLeaf={(entry) => void act.run(() => keel().sessions.setLeaf(id, entry))}
        onFork={(entry, into) =>
          void act.run(async () => {
            const r = await keel().sessions.fork(id, { entry_id: entry, into });
            if (r.session_id !== id) navigate(`/sessions/${r.session_id}`);
          })
        }
      />
    </div>
  );
}

type IfBusy = NonNullable<SendMessage['if_busy']>;

/** Send a message, compact, export, check the replay. */
function SessionActions(props: { session: Session; onDone: () => void }) {
  const id = props.session.id;
  const [message, setMessage] = useState('');
  const [ifBusy, setIfBusy] = useState<IfBusy>('enqueue');
  const [verdict, setVerdict] = useState<string | undefined>(undefined);
  const act = useAction(props.onDone);
  const exportJsonl = async () => {
    // A download link cannot send the API key: read it, then save it.
    const jsonl = await keel().sessions.export(id);
    const url = URL.createObjectURL(new Blob([jsonl], { type: 'application/x-ndjson' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `${id}.jsonl`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };
  return (
    <div class="actions">
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (message.trim() === '') return;
          void act.run(async () => {
            await keel().sessions.send(id, { content: message.trim(), if_busy: ifBusy });
            setMessage('');
          });
        }}
      >
        <input
          class="grow"
          aria-label="Message"
          placeholder="Send a message…"
          value={message}
          onInput={(e) => setMessage(e.currentTarget.value)}
        />
        <select
          aria-label="If a run is active"
          value={ifBusy}
          onChange={(e) => setIfBusy(e.currentTarget.value as IfBusy)}
        >
          <option value="enqueue">if busy: enqueue</option>
          <option value="steer">if busy: steer</option>
          <option value="interrupt">if busy: interrupt</option>
          <option value="reject">if busy: reject</option>
        </select>
        <button type="submit" disabled={act.busy}>
          Send
        </button>
      </form>
      <div class="row">
        <button
          class="secondary"
          disabled={act.busy}
          onClick={() => void act.run(async () => setVerdict(describeCompaction(await keel().sessions.compact(id))))}
        >
          Compact
        </button>
        <button class="secondary" disabled={act.busy} onClick={() => void act.run(exportJsonl)}>
          Export JSONL
        </button>
        <button
          class="secondary"
          disabled={act.busy}
          onClick={() =>
            void act.run(async () => {
              const v = await keel().sessions.replayCheck(id);
              setVerdict(
                v.ok
                  ? `Replay check passed: the log explains all ${v.requests} model requests (${v.events} events).`
                  : `Replay check FAILED: ${v.mismatches.length} of ${v.requests} requests do not match: ${v.mismatches.map((m) => `#${m.seq} ${m.kind}: ${m.detail}`).join('; ')}`,
              );
            })
          }
        >
          Replay check
        </button>
        {verdict && (
          <span class="verdict" data-testid="verdict">
            {verdict}
          </span>
        )}
      </div>
      <ErrorNote error={act.error} />
    </div>
  );
}

function describeCompaction(r: unknown): string {
  const c = r as { compacted: boolean; reason?: string; tokens_before?: number; tokens_after?: number };
  return c.compacted
    ? `Compacted: ${c.tokens_before} → ${c.tokens_after} tokens.`
    : `Not compacted: ${c.reason ?? 'nothing to do'}.`;
}
