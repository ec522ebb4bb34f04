import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { verifySignature } from '../../apps/engine/src/gates/hooks/hook-signature';
import { holdTestNeo4j, neo4jTestServer } from '../../libs/context-graph/src/testing';
import { removeDataDir } from '../support/data-dir';
import { EngineHarness } from '../support/engine-harness';
import { neo4jEnv } from '../support/neo4j-graph';

/**
 * Before- and after-action hooks through the REST API, against a real HTTP receiver on 127.0.0.1: signed bodies,
 * before-hooks that deny and annotate, after-hooks retried with backoff, a dead or slow hook that never loses an
 * action or holds the engine up, deliveries recorded and visible, and pending ones delivered after a restart.
 */
const SECRET = 'hook-secret-0123456789';
const server = neo4jTestServer();

interface Received {
  path: string;
  body: any;
  signed: boolean;
}

/** The receiver: `/before` denies inputs saying "forbidden" and annotates the rest; `/flaky` fails each delivery twice. */
class Receiver {
  readonly received: Received[] = [];
  private readonly flakyTries = new Map<string, number>();
  /** While set, `/after` answers 503 (a receiver that is down for a while). */
  afterDown = false;
  private server!: Server;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  of(p: string, actionId?: string): Received[] {
    return this.received.filter((r) => r.path === p && (!actionId || r.body.action.id === actionId));
  }

  private tried(deliveryId: string): number {
    const n = (this.flakyTries.get(deliveryId) ?? 0) + 1;
    this.flakyTries.set(deliveryId, n);
    return n;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    const signed = verifySignature(
      SECRET,
      raw,
      String(req.headers['x-switchyard-signature']),
      Math.floor(Date.now() / 1000),
    );
    const body = JSON.parse(raw);
    this.received.push({ path: req.url!, body, signed });
    const json = (status: number, value?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(value === undefined ? '' : JSON.stringify(value));
    };
    switch (req.url ?? '') {
      case '/before':
        if (JSON.stringify(body.action.input).includes('forbidden')) {
          return json(200, { decision: 'deny', reason: 'the word is forbidden here' });
        }
        return json(200, { decision: 'allow', annotations: { ticket: `T-${body.action.tool}` } });
      case '/slow':
        await new Promise((resolve) => setTimeout(resolve, 5000));
        return json(200, { decision: 'allow' });
      case '/flaky':
        if (this.tried(body.deliveryId) <= 2) return json(500, { error: 'not yet' });
        return json(204);
      case '/after':
        return json(this.afterDown ? 503 : 200, {});
      default:
        return json(404);
    }
  }
}

async function until<T>(what: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function hooksFile(dir: string, port: number): string {
  const url = (p: string) => `http://127.0.0.1:${port}${p}`;
  const file = path.join(dir, 'hooks.json');
  writeFileSync(
    file,
    JSON.stringify({
      hooks: [
        { name: 'audit', phase: 'before', url: url('/before'), secret: SECRET },
        {
          name: 'slow',
          phase: 'before',
          url: url('/slow'),
          secret: SECRET,
          timeoutMs: 300,
          match: { tool: 'python' },
        },
        // Refuses bash whenever it cannot be asked: nothing listens on port 1.
        {
          name: 'gate',
          phase: 'before',
          url: 'http://127.0.0.1:1/gate',
          secret: SECRET,
          onFailure: 'deny',
          match: { tool: 'bash' },
        },
        { name: 'archive', phase: 'after', url: url('/after'), secret: SECRET, retries: 20 },
        {
          name: 'flaky',
          phase: 'after',
          url: url('/flaky'),
          secret: SECRET,
          retries: 3,
          match: { type: 'file' },
        },
        {
          name: 'dead',
          phase: 'after',
          url: 'http://127.0.0.1:1/dead',
          secret: SECRET,
          retries: 1,
          timeoutMs: 200,
        },
      ],
    }),
  );
  return file;
}

function hookSuite(extraEnv: () => Record<string, string>): void {
  let receiver: Receiver;
  let engine: EngineHarness;
  let dir: string;

  beforeAll(async () => {
    receiver = new Receiver();
    await receiver.start();
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-hooks-'));
    engine = await EngineHarness.start({
      ...extraEnv(),
      SWITCHYARD_HOOKS_FILE: hooksFile(dir, receiver.port),
    });
  });
  afterAll(async () => {
    await engine?.stop();
    await receiver?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const deliveries = async (sid: string, id: string) =>
    (await engine.request('GET', `/v1/sessions/${sid}/actions/${id}/hooks`)).body.deliveries as any[];

  it('asks the before-hooks (signed), keeps their annotations, and tells the after-hooks the result', async () => {
    const sid = await engine.createSession();
    const r = await engine.action(sid, { type: 'code', language: 'python', code: 'print("hooked")' });
    expect(r).toMatchObject({
      status: 'succeeded',
      stdout: 'hooked\n',
      annotations: { audit: { ticket: 'T-python' } },
    });
    // The slow hook answers after 5 s; its 300 ms timeout let the action run (onFailure: allow).
    expect(r.durationMs).toBeLessThan(4000);

    const before = receiver.of('/before', r.id);
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({
      signed: true,
      body: {
        event: 'action.before',
        hook: 'audit',
        action: { sessionId: sid, tool: 'python', type: 'code' },
      },
    });
    const after = await until(() => receiver.of('/after', r.id)[0]);
    expect(after).toMatchObject({
      signed: true,
      body: {
        event: 'action.completed',
        hook: 'archive',
        result: { id: r.id, status: 'succeeded', stdout: 'hooked\n' },
      },
    });

    const recorded = await until(async () => {
      const list = await deliveries(sid, r.id);
      return list.some((d) => d.hook === 'dead' && d.status === 'failed') ? list : undefined;
    });
    const byHook = Object.fromEntries(recorded.map((d) => [d.hook, d]));
    expect(byHook.audit).toMatchObject({
      phase: 'before',
      status: 'delivered',
      decision: 'allow',
      attempts: 1,
    });
    expect(byHook.slow).toMatchObject({
      phase: 'before',
      status: 'failed',
      lastError: 'no answer within 300 ms',
    });
    expect(byHook.archive).toMatchObject({ phase: 'after', status: 'delivered', lastStatus: 200 });
    expect(byHook.dead).toMatchObject({ phase: 'after', status: 'failed', attempts: 2 });
    expect(byHook.flaky).toBeUndefined(); // it sees file actions only
  });

  it('a before-hook denies: recorded denied, naming the hook and its reason; a gate that cannot answer refuses', async () => {
    const sid = await engine.createSession();
    const r = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'x.txt',
      content: 'forbidden words',
    });
    expect(r).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'HOOK_DENIED' } });
    expect(r.error.message).toBe('denied by before-hook audit: the word is forbidden here');
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`)).body.status).toBe('denied');
    const bash = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo hi' });
    expect(bash).toMatchObject({ status: 'denied', error: { code: 'HOOK_FAILED' } });
    expect(bash.error.message).toContain('before-hook gate could not be reached');
  });

  it('retries an after-hook with backoff until it takes the delivery, and shows every hook', async () => {
    const sid = await engine.createSession();
    const r = await engine.action(sid, { type: 'file', op: 'write', path: 'y.txt', content: 'fine' });
    const flaky = await until(async () =>
      (await deliveries(sid, r.id)).find((d) => d.hook === 'flaky' && d.status === 'delivered'),
    );
    expect(flaky).toMatchObject({ attempts: 3, lastStatus: 204 });
    const hooks = (await engine.request('GET', '/v1/hooks')).body;
    expect(hooks.hooks.map((h: any) => [h.name, h.phase])).toEqual([
      ['audit', 'before'],
      ['slow', 'before'],
      ['gate', 'before'],
      ['archive', 'after'],
      ['flaky', 'after'],
      ['dead', 'after'],
    ]);
    expect(JSON.stringify(hooks)).not.toContain(SECRET);
    expect(hooks.hooks.find((h: any) => h.name === 'audit').deliveries.delivered).toBeGreaterThanOrEqual(2);
    const recent = (await engine.request('GET', '/v1/hooks/deliveries?limit=5')).body.deliveries;
    expect(recent).toHaveLength(5);
  });
}

describe('hooks (embedded graph)', () => {
  hookSuite(() => ({}));

  it('delivers after a restart what a stopped engine left pending', async () => {
    const receiver = new Receiver();
    await receiver.start();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-hooks-'));
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-'));
    const env = { SWITCHYARD_HOOKS_FILE: hooksFile(dir, receiver.port) };
    try {
      receiver.afterDown = true;
      let engine = await EngineHarness.start(env, { dataDir });
      const sid = await engine.createSession();
      const r = await engine.action(sid, { type: 'code', language: 'python', code: 'print(1)' });
      await until(() => receiver.of('/after', r.id)[0]);
      await engine.stop();
      receiver.afterDown = false;
      engine = await EngineHarness.start(env, { dataDir });
      try {
        const delivered = await until(async () => {
          const list = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}/hooks`)).body
            .deliveries;
          return list.find((d: any) => d.hook === 'archive' && d.status === 'delivered');
        });
        expect(delivered.attempts).toBeGreaterThanOrEqual(2);
        expect(receiver.of('/after', r.id).length).toBeGreaterThanOrEqual(2);
      } finally {
        await engine.stop();
      }
    } finally {
      await receiver.stop();
      rmSync(dir, { recursive: true, force: true });
      removeDataDir(dataDir);
    }
  });
});

describe('hooks (Neo4j graph)', () => {
  holdTestNeo4j(server);
  hookSuite(() => neo4jEnv(server));
});
