import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { get } from './api.ts';

export interface Resource<T> {
  data: T | undefined;
  error: Error | undefined;
  /** Reads it again (the data shown stays until the new answer arrives). */
  reload: () => void;
}

/**
 * GET `path` from the API (or read it with `load`, e.g. every page of a list); again when `path`
 * changes or on `reload()`, and every `pollMs` if given.
 */
export function useResource<T>(
  path: string | null,
  o: { pollMs?: number; load?: (path: string) => Promise<T> } = {},
): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const latest = useRef(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const load = useRef(o.load);
  load.current = o.load;

  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, [path]);

  useEffect(() => {
    if (path === null) return;
    const n = ++latest.current;
    (load.current ?? get<T>)(path).then(
      (d) => {
        if (n !== latest.current) return;
        setData(d);
        setError(undefined);
      },
      (e: Error) => {
        if (n === latest.current) setError(e);
      },
    );
  }, [path, tick]);

  useEffect(() => {
    if (!o.pollMs || path === null) return;
    const t = setInterval(reload, o.pollMs);
    return () => clearInterval(t);
  }, [path, o.pollMs, reload]);

  return { data, error, reload };
}

/** Calls `f` at most once every `waitMs` however often the returned function is called (for bursts of events). */
export function useThrottled(f: () => void, waitMs: number): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const fn = useRef(f);
  fn.current = f;
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    if (timer.current !== undefined) return;
    timer.current = setTimeout(() => {
      timer.current = undefined;
      fn.current();
    }, waitMs);
  }, [waitMs]);
}
