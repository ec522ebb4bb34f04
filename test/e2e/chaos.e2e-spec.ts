import { mkdtempSync, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ENGINE_MARK_ENV } from '../../libs/sandbox/src/backends/subprocess/engine-mark';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import {
  containersWith,
  eventually,
  LABELS,
  loopsUnder,
  mountSourceDevice,
  processesMarked,
  sleep,
} from '../support/host-probes';

const CLIENTS = 16;
const SESSIONS = 8;
const LOAD_MS = 4000;
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'denied', 'error', 'cancelled', 'interrupted']);

/** An action the engine acknowledged: a 200 with its final envelope, or a 202 (accepted, then running). */
interface Acknowledged {
  id: string;
  sessionId: string;
  kind: string;
  status: string;
}

/** The mix each client cycles through: every code tier, files, and asynchronous actions. */
const MIX: Array<{ kind: string; body: (i: number) => Record<string, unknown> }> = [
  { kind: 'subprocess', body: (i) => ({ type: 'code', language: 'bash', code: `echo s${i}` }) },
  {
    kind: 'pooled',
    body: (i) => ({ type: 'code', language: 'python', code: `print(${i})`, tier: 'pooled' }),
  },
  { kind: 'file', body: (i) => ({ type: 'file', op: 'write', path: `f/${i}.txt`, content: String(i) }) },
  {
    kind: 'container',
    body: (i) => ({ type: 'code', language: 'bash', code: `echo c${i}`, tier: 'container' }),
  },
  {
    kind: 'async',
    body: (i) => ({ type: 'code', language: 'bash', code: `sleep 2; echo a${i}`, wait: false }),
  },
  { kind: 'read', body: (i) => ({ type: 'file', op: 'list', path: 'f', limit: 5 + (i % 3) }) },
];

/** Every action of a session, following the cursor. */
async function timeline(engine: EngineProcess, sid: string): Promise<Array<{ id: string; status: string }>> {
  const all: Array<{ id: string; status: string }> = [];
  let cursor: string | undefined;
  do {
    const q = cursor ? `?limit=500&cursor=${encodeURIComponent(cursor)}` : '?limit=500';
    const res = await engine.request('GET', `/v1/sessions/${sid}/actions${q}`);
    expect(res.status).toBe(200);
    all.push(...res.body.actions);
    cursor = res.body.nextCursor;
  } while (cursor);
  return all;
}

/**
 * SECURITY.md items 17 and 23 under load: 16 clients send mixed actions (every code tier, files, asynchronous
 * actions), the engine is killed with SIGKILL mid-load, and a new engine starts on the same data dir. Every action
 * the dead engine acknowledged must be there exactly once with its final status (the ones it was running read
 * `interrupted`), and once the successor has started nothing of the dead engine may remain: no container, no
 * sandbox process, no attached loop device of a workspace image nothing mounts.
 */
describe('chaos: SIGKILL under mixed load, then a restart on the same data dir', () => {
  jest.setTimeout(180_000);
  let dataDir: string;
  let engine: EngineProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-chaos-'));
  });
  afterAll(async () => {
    await engine?.stop('SIGTERM');
    removeDataDir(dataDir);
  });

  it('keeps every acknowledged action exactly once and leaves nothing of the dead engine', async () => {
    const env = { SWITCHYARD_POOL_MIN: '2', SWITCHYARD_LOG_LEVEL: 'error' };
    const first = await EngineProcess.start(dataDir, await freePort(), env);
    engine = first;
    const deadPid = first.pid;
    const sessions: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const res = await first.request('POST', '/v1/sessions', { maxConcurrentActions: 2 });
      expect(res.status).toBe(201);
      sessions.push(res.body.id);
    }

    const acknowledged: Acknowledged[] = [];
    let stop = false;
    const client = async (c: number): Promise<void> => {
      const sid = sessions[c % SESSIONS];
      for (let i = 0; !stop; i++) {
        const pick = MIX[(c + i) % MIX.length];
        try {
          const res = await first.request('POST', `/v1/sessions/${sid}/actions`, pick.body(c * 1000 + i));
          if (res.status === 200 || res.status === 202) {
            acknowledged.push({ id: res.body.id, sessionId: sid, kind: pick.kind, status: res.body.status });
          }
        } catch {
          return; // the engine died under this request: not acknowledged
        }
      }
    };
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
    await sleep(LOAD_MS);
    // On a busy machine one kind (a cold one-off container, say) may not have answered yet: the kill comes once
    // every kind has at least one acknowledged action, so that each is checked after the restart.
    await eventually(() => MIX.every((m) => acknowledged.some((a) => a.kind === m.kind)), 30_000);
    // Some pooled and one-off containers, sandboxes and asynchronous sleeps are running now.
    first.child.kill('SIGKILL');
    stop = true;
    await first.exited;
    await Promise.all(clients);
    expect(acknowledged.length).toBeGreaterThan(CLIENTS);
    for (const kind of MIX.map((m) => m.kind)) {
      expect(acknowledged.filter((a) => a.kind === kind).length).toBeGreaterThan(0);
    }

    engine = await EngineProcess.start(dataDir, await freePort(), env);
    for (const sid of sessions) {
      const actions = await timeline(engine, sid);
      const ids = actions.map((a) => a.id);
      expect(new Set(ids).size).toBe(ids.length); // each recorded once
      const byId = new Map(actions.map((a) => [a.id, a.status]));
      for (const ack of acknowledged.filter((a) => a.sessionId === sid)) {
        const recorded = byId.get(ack.id);
        expect({ id: ack.id, recorded: recorded !== undefined }).toEqual({ id: ack.id, recorded: true });
        // A final answer is recorded as it was given; an accepted one ended, or was interrupted by the kill.
        if (ack.status === 'running') expect(FINAL.has(recorded!)).toBe(true);
        else expect({ id: ack.id, status: recorded }).toEqual({ id: ack.id, status: ack.status });
      }
      // Nothing stays `running` after a crash: what was in flight reads `interrupted`.
      expect(actions.filter((a) => a.status === 'running')).toEqual([]);
    }
    expect(acknowledged.some((a) => a.status === 'running')).toBe(true);

    // The successor's start-up reaped everything of the dead engine.
    const ofDead = async () =>
      (await containersWith({ [LABELS.engine]: true })).filter((c) =>
        c.labels[LABELS.engine].includes(`:${deadPid}:`),
      );
    expect(await eventually(async () => (await ofDead()).length === 0, 15_000)).toBe(true);
    expect(await eventually(() => processesMarked(ENGINE_MARK_ENV, `${deadPid}:`).length === 0, 5_000)).toBe(
      true,
    );
    const stray = () => {
      const mounted = new Set(
        readFileSync('/proc/self/mountinfo', 'utf8')
          .split('\n')
          .map((m) => mountSourceDevice(m.split(' '))),
      );
      return loopsUnder(dataDir).filter((l) => !mounted.has(l.device));
    };
    expect(await eventually(() => stray().length === 0, 5_000)).toBe(true);

    // And the sessions go on.
    const after = await engine.request('POST', `/v1/sessions/${sessions[0]}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'cat f/*.txt | wc -l',
    });
    expect(after.body).toMatchObject({ status: 'succeeded' });
  });
});
