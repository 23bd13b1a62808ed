import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** The inspector's pages, as paths under /inspect (the server answers index.html for each). */
export type Route =
  | { page: 'sessions' }
  | { page: 'inbox' }
  | { page: 'usage' }
  | { page: 'session'; id: string }
  | { page: 'run'; id: string }
  | { page: 'compare'; a: string; b: string }
  | { page: 'experiments' }
  | { page: 'experiment'; id: string };

export const BASE = '/inspect';

export function parseRoute(pathname: string): Route {
  const path = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const c = /^\/compare\/([^/]+)\/([^/]+)/.exec(path);
  if (c) return { page: 'compare', a: decodeURIComponent(c[1]!), b: decodeURIComponent(c[2]!) };
  const m = /^\/(sessions|runs|experiments)\/([^/]+)/.exec(path);
  if (m?.[1] === 'sessions') return { page: 'session', id: decodeURIComponent(m[2]!) };
  if (m?.[1] === 'runs') return { page: 'run', id: decodeURIComponent(m[2]!) };
  if (m?.[1] === 'experiments') return { page: 'experiment', id: decodeURIComponent(m[2]!) };
  if (path.startsWith('/experiments')) return { page: 'experiments' };
  if (path.startsWith('/inbox')) return { page: 'inbox' };
  if (path.startsWith('/usage')) return { page: 'usage' };
  return { page: 'sessions' };
}

export function navigate(to: string): void {
  history.pushState(null, '', BASE + to);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const f = () => setRoute(parseRoute(location.pathname));
    addEventListener('popstate', f);
    return () => removeEventListener('popstate', f);
  }, []);
  return route;
}

/** A link to another page of the inspector, without reloading it. */
export function Link(props: { to: string; children: ComponentChildren; class?: string }) {
  return (
    <a
      href={BASE + props.to}
      class={props.class}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.to);
      }}
    >
      {props.children}
    </a>
  );
}
