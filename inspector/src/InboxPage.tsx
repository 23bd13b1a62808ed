import { ErrorNote } from './ErrorNote.tsx';
import { shortId, time } from './format.ts';
import { keel } from './keel.ts';
import { Link } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import { useResource } from './use-resource.ts';
import { WaitingRequests } from './WaitingRequests.tsx';

/** Waiting runs the inbox shows at once (the API's largest page). */
const PAGE = 1000;

/** Every run, across sessions, that waits for a person: decide it right here. */
export function InboxPage() {
  // No stream spans sessions: the inbox asks again every 2 s (GET /v1/inbox, its first page: the oldest).
  const inbox = useResource('inbox', (c) => keel().inbox.list({ limit: PAGE }, c), { pollMs: 2000 });
  return (
    <section>
      <h1>Inbox</h1>
      <p class="muted">Runs waiting for an approval or an answer, across all sessions, oldest first.</p>
      <ErrorNote error={inbox.error} />
      {inbox.data?.data.length === 0 && <p class="empty">Nothing is waiting for you.</p>}
      {inbox.data?.next_cursor && <p class="muted">The {PAGE} oldest are shown; more are waiting after them.</p>}
      {inbox.data?.data.map((item) => (
        <article class="card inbox-item" key={item.run.id} data-testid="inbox-item">
          <header class="row">
            <StatusBadge status={item.run.status} />
            <Link to={`/sessions/${item.session.id}`}>{item.session.title ?? shortId(item.session.id)}</Link>
            <span class="muted">·</span>
            <Link to={`/runs/${item.run.id}`}>run {shortId(item.run.id)}</Link>
            <span class="muted">
              {item.run.agent.name}@{item.run.agent.version} · since {time(item.run.started_at ?? item.run.created_at)}
            </span>
          </header>
          <WaitingRequests run={item.run} onDecided={inbox.reload} />
        </article>
      ))}
    </section>
  );
}
