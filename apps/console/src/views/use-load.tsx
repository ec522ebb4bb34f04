import { useCallback, useEffect, useState } from 'preact/hooks';
import { describeError } from '../api';

export type Loaded<T> =
  { state: 'loading' } | { state: 'error'; message: string } | { state: 'ok'; value: T };

/** Runs `load` when `deps` change (and on `reload`); what it answers or the error it threw. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [Loaded<T>, () => void] {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const [tick, setTick] = useState(0);
  const run = useCallback(load, deps);
  useEffect(() => {
    let live = true;
    run().then(
      (value) => live && setLoaded({ state: 'ok', value }),
      (error: unknown) => live && setLoaded({ state: 'error', message: describeError(error) }),
    );
    return () => {
      live = false;
    };
  }, [run, tick]);
  return [loaded, () => setTick((t) => t + 1)];
}

export function Problem({ message }: { message: string }) {
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}
