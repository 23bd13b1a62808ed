import { KeelProblem } from 'keel/client';
import { useEffect, useState } from 'preact/hooks';
import { ComparePage } from './ComparePage.tsx';
import { ExperimentPage } from './ExperimentPage.tsx';
import { ExperimentsPage } from './ExperimentsPage.tsx';
import { InboxPage } from './InboxPage.tsx';
import { UsagePage } from './UsagePage.tsx';
import { apiKey, keel, onAuthRequired, onKeyChange, setApiKey } from './keel.ts';
import { KeyPrompt } from './KeyPrompt.tsx';
import { Link, useRoute } from './router.tsx';
import { RunPage } from './RunPage.tsx';
import { SessionPage } from './SessionPage.tsx';
import { SessionsPage } from './SessionsPage.tsx';

/** The frame: navigation, the API key prompt when the API asks for one, and the current page. */
export function App() {
  const route = useRoute();
  // unknown: not yet asked; needed: the API answered 401 (to the key we have, if any).
  const [auth, setAuth] = useState<'unknown' | 'ok' | 'needed'>('unknown');
  const [keyVersion, setKeyVersion] = useState(0);
  useEffect(() => onAuthRequired(() => setAuth('needed')), []);
  useEffect(() => onKeyChange(() => setKeyVersion((v) => v + 1)), []);
  useEffect(() => {
    // One cheap request says whether the key (or no key) is accepted.
    keel()
      .sessions.summaries({ limit: 1 })
      .then(
        () => setAuth('ok'),
        // A 401 asks for a key (onAuthRequired); anything else is for the page to show.
        (e: unknown) => {
          if (!(e instanceof KeelProblem && e.status === 401)) setAuth('ok');
        },
      );
  }, [keyVersion]);
  return (
    <div class="app">
      <nav class="top">
        <span class="brand">Keel inspector</span>
        <Link to="/" class={route.page === 'sessions' || route.page === 'session' ? 'active' : ''}>
          Sessions
        </Link>
        <Link to="/inbox" class={route.page === 'inbox' ? 'active' : ''}>
          Inbox
        </Link>
        <Link to="/experiments" class={route.page === 'experiments' || route.page === 'experiment' ? 'active' : ''}>
          Experiments
        </Link>
        <Link to="/usage" class={route.page === 'usage' ? 'active' : ''}>
          Usage
        </Link>
        <span class="grow" />
        {apiKey() && (
          <button class="link" onClick={() => setApiKey(null)}>
            Forget the key
          </button>
        )}
      </nav>
      <main>
        {auth === 'needed' && <KeyPrompt wrong={apiKey() !== null} />}
        {auth === 'ok' && <Page key={`${keyVersion}:${JSON.stringify(route)}`} />}
      </main>
    </div>
  );
}

function Page() {
  const route = useRoute();
  switch (route.page) {
    case 'inbox':
      return <InboxPage />;
    case 'usage':
      return <UsagePage />;
    case 'session':
      return <SessionPage id={route.id} />;
    case 'run':
      return <RunPage id={route.id} />;
    case 'compare':
      return <ComparePage a={route.a} b={route.b} />;
    case 'experiments':
      return <ExperimentsPage />;
    case 'experiment':
      return <ExperimentPage id={route.id} />;
    default:
      return <SessionsPage />;
  }
}
