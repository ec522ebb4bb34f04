/**
 * Engine replicas (SWITCHYARD_STATE=postgres): two engine processes on loopback sharing a fresh Postgres database,
 * the test Neo4j and the Kubernetes test cluster. Any replica serves any session (requests are forwarded to the
 * replica that serves it), idempotency keys and tenants' policies hold across replicas, a session's events stream
 * from either, and `kill -9` of one under load loses nothing: its running actions end `interrupted`, its sessions
 * go on through the survivor, its pods are deleted.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { Client } from 'pg';
import WebSocket from 'ws';
import { holdTestNeo4j, neo4jTestServer, wipeNeo4j } from '../../libs/context-graph/src/testing';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import { neo4jEnv } from '../support/neo4j-graph';
import { dropDatabase, freshDatabase } from '../support/postgres';
import { SANDBOX_BACKENDS, type SandboxBackendUnderTest } from '../support/sandbox-backends';
import { SseClient } from '../support/sse-client';
import { TerminalClient } from '../support/terminal-client';

jest.setTimeout(600_000);

const KEY = 'replica-test-key';
const ADMIN = 'replica-admin-key';
const LEASE_MS = 3000;
const CLIENTS = 16;
const LOAD_MS = 60_000;
const KILL_AFTER_MS = 25_000;

const server = neo4jTestServer();
const neo4j = holdTestNeo4j(server);
const k8s = SANDBOX_BACKENDS.find((b) => b.name === 'kubernetes') as SandboxBackendUnderTest;

interface Answer<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** One replica and a JSON client with the test's key. */
class Replica {
  constructor(
    readonly name: string,
    readonly engine: EngineProcess,
    readonly dataDir: string,
  ) {}

  get url(): string {
    return this.engine.baseUrl;
  }

  async call<T = any>(
    method: string,
    urlPath: string,
    body?: unknown,
    headers: Record<string, string> = {},
    key = KEY,
  ): Promise<Answer<T>> {
    const res = await fetch(`${this.url}${urlPath}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T, headers: res.headers };
  }

  async session(): Promise<string> {
    const res = await this.call<{ id: string }>('POST', '/v1/sessions', {});
    expect(res.status).toBe(201);
    return res.body.id;
  }
}

let databaseUrl: string;
let env: Record<string, string>;
const dirs: string[] = [];
let a: Replica;
let b: Replica;

async function startReplica(name: string): Promise<Replica> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `switchyard-replica-${name}-`));
  dirs.push(dataDir);
  const engine = await EngineProcess.start(dataDir, await freePort(), env);
  return new Replica(name, engine, dataDir);
}

async function sql<T = any>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every action of a session, following the cursor. */
async function timeline(replica: Replica, sid: string): Promise<Array<{ id: string; status: string }>> {
  const all: Array<{ id: string; status: string }> = [];
  let cursor: string | undefined;
  do {
    const q = cursor ? `?limit=500&cursor=${encodeURIComponent(cursor)}` : '?limit=500';
    const res = await replica.call('GET', `/v1/sessions/${sid}/actions${q}`);
    expect(res.status).toBe(200);
    all.push(...res.body.actions);
    cursor = res.body.nextCursor;
  } while (cursor);
  return all;
}

beforeAll(async () => {
  databaseUrl = await freshDatabase();
  await wipeNeo4j(neo4j.admin());
  env = {
    ...(await k8s.env()),
    ...neo4jEnv(server),
    SWITCHYARD_STATE: 'postgres',
    DATABASE_URL: databaseUrl,
    SWITCHYARD_REPLICA_LEASE_MS: String(LEASE_MS),
    SWITCHYARD_API_KEYS: KEY,
    SWITCHYARD_ADMIN_KEYS: ADMIN,
    SWITCHYARD_POOL_MIN: '2',
    SWITCHYARD_LOG_LEVEL: 'warn',
    SWITCHYARD_PREVIEW_DOMAIN: 'preview.test',
  };
  [a, b] = await Promise.all([startReplica('a'), startReplica('b')]);
});

afterAll(async () => {
  await Promise.all([a, b].filter(Boolean).map((r) => r.engine.stop('SIGTERM')));
  for (const d of dirs) removeDataDir(d);
  if (databaseUrl) await dropDatabase(databaseUrl);
});

describe('replicas sharing Postgres, Neo4j and the cluster', () => {
  it('both register, each with a lease Postgres keeps', async () => {
    const rows = await sql<{ id: string; url: string; alive: boolean }>(
      'SELECT id, url, lease_until > now() AS alive FROM replicas ORDER BY started_at',
    );
    expect(rows.map((r) => r.url).sort()).toEqual([a.url, b.url].sort());
    expect(rows.every((r) => r.alive)).toBe(true);
  });

  it('refuse to start, exit 78 naming the variable, without a shared graph or a reachable Postgres', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-replica-bad-'));
    dirs.push(dir);
    const { SWITCHYARD_GRAPH: _graph, ...withoutGraph } = env;
    const noGraph = EngineProcess.spawn(dir, await freePort(), withoutGraph);
    expect(await noGraph.exited).toBe('exit 78');
    await noGraph.closed;
    expect(noGraph.log).toMatch(/^ {2}SWITCHYARD_GRAPH: must be neo4j with SWITCHYARD_STATE=postgres/m);
    const closed = await freePort();
    const noDb = EngineProcess.spawn(dir, await freePort(), {
      ...env,
      DATABASE_URL: `postgres://switchyard:x@127.0.0.1:${closed}/switchyard`,
    });
    expect(await noDb.exited).toBe('exit 78');
    await noDb.closed;
    expect(noDb.log).toMatch(/^ {2}DATABASE_URL: Postgres refused start-up: .*ECONNREFUSED/m);
  });

  it('say so in /health and document the answers forwarding adds', async () => {
    const health = await b.call('GET', '/health');
    expect(health.body.state).toMatchObject({ store: 'postgres', replicas: 2 });
    expect(health.body.graph.store).toBe('neo4j');
    const doc = await a.call<{
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    }>('GET', '/docs-json');
    const run = doc.body.paths['/v1/sessions/{sessionId}/actions'].post.responses;
    expect(Object.keys(run)).toEqual(expect.arrayContaining(['502', '503']));
    expect(Object.keys(doc.body.paths['/v1/approvals'].get.responses)).toContain('503');
    expect(Object.keys(doc.body.paths['/v1/sessions'].post.responses)).not.toContain('502');
  });

  it('a session made through A serves actions, files and reads through B', async () => {
    const sid = await a.session();
    const write = await b.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      code: "open('from-b.txt','w').write('b'); print(6 * 7)",
    });
    expect(write.status).toBe(200);
    expect(write.body).toMatchObject({ status: 'succeeded', stdout: '42\n' });
    // The file B's action wrote is in the workspace A serves from: one workspace, whoever is asked.
    const read = await a.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'file',
      op: 'read',
      path: 'from-b.txt',
    });
    expect(read.status).toBe(200);
    expect(read.body.output.content).toBe('b');
    // Kernels keep state whichever replica the cells come through.
    const k1 = await b.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'x = 41',
    });
    expect(k1.body.status).toBe('succeeded');
    const k2 = await a.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'x + 1',
    });
    expect(k2.body.output.result).toBe('42');
    expect((await b.call('GET', `/v1/sessions/${sid}`)).body.id).toBe(sid);
    const listed = await b.call<{ sessions: { id: string }[] }>('GET', '/v1/sessions');
    expect(listed.body.sessions.map((s) => s.id)).toContain(sid);
    const actions = await timeline(b, sid);
    expect(actions.map((x) => x.id)).toEqual([write.body.id, read.body.id, k1.body.id, k2.body.id]);
    // Another tenant sees nothing, on either replica.
    expect((await b.call('GET', `/v1/sessions/${sid}`, undefined, {}, ADMIN)).status).toBe(404);
    expect((await b.call('GET', '/v1/sessions/ses_000000000000000000000000')).status).toBe(404);
  });

  it('a file streamed to B goes into the workspace A serves, with a length or chunked, and reads back from either', async () => {
    const sid = await a.session();
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const content = (replica: Replica, file: string) =>
      `${replica.url}/v1/sessions/${sid}/files/content?path=${encodeURIComponent(file)}`;
    const auth = { authorization: `Bearer ${KEY}` };
    // With a content-length (a Buffer body), then chunked (a stream of unknown length).
    const sized = await fetch(content(b, 'up/sized.bin'), { method: 'PUT', headers: auth, body: bytes });
    expect(sized.status).toBe(200);
    expect(await sized.json()).toMatchObject({ path: 'up/sized.bin', size: bytes.length, sha256 });
    const chunked = await fetch(content(b, 'up/chunked.bin'), {
      method: 'PUT',
      headers: auth,
      body: Readable.toWeb(Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)])) as ReadableStream,
      duplex: 'half',
    });
    expect(chunked.status).toBe(200);
    expect(await chunked.json()).toMatchObject({ size: bytes.length, sha256 });
    for (const replica of [a, b]) {
      for (const file of ['up/sized.bin', 'up/chunked.bin']) {
        const down = await fetch(content(replica, file), { headers: auth });
        expect(down.status).toBe(200);
        expect(
          createHash('sha256')
            .update(Buffer.from(await down.arrayBuffer()))
            .digest('hex'),
        ).toBe(sha256);
      }
    }
  });

  it('a server in a session A serves answers through B: the ports proxy, a preview host and a WebSocket', async () => {
    const sid = await a.session();
    const app = readFileSync(path.join(__dirname, '..', 'support', 'ports_app.py'), 'utf8');
    const act = (body: Record<string, unknown>) => b.call('POST', `/v1/sessions/${sid}/actions`, body);
    expect((await act({ type: 'file', op: 'write', path: 'ports_app.py', content: app })).body.status).toBe(
      'succeeded',
    );
    expect(
      (await act({ type: 'process', op: 'start', command: 'python3 -u ports_app.py 8000' })).body.status,
    ).toBe('succeeded');
    await eventually(async () => {
      const listed = await b.call<{ ports: Array<{ port: number }> }>('GET', `/v1/sessions/${sid}/ports`);
      return listed.body.ports.some((p) => p.port === 8000) ? true : undefined;
    });
    const proxy = `${b.url}/v1/sessions/${sid}/ports/8000`;
    const auth = { authorization: `Bearer ${KEY}` };
    const hello = await fetch(`${proxy}/`, { headers: auth });
    expect([hello.status, await hello.text()]).toEqual([200, 'hello from the session\n']);
    // A body no parser reads goes to A as it comes, and back.
    const body = randomBytes(2 * 1024 * 1024);
    const echoed = await fetch(`${proxy}/echo`, { method: 'POST', headers: auth, body });
    expect(Buffer.from(await echoed.arrayBuffer()).equals(body)).toBe(true);
    // A preview host names the session in its Host only: B forwards by it.
    const atHost = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      http
        .get(`${b.url}/`, { headers: { ...auth, host: `8000-${sid}.preview.test` } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        })
        .on('error', reject);
    });
    expect(atHost).toEqual({ status: 200, text: 'hello from the session\n' });
    const ws = new WebSocket(`${proxy.replace('http:', 'ws:')}/ws`, { headers: auth });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const back = await new Promise<string>((resolve) => {
      ws.once('message', (data: Buffer) => resolve(data.toString()));
      ws.send('through B');
    });
    expect(back).toBe('through B');
    ws.close();
    expect((await b.call('GET', `/v1/sessions/${sid}/ports/8000/`, undefined, {}, ADMIN)).status).toBe(404);
  });

  it('a terminal of a session on A is opened, typed into and closed through B', async () => {
    const sid = await a.session();
    const auth = { authorization: `Bearer ${KEY}` };
    const opened = await b.call('POST', `/v1/sessions/${sid}/terminals`, { cols: 90, rows: 25 });
    expect([opened.status, opened.body.status, opened.body.cols]).toEqual([201, 'open', 90]);
    const client = await TerminalClient.connect(`${b.url.replace(/^http/, 'ws')}${opened.body.wsPath}`, {
      headers: auth,
      cols: 90,
      rows: 25,
    });
    client.type('echo via-b-$((40+2)) cols=$(tput cols)\r');
    await client.untilLine(/^via-b-42 cols=90$/);
    // A reconnect through A sees what was typed through B (one terminal, on the session's replica).
    const again = await TerminalClient.connect(`${a.url.replace(/^http/, 'ws')}${opened.body.wsPath}`, {
      headers: auth,
      cols: 90,
      rows: 25,
    });
    await again.untilLine(/^via-b-42 cols=90$/);
    await again.close();
    expect((await b.call('GET', `/v1/sessions/${sid}/terminals`)).body.terminals).toEqual([
      expect.objectContaining({ id: opened.body.id, status: 'open' }),
    ]);
    expect((await b.call('DELETE', `/v1/sessions/${sid}/terminals/${opened.body.id}`)).status).toBe(200);
    expect((await client.closed).code).toBe(1000);
    expect((await a.call('GET', `/v1/sessions/${sid}/terminals/${opened.body.id}`)).body.status).toBe(
      'closed',
    );
    // Its pod goes too: the takeover test below counts the pods A's and B's sessions hold (SWITCHYARD_POOL_MAX_SESSIONS).
    expect((await b.call('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
  });

  it('a plan started on A is seen over SSE on B, in order; Last-Event-ID resumes on the other replica', async () => {
    const sid = await a.session();
    const sse = await SseClient.open(`${b.url}/v1/sessions/${sid}/events`, {
      authorization: `Bearer ${KEY}`,
    });
    try {
      const plan = await a.call('POST', `/v1/sessions/${sid}/plans`, {
        steps: [
          { id: 'one', action: { type: 'code', language: 'bash', code: 'echo one' } },
          { id: 'two', dependsOn: ['one'], action: { type: 'code', language: 'bash', code: 'echo two' } },
        ],
      });
      expect(plan.status).toBe(202);
      await sse.waitFor((e) => e.event === 'plan.completed', 120_000);
      const events = [...sse.events];
      const types = events.map((e) => e.event);
      expect(types[0]).toBe('plan.started');
      expect(types.indexOf('plan.step.started')).toBeLessThan(types.indexOf('plan.step.completed'));
      expect(types.filter((t) => t === 'action.completed')).toHaveLength(2);
      const ids = events.map((e) => Number(e.id));
      expect(ids).toEqual([...ids].sort((x, y) => x - y));
      // Resume from the middle on A: exactly what followed.
      const middle = ids[Math.floor(ids.length / 2)];
      const resumed = await SseClient.open(`${a.url}/v1/sessions/${sid}/events`, {
        authorization: `Bearer ${KEY}`,
        'last-event-id': String(middle),
      });
      try {
        await resumed.waitFor((e) => e.event === 'plan.completed', 30_000);
        expect(resumed.events.map((e) => Number(e.id))).toEqual(ids.filter((i) => i > middle));
      } finally {
        resumed.close();
      }
    } finally {
      sse.close();
    }
  });

  it('an Idempotency-Key replayed on the other replica returns the first answer', async () => {
    const sid = await a.session();
    const body = { type: 'code', language: 'bash', code: 'echo $RANDOM' };
    const first = await b.call('POST', `/v1/sessions/${sid}/actions`, body, { 'idempotency-key': 'act-k1' });
    const replay = await a.call('POST', `/v1/sessions/${sid}/actions`, body, { 'idempotency-key': 'act-k1' });
    expect(replay.body).toEqual(first.body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await timeline(a, sid)).map((x) => x.id)).toEqual([first.body.id]);
    // Same key, another body: refused on either replica.
    const other = await a.call(
      'POST',
      `/v1/sessions/${sid}/actions`,
      { ...body, code: 'echo x' },
      {
        'idempotency-key': 'act-k1',
      },
    );
    expect(other.status).toBe(422);
  });

  it('an action waiting for approval on A is listed and approved through B', async () => {
    const sid = (
      await a.call<{ id: string }>('POST', '/v1/sessions', {
        policy: { rules: [{ effect: 'ask', match: { tool: 'python' } }] },
      })
    ).body.id;
    const submitted = await b.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      code: 'print("approved")',
    });
    expect(submitted.status).toBe(202);
    expect(submitted.body.status).toBe('awaiting_approval');
    // It waits on A (which serves the session); B's list asks every replica.
    for (const via of [a, b]) {
      const listed = await via.call<{ approvals: { actionId: string }[] }>(
        'GET',
        '/v1/approvals',
        undefined,
        {},
        ADMIN,
      );
      expect(listed.status).toBe(200);
      expect(listed.body.approvals.map((x) => x.actionId)).toEqual([submitted.body.id]);
    }
    const approved = await b.call(
      'POST',
      `/v1/sessions/${sid}/actions/${submitted.body.id}/approve`,
      { reason: 'fine' },
      {},
      ADMIN,
    );
    expect(approved.status).toBe(200);
    const done = await eventually(async () => {
      const r = await b.call('GET', `/v1/sessions/${sid}/actions/${submitted.body.id}`);
      return r.body.status === 'succeeded' ? r.body : undefined;
    });
    expect(done.stdout).toBe('approved\n');
    expect((await a.call('GET', '/v1/approvals', undefined, {}, ADMIN)).body.approvals).toEqual([]);
  });

  it('an MCP session opened on A answers through B', async () => {
    const mcp = (via: Replica, body: unknown, session?: string) =>
      fetch(`${via.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY}`,
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
          ...(session && { 'mcp-session-id': session }),
        },
        body: JSON.stringify(body),
      });
    const init = await mcp(a, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    expect(init.status).toBe(200);
    const session = init.headers.get('mcp-session-id') as string;
    expect(session).toMatch(/^ses_[0-9a-f]+\./);
    await init.text();
    expect((await mcp(b, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
    const listed = await mcp(b, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session);
    expect(listed.status).toBe(200);
    expect(await listed.text()).toContain('"python"');
    // Unknown on every replica: MCP's "initialize a new session".
    expect(
      (await mcp(b, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, 'ses_0123456789abcdef01234567.x'))
        .status,
    ).toBe(404);
  });

  it("a tenant's policy set through A applies on B at once", async () => {
    const tenant = (await b.call<{ tenant: string }>('GET', '/v1/whoami')).body.tenant;
    const put = await a.call(
      'PUT',
      `/v1/tenants/${tenant}/policy`,
      { rules: [{ effect: 'deny', match: { language: 'bash' }, reason: 'no shells here' }] },
      {},
      ADMIN,
    );
    expect(put.status).toBe(200);
    try {
      const sid = await b.session();
      const denied = await eventually(async () => {
        const res = await b.call('POST', `/v1/sessions/${sid}/actions`, {
          type: 'code',
          language: 'bash',
          code: 'echo hi',
        });
        return res.body.status === 'denied' ? res : undefined;
      }, 5000);
      expect(JSON.stringify(denied.body)).toContain('no shells here');
    } finally {
      expect((await b.call('DELETE', `/v1/tenants/${tenant}/policy`, undefined, {}, ADMIN)).status).toBe(204);
    }
  });

  it('16 clients over both replicas; kill -9 of A loses nothing, its sessions go on through B in its pods, its other pods go', async () => {
    const [aId] = (await sql<{ id: string }>('SELECT id FROM replicas WHERE url = $1', [a.url])).map(
      (r) => r.id,
    );
    // Half the sessions are A's, half B's.
    const sessions: string[] = [];
    for (let i = 0; i < CLIENTS / 2; i++) sessions.push(await (i % 2 === 0 ? a : b).session());
    // A checkpoint of one of A's sessions, taken before the kill: kept in Postgres, restored through B after it.
    const kept = sessions[0];
    const wrote = await a.call('POST', `/v1/sessions/${kept}/actions`, {
      type: 'file',
      op: 'write',
      path: 'kept.txt',
      content: 'survives',
    });
    expect(wrote.body.status).toBe('succeeded');
    const checkpoint = await a.call('POST', `/v1/sessions/${kept}/checkpoints`, { label: 'before the kill' });
    expect(checkpoint.status).toBe(201);
    const acknowledged = new Map<string, { sessionId: string; status: string }>();
    /** Answers acknowledged before the kill, by key: replayed through B after it. */
    const beforeKill: { key: string; sessionId: string; body: unknown; id: string }[] = [];
    const asyncOnA: { id: string; sessionId: string }[] = [];
    const start = Date.now();
    let killed = false;
    let n = 0;

    /** One client: alternates replicas (only B once A is gone), retries refusals with the same key. */
    const client = async (c: number): Promise<void> => {
      const sid = sessions[c % sessions.length];
      while (Date.now() - start < LOAD_MS) {
        const i = n++;
        const key = `load-${c}-${i}`;
        const slow = i % 7 === 0;
        const body = slow
          ? { type: 'code', language: 'bash', code: `sleep 4; echo s${i}`, wait: false }
          : { type: 'code', language: 'python', code: `print(${i})` };
        for (let attempt = 0; attempt < 20; attempt++) {
          const via = killed || (c + attempt) % 2 === 1 ? b : a;
          let res: Answer;
          try {
            res = await via.call('POST', `/v1/sessions/${sid}/actions`, body, { 'idempotency-key': key });
          } catch {
            await new Promise((r) => setTimeout(r, 200));
            continue; // A is gone: the connection was refused or reset
          }
          if (res.status === 200 || res.status === 202) {
            acknowledged.set(res.body.id, { sessionId: sid, status: res.body.status });
            if (!killed && res.status === 200)
              beforeKill.push({ key, sessionId: sid, body, id: res.body.id });
            if (res.status === 202 && !killed) asyncOnA.push({ id: res.body.id, sessionId: sid });
            break;
          }
          expect([429, 502, 503]).toContain(res.status);
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    };
    const killer = (async () => {
      await new Promise((r) => setTimeout(r, KILL_AFTER_MS));
      await a.engine.stop('SIGKILL');
      killed = true;
    })();
    await Promise.all([killer, ...Array.from({ length: CLIENTS }, (_, c) => client(c))]);
    expect(acknowledged.size).toBeGreaterThan(CLIENTS * 5);

    // B took A over once: A's sessions are B's now, and no pod is A's (adopted by B, or deleted).
    const [row] = await eventually(async () => {
      const rows = await sql('SELECT taken_over_by, interrupted FROM replicas WHERE id = $1', [aId]);
      return rows[0]?.taken_over_by ? rows : undefined;
    });
    expect(row.taken_over_by).not.toBe(aId);
    expect(await sql('SELECT id FROM sessions WHERE owner = $1', [aId])).toEqual([]);
    await eventually(async () =>
      (await k8s.sandboxesWith({ engine: aId })).length === 0 ? true : undefined,
    );

    // Every acknowledged action is in the graph exactly once; none is left running.
    const seen = new Map<string, string>();
    for (const sid of sessions) {
      const list = await eventually(async () => {
        const all = await timeline(b, sid);
        return all.some((x) => x.status === 'running') ? undefined : all;
      });
      for (const x of list) {
        expect(seen.has(x.id)).toBe(false);
        seen.set(x.id, x.status);
      }
    }
    for (const id of acknowledged.keys()) expect(seen.has(id)).toBe(true);
    // The slow actions A was running when it died read `interrupted` (recorded once: the list holds each once).
    const interrupted = [...seen.values()].filter((s) => s === 'interrupted').length;
    expect(interrupted).toBeGreaterThan(0);
    expect(Number(row.interrupted)).toBeGreaterThan(0);

    // Answers given before the kill replay through the survivor (the keys are in Postgres), without running again.
    for (const k of beforeKill.filter((_, i) => i % 10 === 0)) {
      const replay = await b.call('POST', `/v1/sessions/${k.sessionId}/actions`, k.body, {
        'idempotency-key': k.key,
      });
      expect(replay.status).toBe(200);
      expect(replay.body.id).toBe(k.id);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    }

    // B adopted the pods of A's sessions (SIGKILL leaves them running): the file is there before any restore.
    const adopted = await b.call('POST', `/v1/sessions/${kept}/actions`, {
      type: 'file',
      op: 'read',
      path: 'kept.txt',
    });
    expect(adopted.body.output.content).toBe('survives');
    // The checkpoint taken on A restores through B as well.
    const restored = await b.call('POST', `/v1/sessions/${kept}/checkpoints/${checkpoint.body.id}/restore`);
    expect(restored.status).toBe(200);
    const back = await b.call('POST', `/v1/sessions/${kept}/actions`, {
      type: 'file',
      op: 'read',
      path: 'kept.txt',
    });
    expect(back.body.output.content).toBe('survives');

    // Every session goes on through the survivor.
    for (const sid of sessions) {
      const res = await b.call('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'python',
        code: 'print("after")',
      });
      // The whole answer when it did not succeed: a denial's reasons say why.
      expect(
        res.body.status === 'succeeded' ? res.body : { sid, answer: JSON.stringify(res.body) },
      ).toMatchObject({
        status: 'succeeded',
        stdout: 'after\n',
      });
    }
  });
});
