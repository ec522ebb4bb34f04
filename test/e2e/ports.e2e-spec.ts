import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import Dockerode from 'dockerode';
import { Readable } from 'node:stream';
import WebSocket from 'ws';
import { AccessTokens } from '../../apps/engine/src/edge/http/access-tokens';
import { ApiKeys } from '../../apps/engine/src/edge/http/api-keys';
import type { EngineConfig } from '../../apps/engine/src/platform/config/engine-config';
import { EngineHarness } from '../support/engine-harness';
import { SseClient } from '../support/sse-client';

jest.setTimeout(120_000);

/**
 * The proxy to a session's ports (issue 32): a real engine, a real server in the session's sandbox (test/support/
 * ports_app.py, started as a `process` action), real HTTP, SSE and WebSocket clients. The pooled tier (Docker) gets
 * the whole of it; the subprocess tier's box (Docker off) the basics, since it is the same proxy over another box.
 */
const KEY_A = 'ports-e2e-tenant-a-key';
const KEY_B = 'ports-e2e-tenant-b-key';
const DOMAIN = 'preview.test';
const PORT = 8000;
const APP = readFileSync(path.join(__dirname, '..', 'support', 'ports_app.py'), 'utf8');
const MiB = 1024 * 1024;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request to the engine with Node's own client: any Host header, a streamed body, the raw answer. */
function send(
  engine: EngineHarness,
  method: string,
  urlPath: string,
  init: { headers?: Record<string, string>; body?: Buffer | Readable } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${engine.baseUrl}${urlPath}`, { method, headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (init.body instanceof Readable) init.body.pipe(req);
    else req.end(init.body);
  });
}

const json = (a: Answer): any => JSON.parse(a.body.toString('utf8'));
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

/** Writes the app into the session's workspace, starts it as a process, and waits until its port listens. */
async function startApp(engine: EngineHarness, sessionId: string, tier?: string): Promise<string> {
  const written = await engine.action(sessionId, {
    type: 'file',
    op: 'write',
    path: 'ports_app.py',
    content: APP,
  });
  expect(written.status).toBe('succeeded');
  const started = await engine.action(sessionId, {
    type: 'process',
    op: 'start',
    name: 'web',
    command: `python3 -u ports_app.py ${PORT}`,
    ...(tier !== undefined && { tier }),
  });
  expect(started).toMatchObject({ status: 'succeeded', output: { process: { running: true } } });
  // The list reads the sandbox's sockets: the server is up once its port is there.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const listed = await engine.request('GET', `/v1/sessions/${sessionId}/ports`);
    if ((listed.body.ports as Array<{ port: number }>).some((p) => p.port === PORT)) break;
    if (Date.now() > deadline) throw new Error(`port ${PORT} never listened: ${JSON.stringify(listed.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return started.output.process.id as string;
}

/** A WebSocket through the engine; resolves once open (rejects with the refusal's status). */
function openSocket(url: string, headers: Record<string, string>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/** Sends `message` and resolves with the next message received. */
function echo(ws: WebSocket, message: string | Buffer): Promise<{ data: Buffer; binary: boolean }> {
  return new Promise((resolve) => {
    ws.once('message', (data: Buffer, binary: boolean) => resolve({ data, binary }));
    ws.send(message);
  });
}

const closed = (ws: WebSocket): Promise<number> =>
  new Promise((resolve) => {
    ws.once('close', (code: number) => resolve(code));
    ws.close(1000, 'done');
  });

describe('ports: the proxy to a server in a session', () => {
  describe('in the pooled tier (Docker)', () => {
    let engine: EngineHarness;
    let sid: string;
    let webId: string;
    let proxy: string;

    beforeAll(async () => {
      engine = (
        await EngineHarness.start({
          SWITCHYARD_API_KEYS: `${KEY_A},${KEY_B}`,
          SWITCHYARD_PREVIEW_DOMAIN: DOMAIN,
        })
      ).as(KEY_A);
      sid = await engine.createSession();
      webId = await startApp(engine, sid);
      proxy = `/v1/sessions/${sid}/ports/${PORT}`;
    });
    afterAll(async () => {
      await engine?.stop();
    });

    it('lists the listening port with the process that listens and its proxy URL', async () => {
      const listed = await engine.request('GET', `/v1/sessions/${sid}/ports`);
      expect(listed.status).toBe(200);
      expect(listed.body.ports).toContainEqual({
        port: PORT,
        address: '127.0.0.1',
        tier: 'pooled',
        process: { id: webId, name: 'web' },
        kernel: null,
        url: `${proxy}/`,
        host: `${PORT}-${sid}.${DOMAIN}`,
      });
    });

    it('sends the server Host localhost:PORT and X-Forwarded-*, never the engine’s key', async () => {
      const hello = await send(engine, 'GET', `${proxy}/`, { headers: bearer(KEY_A) });
      expect([hello.status, hello.body.toString()]).toEqual([200, 'hello from the session\n']);
      const seen = json(await send(engine, 'GET', `${proxy}/headers?a=1`, { headers: bearer(KEY_A) }));
      expect(seen.path).toBe('/headers?a=1');
      expect(seen.headers).toMatchObject({
        host: `localhost:${PORT}`,
        'x-forwarded-proto': 'http',
        'x-forwarded-prefix': proxy,
        'x-forwarded-for': '127.0.0.1',
      });
      expect(seen.headers['x-forwarded-host']).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(seen.headers.authorization).toBeUndefined();
      // `…/ports/8000` (no slash): a browser is sent to the slash, so that relative links resolve under it.
      const bare = await send(engine, 'GET', `${proxy}?x=1`, { headers: bearer(KEY_A) });
      expect([bare.status, bare.headers.location]).toEqual([308, `${proxy}/?x=1`]);
      // The server's redirects and cookies stay under the port's path.
      const moved = await send(engine, 'GET', `${proxy}/redirect`, { headers: bearer(KEY_A) });
      expect(moved.status).toBe(302);
      expect(moved.headers.location).toBe(`${proxy}/target`);
      expect(moved.headers['set-cookie']).toEqual([`visited=1; Path=${proxy}/`]);
    });

    it('streams 10 MiB both ways without holding either body: the echo starts before the upload ends', async () => {
      const upload = randomBytes(10 * MiB);
      const sent = createHash('sha256').update(upload).digest('hex');
      let uploadDone = 0;
      let firstByte = 0;
      const echoed = await new Promise<Buffer>((resolve, reject) => {
        const req = http.request(
          `${engine.baseUrl}${proxy}/echo`,
          {
            method: 'POST',
            headers: {
              ...bearer(KEY_A),
              'content-type': 'application/json',
              'content-length': String(upload.length),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => {
              firstByte ||= performance.now();
              chunks.push(c);
            });
            res.on('end', () => resolve(Buffer.concat(chunks)));
          },
        );
        req.on('error', reject);
        // 64 KiB at a time, as a client streaming a file would.
        const parts = Readable.from(
          (function* () {
            for (let at = 0; at < upload.length; at += 64 * 1024) yield upload.subarray(at, at + 64 * 1024);
          })(),
        );
        parts.on('end', () => (uploadDone = performance.now()));
        parts.pipe(req);
      });
      expect(echoed.length).toBe(upload.length);
      expect(createHash('sha256').update(echoed).digest('hex')).toBe(sent);
      expect(firstByte).toBeGreaterThan(0);
      expect(firstByte).toBeLessThan(uploadDone);

      const blob = await send(engine, 'GET', `${proxy}/blob?bytes=${10 * MiB}`, { headers: bearer(KEY_A) });
      expect(blob.status).toBe(200);
      expect(blob.body.length).toBe(10 * MiB);
      expect(blob.body.subarray(256, 260)).toEqual(Buffer.from([0, 1, 2, 3]));
    });

    it('passes server-sent events on one by one: each arrives before the next is asked for', async () => {
      const stream = await SseClient.open(`${engine.baseUrl}${proxy}/events`, bearer(KEY_A));
      try {
        for (const n of [1, 2, 3]) {
          // Event n + 1 is sent only after /next: a proxy that held event n would leave this waiting.
          const event = await stream.waitFor((e) => e.event === 'tick' && e.data === n);
          expect(event.data).toBe(n);
          if (n < 3)
            expect((await send(engine, 'GET', `${proxy}/next`, { headers: bearer(KEY_A) })).status).toBe(204);
        }
      } finally {
        stream.close();
      }
    });

    it('upgrades a WebSocket to the server and passes frames both ways', async () => {
      const url = `${engine.baseUrl.replace('http:', 'ws:')}${proxy}/ws`;
      const ws = await openSocket(url, bearer(KEY_A));
      expect((await echo(ws, 'hello')).data.toString()).toBe('hello');
      const bytes = randomBytes(200_000);
      const back = await echo(ws, bytes);
      expect(back.binary).toBe(true);
      expect(back.data.equals(bytes)).toBe(true);
      expect(await closed(ws)).toBe(1000);
      await expect(openSocket(url, {})).rejects.toThrow('refused: 401');
      await expect(openSocket(url, bearer(KEY_B))).rejects.toThrow('refused: 404');
      await expect(openSocket(url, { ...bearer(KEY_A), origin: 'http://evil.example' })).rejects.toThrow(
        'refused: 403',
      );
    });

    it('answers 502 PORT_CLOSED, 400 naming `port`, 404 for another tenant and 401 without a key', async () => {
      const closedPort = await send(engine, 'GET', `/v1/sessions/${sid}/ports/9999/`, {
        headers: bearer(KEY_A),
      });
      expect([closedPort.status, json(closedPort).error.code]).toEqual([502, 'PORT_CLOSED']);
      expect(json(closedPort).error.message).toMatch(/nothing listens on port 9999/);
      // A session with no sandbox running: nothing is started to look.
      const idle = await engine.createSession();
      const none = await send(engine, 'GET', `/v1/sessions/${idle}/ports/${PORT}/`, {
        headers: bearer(KEY_A),
      });
      expect([none.status, json(none).error.code]).toEqual([502, 'PORT_CLOSED']);
      expect((await engine.request('GET', `/v1/sessions/${idle}/ports`)).body).toEqual({ ports: [] });
      for (const [port, code] of [
        ['http', 'INVALID_PORT'],
        ['70000', 'INVALID_PORT'],
        ['80', 'PORT_NOT_ALLOWED'],
      ]) {
        const bad = await send(engine, 'GET', `/v1/sessions/${sid}/ports/${port}/`, {
          headers: bearer(KEY_A),
        });
        expect([bad.status, json(bad).error.code, json(bad).error.fields[0].path]).toEqual([
          400,
          code,
          'port',
        ]);
      }
      // `…/preview` is the ports API's, whatever the method: never the app's path.
      const reserved = await send(engine, 'GET', `${proxy}/preview`, { headers: bearer(KEY_A) });
      expect([reserved.status, reserved.headers.allow]).toEqual([405, 'POST']);
      const other = await send(engine, 'GET', `${proxy}/`, { headers: bearer(KEY_B) });
      expect([other.status, json(other).error.code]).toEqual([404, 'NOT_FOUND']);
      expect((await engine.as(KEY_B).request('GET', `/v1/sessions/${sid}/ports`)).status).toBe(404);
      engine.as(KEY_A);
      const anonymous = await send(engine, 'GET', `${proxy}/`);
      expect([anonymous.status, anonymous.headers['www-authenticate']]).toEqual([
        401,
        'Bearer realm="switchyard"',
      ]);
    });

    it('a preview link: the token becomes a cookie for the port’s path, the URL loses it, and the cookie opens the port', async () => {
      const made = await engine.request('POST', `${proxy}/preview`, { ttlSeconds: 600 });
      expect(made.status).toBe(201);
      expect(made.body).toMatchObject({
        url: `${proxy}/?switchyard_token=${encodeURIComponent(made.body.token)}`,
        host: `${PORT}-${sid}.${DOMAIN}`,
      });
      expect(Date.parse(made.body.expiresAt) - Date.now()).toBeGreaterThan(590_000);
      const first = await send(engine, 'GET', made.body.url.replace('/?', '/headers?a=1&'));
      expect(first.status).toBe(307);
      expect(first.headers.location).toBe(`${proxy}/headers?a=1`);
      const cookie = first.headers['set-cookie']![0];
      expect(cookie).toMatch(
        new RegExp(
          `^switchyard_preview=[\\w.-]+; Path=${proxy}/; Max-Age=(599|600); HttpOnly; SameSite=Lax$`,
        ),
      );
      const pair = cookie.split(';')[0];
      const page = await send(engine, 'GET', first.headers.location!, {
        headers: { cookie: `${pair}; app=1` },
      });
      expect(page.status).toBe(200);
      // The server gets its own cookies, not the engine's token.
      expect(json(page).headers.cookie).toBe('app=1');

      // The token opens this session's port only, until it expires; a forged one nothing.
      const otherPort = await send(engine, 'GET', `/v1/sessions/${sid}/ports/8001/`, {
        headers: { cookie: pair },
      });
      expect(otherPort.status).toBe(401);
      const forged = await send(
        engine,
        'GET',
        `${proxy}/?switchyard_token=${made.body.token.slice(0, -4)}AAAA`,
      );
      expect([forged.status, json(forged).error.code]).toEqual([401, 'UNAUTHENTICATED']);
      const config = { apiKeys: [KEY_A, KEY_B], policy: { adminKeys: [] } } as unknown as EngineConfig;
      const hourAgo = { now: () => new Date(Date.now() - 3_600_000), monotonic: () => 0 };
      const expired = new AccessTokens(config, hourAgo).issue(
        new ApiKeys(config).principalOf(KEY_A),
        sid,
        `port:${PORT}`,
        60,
      );
      expect((await send(engine, 'GET', `${proxy}/?switchyard_token=${expired.token}`)).status).toBe(401);
      expect(
        (
          await send(engine, 'GET', `${proxy}/`, {
            headers: { cookie: `switchyard_preview=${expired.token}` },
          })
        ).status,
      ).toBe(401);
      // A preview of a port the engine does not open is refused when asked for.
      const privileged = await engine.request('POST', `/v1/sessions/${sid}/ports/22/preview`, {});
      expect([privileged.status, privileged.body.error.fields[0].path]).toEqual([400, 'port']);
      const badTtl = await engine.request('POST', `${proxy}/preview`, { ttlSeconds: 0 });
      expect([badTtl.status, badTtl.body.error.fields[0].path]).toEqual([400, 'ttlSeconds']);
      // A body that is JSON but not an object is refused (only no body at all means no options).
      const nullBody = await engine.request('POST', `${proxy}/preview`, undefined, { raw: 'null' });
      expect(nullBody.status).toBe(400);
    });

    it('a preview host serves the app at / with the same authentication, its token kept in a cookie of that host', async () => {
      const host = `${PORT}-${sid}.${DOMAIN}`;
      const withKey = json(await send(engine, 'GET', '/headers', { headers: { host, ...bearer(KEY_A) } }));
      expect(withKey).toMatchObject({ path: '/headers', headers: { host: `localhost:${PORT}` } });
      expect(withKey.headers['x-forwarded-prefix']).toBeUndefined();
      // Any path is the app's, the engine's API paths included.
      expect(
        (await send(engine, 'GET', '/v1/sessions', { headers: { host, ...bearer(KEY_A) } })).status,
      ).toBe(404);
      expect((await send(engine, 'GET', '/', { headers: { host } })).status).toBe(401);
      const { token } = (await engine.request('POST', `${proxy}/preview`, {})).body;
      const first = await send(engine, 'GET', `/?switchyard_token=${token}`, { headers: { host } });
      expect([first.status, first.headers.location]).toEqual([307, '/']);
      expect(first.headers['set-cookie']![0]).toMatch(/; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
      const pair = first.headers['set-cookie']![0].split(';')[0];
      const page = await send(engine, 'GET', '/', { headers: { host, cookie: pair } });
      expect(page.body.toString()).toBe('hello from the session\n');
      // The session's own host only: the token of this port opens no other session's.
      const otherSession = await engine.createSession();
      const elsewhere = await send(engine, 'GET', '/', {
        headers: { host: `${PORT}-${otherSession}.${DOMAIN}`, cookie: pair },
      });
      expect(elsewhere.status).toBe(401);
      // A browser's WebSocket carries the cookie of its page's host.
      const ws = await openSocket(`${engine.baseUrl.replace('http:', 'ws:')}/ws`, { host, cookie: pair });
      expect((await echo(ws, 'at the root')).data.toString()).toBe('at the root');
      expect(await closed(ws)).toBe(1000);
    });

    it("goes through the container's relay socket, and never follows a link the session's code plants there", async () => {
      // The session's container: the one whose mount point holds the session's workspace (its files are there).
      const containers = await new Dockerode().listContainers();
      const mounts = await Promise.all(
        containers.map(async (c) => (await new Dockerode().getContainer(c.Id).inspect()).Mounts),
      );
      const relayDir = mounts
        .map((m) => ({
          workspace: m.find((x) => x.Destination === '/workspace')?.Source,
          relay: m.find((x) => x.Destination === '/run/switchyard-relay')?.Source,
        }))
        .find((m) => m.workspace && m.relay && existsSync(path.join(m.workspace, 'ports_app.py')))?.relay;
      expect(relayDir).toBeDefined();
      expect(lstatSync(path.join(relayDir!, 'relay.sock')).isSocket()).toBe(true);

      // A socket of the host's, which the engine must never be led to.
      const bait = path.join(os.tmpdir(), `ports-e2e-bait-${process.pid}.sock`);
      let reached = 0;
      const host = net.createServer((socket) => {
        reached++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => host.listen(bait, resolve));
      try {
        // The relay's directory is the box's to write: its code swaps the socket for a link to the host's.
        const planted = await engine.action(sid, {
          type: 'code',
          language: 'bash',
          code: `cd /run/switchyard-relay && mv relay.sock kept.sock && ln -s ${bait} relay.sock && echo planted`,
          tier: 'pooled',
        });
        expect(planted).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: 'planted\n' });
        expect(lstatSync(path.join(relayDir!, 'relay.sock')).isSymbolicLink()).toBe(true);

        // The engine opens the path without following it, sees no socket, and goes through the runner's stdio.
        const answer = await send(engine, 'GET', `${proxy}/`, { headers: bearer(KEY_A) });
        expect(answer.status).toBe(200);
        expect(answer.body.toString()).toBe('hello from the session\n');
        expect(reached).toBe(0);
      } finally {
        await engine.action(sid, {
          type: 'code',
          language: 'bash',
          code: 'cd /run/switchyard-relay && rm -f relay.sock && mv kept.sock relay.sock',
          tier: 'pooled',
        });
        await new Promise((resolve) => host.close(resolve));
      }
      // Put back, the relay serves again.
      const again = await send(engine, 'GET', `${proxy}/`, { headers: bearer(KEY_A) });
      expect(again.status).toBe(200);
    });

    it('records every proxied request as a `process` `connect` action, linked in the graph to the process it reached', async () => {
      const events = await SseClient.open(`${engine.baseUrl}/v1/sessions/${sid}/events`, bearer(KEY_A));
      try {
        const size = 123_457;
        const fetched = await send(engine, 'GET', `${proxy}/blob?bytes=${size}`, { headers: bearer(KEY_A) });
        expect(fetched.body.length).toBe(size);
        // The stream replays the session's earlier events first: each completed action is looked at until it is this one.
        const looked = new Set<string>();
        let action: { body: any } | undefined;
        while (action === undefined) {
          const done = await events.waitFor(
            (e) => e.event === 'action.completed' && !looked.has(e.data.actionId),
          );
          looked.add(done.data.actionId);
          const seen = await engine.request('GET', `/v1/sessions/${sid}/actions/${done.data.actionId}`);
          if (seen.body.output?.path === `/blob?bytes=${size}`) action = seen;
        }
        expect(
          events.events.some(
            (e) =>
              e.event === 'action.started' &&
              e.data.actionId === action.body.id &&
              e.data.operation === 'connect',
          ),
        ).toBe(true);
        expect(action.body).toMatchObject({
          type: 'process',
          status: 'succeeded',
          tier: 'pooled',
          inputSummary: `GET /blob?bytes=${size} on port ${PORT}`,
          output: {
            port: PORT,
            via: 'path',
            method: 'GET',
            path: `/blob?bytes=${size}`,
            status: 200,
            bytesIn: 0,
            bytesOut: size,
            processId: webId,
          },
        });
      } finally {
        events.close();
      }
      const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
      const connects = new Set(
        graph.nodes
          .filter((n: any) => n.label === 'Action' && n.properties.operation === 'connect')
          .map((n: any) => n.id),
      );
      const reached = graph.edges.filter((e: any) => e.type === 'REACHED');
      expect(reached.length).toBeGreaterThanOrEqual(10);
      for (const edge of reached) {
        expect(connects.has(edge.from)).toBe(true);
        expect(edge).toMatchObject({ to: `process:${webId}`, properties: { port: PORT } });
      }
      // The 10 MiB echo, and the WebSockets: their bytes each way, and the 101.
      const listed = (await engine.request('GET', `/v1/sessions/${sid}/actions?limit=1000`)).body
        .actions as any[];
      const outputs = listed.filter((a) => a.type === 'process' && a.output?.via !== undefined);
      expect(outputs.map((a) => a.output)).toContainEqual(
        expect.objectContaining({ path: '/echo', status: 200, bytesIn: 10 * MiB, bytesOut: 10 * MiB }),
      );
      expect(outputs.map((a) => a.output)).toContainEqual(
        expect.objectContaining({ path: '/ws', websocket: true, status: 101 }),
      );
    });
  });

  describe('in the subprocess tier’s box (Docker off)', () => {
    let engine: EngineHarness;
    beforeAll(async () => {
      engine = await EngineHarness.start({
        DOCKER_HOST: 'unix:///nonexistent/switchyard-ports/docker.sock',
        SWITCHYARD_PORTS_ALLOWED: '8000-8099',
      });
    });
    afterAll(async () => {
      await engine?.stop();
    });

    it('reaches a server in the session’s bubblewrap box: HTTP and a WebSocket, and the allowed ports hold', async () => {
      const sid = await engine.createSession();
      const webId = await startApp(engine, sid);
      const listed = (await engine.request('GET', `/v1/sessions/${sid}/ports`)).body.ports;
      expect(listed).toContainEqual(
        expect.objectContaining({ port: PORT, tier: 'subprocess', process: { id: webId, name: 'web' } }),
      );
      const proxy = `/v1/sessions/${sid}/ports/${PORT}`;
      const hello = await send(engine, 'GET', `${proxy}/`);
      expect([hello.status, hello.body.toString()]).toEqual([200, 'hello from the session\n']);
      const ws = await openSocket(`${engine.baseUrl.replace('http:', 'ws:')}${proxy}/ws`, {});
      expect((await echo(ws, 'in the box')).data.toString()).toBe('in the box');
      expect(await closed(ws)).toBe(1000);
      const outside = await send(engine, 'GET', `/v1/sessions/${sid}/ports/3000/`);
      expect([outside.status, json(outside).error.code]).toEqual([400, 'PORT_NOT_ALLOWED']);
      expect(json(outside).error.message).toContain(
        'the allowed ports are 8000-8099 (SWITCHYARD_PORTS_ALLOWED)',
      );
    });
  });

  describe('switched off (SWITCHYARD_PORTS_ENABLED=false)', () => {
    let engine: EngineHarness;
    beforeAll(async () => {
      engine = await EngineHarness.start({
        DOCKER_HOST: 'unix:///nonexistent/switchyard-ports/docker.sock',
        SWITCHYARD_PORTS_ENABLED: 'false',
      });
    });
    afterAll(async () => {
      await engine?.stop();
    });

    it('answers 403 PORTS_DISABLED to the proxy and to a preview', async () => {
      const sid = await engine.createSession();
      const proxied = await send(engine, 'GET', `/v1/sessions/${sid}/ports/${PORT}/`);
      expect([proxied.status, json(proxied).error.code]).toEqual([403, 'PORTS_DISABLED']);
      expect(json(proxied).error.message).toContain('SWITCHYARD_PORTS_ENABLED=false');
      const preview = await engine.request('POST', `/v1/sessions/${sid}/ports/${PORT}/preview`, {});
      expect([preview.status, preview.body.error.code]).toEqual([403, 'PORTS_DISABLED']);
    });
  });
});
