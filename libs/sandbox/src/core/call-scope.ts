import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Which action a piece of work is done for, when it is a call that action made through its channel (a skill's
 * `ctx.call`): everything the call does, down to the sandbox, runs inside `asCallOf(caller, …)`. A backend whose
 * sandbox the caller's own run holds uses it to serve the call beside that run instead of queueing it behind it (a
 * Kubernetes session pod runs one thing at a time: a skill's file tool or nested skill would wait for the skill that
 * waits for it). Calls from anywhere else carry no caller and queue as before.
 */
const scope = new AsyncLocalStorage<string>();

/** Runs `fn` as a call made by action `caller`; an inner `asCallOf` (a nested skill's own calls) overrides it. */
export function asCallOf<T>(caller: string, fn: () => T): T {
  return scope.run(caller, fn);
}

/** The action whose call this work is, if it is one. */
export function callingAction(): string | undefined {
  return scope.getStore();
}
