import { useState } from 'preact/hooks';

/** Runs a button's request: busy while it runs, its error kept to show, `done` called after success. */
export function useAction(done?: () => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (f: () => Promise<unknown>) => {
    setBusy(true);
    setError(undefined);
    try {
      await f();
      done?.();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}
