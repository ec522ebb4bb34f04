/**
 * The console's only way to the engine: the typed client of `packages/client`, on this page's origin. An API key,
 * when the engine asks for one, is kept in `sessionStorage`: for this tab only, gone when it closes.
 */
import { SwitchyardClient } from '../../../packages/client/src/client';
import { SwitchyardError } from '../../../packages/client/src/errors';

const KEY = 'switchyard.console.apiKey';

export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function storeKey(key: string | undefined): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export function client(apiKey = storedKey()): SwitchyardClient {
  // window.fetch must be called unbound from the client object.
  return new SwitchyardClient({
    baseUrl: location.origin,
    apiKey,
    fetch: (input, init) => fetch(input, init),
  });
}

/** One line a person can act on, from whatever a call threw. */
export function describeError(error: unknown): string {
  if (error instanceof SwitchyardError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
