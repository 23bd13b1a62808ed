import type { SessionSummary } from 'keel/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { money, shortId, time, tokens } from './format.ts';
import { keel } from './keel.ts';
import { Link, navigate } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import { useAction } from './use-action.ts';

const PAGE = 25;

/** Sessions, searchable by title, id and metadata, with their latest run's status and their cost. */
export function SessionsPage() {
  const [q, setQ] = useState('');
  const [rows, setRows] = useState<SessionSummary[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [loaded, setLoaded] = useState(false);
  // How many rows the user has paged to: the refresh reads that many again.
  const shown = useRef(PAGE);
  const page = (cursor: string | null, limit = PAGE) =>
    keel().sessions.summaries({ limit, ...(q.trim() ? { q: q.trim() } : {}), ...(cursor ? { cursor } : {}) });

  // The pages shown so far, read again every 3 s (no stream spans sessions): statuses and costs stay current.
  useEffect(() => {
    let stop = false;
    shown.current = PAGE;
    const load = async () => {
      try {
        const first = await page(null, Math.min(200, shown.current));
        if (stop) return;
        setRows(first.data);
        setNext(first.next_cursor);
        setError(undefined);
        setLoaded(true);
      } catch (e) {
        if (!stop) setError(e);
      }
    };
    const t = setTimeout(load, q === '' ? 0 : 250);
    const poll = setInterval(() => void load(), 3000);
    return () => {
      stop = true;
      clearTimeout(t);
      clearInterval(poll);
    };
  }, [q]);

  const more = async () => {
    try {
      const after = await page(next);
      setRows([...rows, ...after.data]);
      shown.current = rows.length + after.data.length;
      setNext(after.next_cursor);
    } catch (e) {
      setError(e);
    }
  };

  return (
    <section>
      <div class="row spread">
        <h1>Sessions</h1>
        <NewSession />
      </div>
      <input
        class="search"
        type="search"
        aria-label="Search sessions"
        placeholder="Search title, id or metadata…"
        value={q}
        onInput={(e) => setQ(e.currentTarget.value)}
      />
      <ErrorNote error={error} />
      <table class="list">
        <thead>
          <tr>
            <th>Title</th>
            <th>Latest run</th>
            <th>Runs</th>
            <th>Tokens in / out</th>
            <th>Cost</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.session.id} data-testid="session-row">
              <td>
                <Link to={`/sessions/${r.session.id}`}>{r.session.title ?? <em>untitled</em>}</Link>
                <div class="muted mono">{shortId(r.session.id)}</div>
                {Object.keys(r.session.metadata).length > 0 && (
                  <div class="muted mono">{JSON.stringify(r.session.metadata)}</div>
                )}
              </td>
              <td>
                {r.latest_run ? (
                  <Link to={`/runs/${r.latest_run.id}`}>
                    <StatusBadge status={r.latest_run.status} />
                  </Link>
                ) : (
                  <StatusBadge status={undefined} />
                )}
              </td>
              <td>{r.runs}</td>
              <td>
                {tokens(r.usage.input_tokens)} / {tokens(r.usage.output_tokens)}
              </td>
              <td>{money(r.cost)}</td>
              <td>{time(r.session.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {loaded && rows.length === 0 && (
        <p class="empty">{q ? 'No session matches.' : 'No sessions yet: start one above.'}</p>
      )}
      {next && (
        <button class="secondary" onClick={() => void more()}>
          Load more
        </button>
      )}
    </section>
  );
}

/** Starts a session, optionally with a first message, and opens it. */
function NewSession() {
  const [title, setTitle] = useState('');
  const [message, setMessage] = useState('');
  const act = useAction();
  return (
    <form
      class="row new-session"
      onSubmit={(e) => {
        e.preventDefault();
        void act.run(async () => {
          const s = await keel().sessions.create(title.trim() ? { title: title.trim() } : {});
          if (message.trim()) await keel().sessions.send(s.id, message.trim());
          navigate(`/sessions/${s.id}`);
        });
      }}
    >
      <input
        aria-label="New session title"
        placeholder="Title"
        value={title}
        onInput={(e) => setTitle(e.currentTarget.value)}
      />
      <input
        aria-label="First message"
        placeholder="First message (optional)"
        value={message}
        onInput={(e) => setMessage(e.currentTarget.value)}
      />
      <button type="submit" disabled={act.busy}>
        New session
      </button>
      <ErrorNote error={act.error} />
    </form>
  );
}
