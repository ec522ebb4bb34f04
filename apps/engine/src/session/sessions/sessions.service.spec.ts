import { Logger } from '@nestjs/common';
import { NotFoundError, type Clock } from '@switchyard/common';
import type { ContextGraph } from '@switchyard/context-graph';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { SessionStore } from '../../state/sessions/session.store';
import type { TemplateRegistry } from '../templates/template-registry';
import type { SessionWorkspaces } from '../workspaces/session-workspaces';
import { SessionsService } from './sessions.service';

/** A promise settled from outside: a teardown step that takes as long as the test wants. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const flush = () => new Promise((r) => setImmediate(r));

/** The service over in-memory stand-ins that log, in order, what each step of a session's end did. */
function service() {
  const steps: string[] = [];
  const config = {
    sessions: { defaultTtlSeconds: 3600, maxTtlSeconds: 86_400, maxSessions: 10, sweepIntervalMs: 60_000 },
    actions: { sessionConcurrency: 4 },
    network: { default: { allow: [] } },
  } as unknown as EngineConfig;
  const clock: Clock = { now: () => new Date(), monotonic: () => performance.now() };
  const store = {
    insert: () => Promise.resolve(),
    remove: (id: string) => (steps.push(`store.remove ${id}`), Promise.resolve()),
    loadAll: () => Promise.resolve([]),
    updateLastActive: () => Promise.resolve(),
  } as unknown as SessionStore;
  const workspaces = {
    kind: 'host',
    open: () => Promise.resolve(),
    close: (id: string) => (steps.push(`workspace.close ${id}`), Promise.resolve()),
  } as unknown as SessionWorkspaces;
  const graph = {
    recordSession: () => Promise.resolve(),
    endSession: (id: string) => (steps.push(`graph.endSession ${id}`), Promise.resolve()),
  } as unknown as ContextGraph;
  const sessions = new SessionsService(config, clock, store, workspaces, graph, {} as TemplateRegistry);
  return { sessions, steps };
}

describe('SessionsService: the end of a session', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('answers a delete once fenced and durably ended, before its teardown; the workspace goes after the teardown hooks', async () => {
    const { sessions, steps } = service();
    const s = await sessions.create('t', {});
    const slow = deferred();
    sessions.onSessionEnd((id) => (steps.push(`fence ${id}`), Promise.resolve()));
    sessions.onSessionTeardown(async (id) => {
      steps.push(`teardown ${id}`);
      await slow.promise;
      steps.push(`teardown done ${id}`);
    });

    await sessions.delete('t', s.id);
    expect(steps).toEqual([
      `fence ${s.id}`,
      `graph.endSession ${s.id}`,
      `store.remove ${s.id}`,
      `teardown ${s.id}`,
    ]);
    // Nothing of it can be reached from here, though its teardown still runs.
    expect(() => sessions.get('t', s.id)).toThrow(NotFoundError);
    expect(sessions.find(s.id)).toBeUndefined();
    await expect(sessions.delete('t', s.id)).rejects.toThrow(NotFoundError);

    slow.resolve();
    await sessions.settled();
    expect(steps.slice(4)).toEqual([`teardown done ${s.id}`, `workspace.close ${s.id}`]);
  });

  it('shutdown waits for a teardown still running', async () => {
    const { sessions, steps } = service();
    const s = await sessions.create('t', {});
    const slow = deferred();
    sessions.onSessionTeardown(() => slow.promise);
    await sessions.delete('t', s.id);

    let shut = false;
    const shutdown = sessions.onApplicationShutdown().then(() => (shut = true));
    await flush();
    expect(shut).toBe(false);
    expect(steps).not.toContain(`workspace.close ${s.id}`);
    slow.resolve();
    await shutdown;
    expect(steps).toContain(`workspace.close ${s.id}`);
  });

  it('a teardown hook that fails does not keep the workspace, nor fail the delete that came before', async () => {
    const { sessions, steps } = service();
    const s = await sessions.create('t', {});
    sessions.onSessionTeardown(() => Promise.reject(new Error('docker is gone')));
    await expect(sessions.delete('t', s.id)).resolves.toBeUndefined();
    await sessions.settled();
    expect(steps).toContain(`workspace.close ${s.id}`);
  });
});
