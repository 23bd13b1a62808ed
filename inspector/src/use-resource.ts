import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Resource<T> {
  data: T | undefined;
  error: Error | undefined;
  /** Reads it again (the data shown stays until the new answer arrives). */
  reload: () => void;
}

/**
 * Reads something with `load` (a keel/client call, given the signal that drops it when it is no
 * longer wanted); again when `key` changes (null: nothing to read yet) or on `reload()`, and every
 * `pollMs` if given. An answer that comes after a newer read started, or after the page left, is
 * dropped.
 */
export function useResource<T>(
  key: string | null,
  load: (c: { signal: AbortSignal }) => Promise<T>,
  o: { pollMs?: number } = {},
): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  // Read at each read: a new function at each render must not read again.
  const loader = useRef(load);
  loader.current = load;

  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, [key]);

  useEffect(() => {
    if (key === null) return;
    const read = new AbortController();
    loader.current({ signal: read.signal }).then(
      (d) => {
        if (read.signal.aborted) return;
        setData(d);
        setError(undefined);
      },
      (e: Error) => {
        if (!read.signal.aborted) setError(e);
      },
    );
    return () => read.abort();
  }, [key, tick]);

  useEffect(() => {
    if (!o.pollMs || key === null) return;
    const t = setInterval(reload, o.pollMs);
    return () => clearInterval(t);
  }, [key, o.pollMs, reload]);

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
