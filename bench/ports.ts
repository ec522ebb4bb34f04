/**
 * Ports (issue 32): a request to a server in a session's sandbox through the engine's proxy, against raw ways of
 * reaching the same server in the same run, samples interleaved. The server is test/support/ports_app.py, started as a
 * `process` action in the session's pooled container.
 *
 *   - proxied: `GET /v1/sessions/{id}/ports/8000/` from a client process of its own (a kept-alive connection to the
 *     engine, as a caller has; timed there, so the engine's event loop is not also the client's); the engine opens a
 *     connection to the port through the container's runner per request (its relay socket: raw bytes);
 *   - docker exec curl: `docker exec <container> curl -s http://127.0.0.1:8000/`, the way one reaches it by hand;
 *   - loopback in the container: a Python client inside the container (started once with `docker exec -i`) timing its
 *     own `GET /` over a new connection per request: the floor, what the server costs with no proxy at all.
 *   - a bare Node reverse proxy in the container (port 8001, no authentication, record or runner), asked over a
 *     kept-alive connection: what one more process hop costs here, the least any proxy can add to the floor;
 *   - the tunnel alone: `SessionPorts.connect` in the engine's process and one HTTP/1.1 exchange written on the
 *     stream by hand, without the proxy's HTTP handling, authentication or recording: what the runner's tunnel costs;
 *   - WebSocket echo: one small message to the server's `/ws` and back, through the proxy vs the same client loop
 *     inside the container on a WebSocket of its own.
 *
 * Prints median, p90 and p99 with run counts, and the ratios (the target: proxied <= 1.2x the loopback floor).
 * Called by `run.ts` (`BENCH_ONLY=ports`); `node dist/bench/ports.js` runs it alone.
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import WebSocket from 'ws';
import { SessionPorts } from '../libs/sandbox/src';
import { startEngine, until } from './engine-client';
import { median, ms, pct } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
const PORT = 8000;
/** The bare proxy's port (see MINIMAL_PROXY). */
const HOP_PORT = 8001;
const TARGET = 1.2;

/** Inside the container: one timed sample per stdin line, `get` (a new connection each) or `ws` (one socket). */
const RAW_DRIVER = `
import base64, http.client, os, socket, sys, time
def get():
    t = time.perf_counter()
    c = http.client.HTTPConnection('127.0.0.1', ${PORT})
    c.request('GET', '/')
    body = c.getresponse().read()
    c.close()
    assert body == b'hello from the session\\n', body
    return (time.perf_counter() - t) * 1000
ws = socket.create_connection(('127.0.0.1', ${PORT}))
ws.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
key = base64.b64encode(os.urandom(16)).decode()
ws.sendall(('GET /ws HTTP/1.1\\r\\nHost: localhost\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n'
            'Sec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n' % key).encode())
seen = b''
while b'\\r\\n\\r\\n' not in seen:
    seen += ws.recv(4096)
def echo():
    mask = os.urandom(4)
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(b'ping'))
    t = time.perf_counter()
    ws.sendall(bytes([0x81, 0x84]) + mask + data)
    got = b''
    while len(got) < 6:
        got += ws.recv(64)
    assert got[2:6] == b'ping', got
    return (time.perf_counter() - t) * 1000
hop_conn = None
def hop():
    global hop_conn
    if hop_conn is None:
        hop_conn = http.client.HTTPConnection('127.0.0.1', ${HOP_PORT})
    t = time.perf_counter()
    hop_conn.request('GET', '/')
    body = hop_conn.getresponse().read()
    assert body == b'hello from the session\\n', body
    return (time.perf_counter() - t) * 1000
print('ready', flush=True)
for line in sys.stdin:
    kind = line.strip()
    print(get() if kind == 'get' else hop() if kind == 'hop' else echo(), flush=True)
`;

/**
 * The least any proxy can cost here: a bare Node reverse proxy in the container (no authentication, no record, no
 * runner), one new connection to the server per request as the engine makes, asked over a kept-alive connection as
 * the engine is. Its ratio to the loopback floor is what one more process hop costs on this machine.
 */
const MINIMAL_PROXY =
  `const http = require('node:http');` +
  `http.createServer((req, res) => {` +
  `  const up = http.request({ host: '127.0.0.1', port: ${PORT}, path: req.url, method: req.method,` +
  `    headers: req.headers, agent: false }, (a) => { res.writeHead(a.statusCode, a.headers); a.pipe(res); });` +
  `  req.pipe(up);` +
  `}).listen(${HOP_PORT}, '127.0.0.1');`;

async function rawSide(
  container: string,
): Promise<{ sample(kind: 'get' | 'hop' | 'ws'): Promise<number>; close(): void }> {
  const driver = spawn('docker', ['exec', '-i', container, 'python3', '-u', '-c', RAW_DRIVER], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: driver.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error('bench: the in-container client ended');
    return line.value;
  };
  if ((await next()) !== 'ready') throw new Error('bench: the in-container client did not start');
  return {
    sample: async (kind) => {
      driver.stdin.write(`${kind}\n`);
      return Number(await next());
    },
    close: () => driver.stdin.end(),
  };
}

/** `docker exec <container> curl` of the same URL, timed from here (what reaching it by hand costs). */
function dockerCurl(container: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('docker', ['exec', container, 'curl', '-s', `http://127.0.0.1:${PORT}/`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 && out === 'hello from the session\n'
        ? resolve(performance.now() - t0)
        : reject(new Error(`bench: docker exec curl exit ${code}: ${out}`)),
    );
  });
}

/** A GET written by hand on a tunnel to the port, through the engine's `SessionPorts` (no proxy, no record). */
async function tunnelGet(ports: SessionPorts, sid: string): Promise<number> {
  const t0 = performance.now();
  const { stream } = await ports.connect(sid, PORT);
  stream.end('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  let answer = '';
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (d: Buffer) => (answer += d.toString()));
    stream.on('end', () => resolve());
    stream.on('error', reject);
  });
  const elapsed = performance.now() - t0;
  stream.destroy();
  if (!answer.endsWith('hello from the session\n'))
    throw new Error(`bench: tunnel GET: ${answer.slice(0, 200)}`);
  return elapsed;
}

/**
 * The caller: a Node process of its own timing each proxied GET (one per stdin line) over a kept-alive connection,
 * as an outside client would be; in this process the client would share the engine's event loop.
 */
const CALLER = `
const http = require('node:http');
const readline = require('node:readline');
const [expected, ...urls] = process.argv.slice(1);
const agents = urls.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
function get(i) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    http.get(urls[i], { agent: agents[i] }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => res.statusCode === 200 && body === expected
        ? resolve(performance.now() - t0)
        : reject(new Error('proxied GET ' + res.statusCode + ': ' + body.slice(0, 200))));
    }).on('error', reject);
  });
}
console.log('ready');
readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  try { console.log(await get(Number(line))); } catch (err) { console.error(String(err)); process.exit(1); }
});
`;

async function callerSide(urls: string[]): Promise<{ sample(i: number): Promise<number>; close(): void }> {
  const caller = spawn(process.execPath, ['-e', CALLER, 'hello from the session\n', ...urls], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: caller.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error('bench: the caller process ended');
    return line.value;
  };
  if ((await next()) !== 'ready') throw new Error('bench: the caller process did not start');
  return {
    sample: async (i) => {
      caller.stdin.write(`${i}\n`);
      return Number(await next());
    },
    close: () => caller.stdin.end(),
  };
}

/** A proxied GET over a kept-alive connection to the engine, from this process (the engine's own event loop). */
function proxiedGet(agent: http.Agent, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () =>
          res.statusCode === 200 && body === 'hello from the session\n'
            ? resolve(performance.now() - t0)
            : reject(new Error(`bench: proxied GET ${res.statusCode}: ${body.slice(0, 200)}`)),
        );
      })
      .on('error', reject);
  });
}

/** A WebSocket to the server through the proxy: `echo()` times one small message there and back. */
async function proxiedSocket(url: string): Promise<{ echo(): Promise<number>; close(): void }> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  return {
    echo: () =>
      new Promise((resolve) => {
        const t0 = performance.now();
        ws.once('message', () => resolve(performance.now() - t0));
        ws.send('ping');
      }),
    close: () => ws.close(),
  };
}

const line = (name: string, xs: number[]): string =>
  `  ${name.padEnd(44)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;

function ratios(side: number[], base: number[], what: string, target?: number): void {
  for (const [label, p] of [
    ['median', 50],
    ['p90', 90],
    ['p99', 99],
  ] as const) {
    const r = pct(side, p) / pct(base, p);
    const verdict =
      target === undefined || label === 'p99'
        ? ''
        : ` (target <= ${target}x) ${r <= target ? 'OK' : 'MISSED'}`;
    console.log(`  ${label.padEnd(6)} ${what} = ${r.toFixed(2)}x${verdict}`);
  }
}

export async function benchPorts(options: { runs: number }): Promise<void> {
  const samples = Math.max(200, options.runs * 5);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-ports-'));
  const engine = await startEngine(dataDir, { SWITCHYARD_POOL_MIN: '1' });
  try {
    console.log(
      '\nPorts: GET / of a server in the session (pooled tier), proxied vs docker exec curl vs loopback',
    );
    const pooled = await engine.health('pooled');
    if (!pooled.available) {
      console.log(`  skipped: the pooled tier is unavailable (${pooled.reason ?? 'unknown'})`);
      return;
    }
    const sid = await engine.newSession();
    const container = await engine.sandboxOf(sid, await engine.print1(sid, 'pooled'));
    const app = readFileSync(path.join(REPO, 'test', 'support', 'ports_app.py'), 'utf8');
    const written = await engine.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'file',
      op: 'write',
      path: 'ports_app.py',
      content: app,
    });
    if (written.status !== 'succeeded') throw new Error(`bench: app not written: ${JSON.stringify(written)}`);
    const started = await engine.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'process',
      op: 'start',
      command: `python3 -u ports_app.py ${PORT}`,
    });
    if (started.tier !== 'pooled') throw new Error(`bench: server not started: ${JSON.stringify(started)}`);
    const hopStarted = await engine.call('POST', `/v1/sessions/${sid}/actions`, {
      type: 'process',
      op: 'start',
      command: `node -e ${JSON.stringify(MINIMAL_PROXY)}`,
    });
    if (hopStarted.tier !== 'pooled') throw new Error(`bench: minimal proxy: ${JSON.stringify(hopStarted)}`);
    await until(
      async () => {
        const open = (await engine.call('GET', `/v1/sessions/${sid}/ports`)).ports as Array<{ port: number }>;
        return [PORT, HOP_PORT].every((port) => open.some((p) => p.port === port));
      },
      30_000,
      'the server and the minimal proxy listening',
      50,
    );
    const base = (engine.app.getHttpServer() as { address(): { port: number } }).address().port;
    const url = `http://127.0.0.1:${base}/v1/sessions/${sid}/ports/${PORT}/`;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const raw = await rawSide(container);
    const ports = engine.app.get(SessionPorts);
    const caller = await callerSide([url]);
    const times = {
      proxied: [] as number[],
      inProcess: [] as number[],
      curl: [] as number[],
      loopback: [] as number[],
      hop: [] as number[],
      tunnel: [] as number[],
    };
    // docker exec costs tens of ms: fewer of those, spread through the run.
    const curlEvery = 5;
    for (let i = 0; i < samples + 10; i++) {
      const p = await caller.sample(0);
      const q = await proxiedGet(agent, url);
      const l = await raw.sample('get');
      const h = await raw.sample('hop');
      const t = await tunnelGet(ports, sid);
      const c = i % curlEvery === 0 ? await dockerCurl(container) : undefined;
      if (i < 10) continue; // warm-up: the engine's and the driver's first requests
      times.proxied.push(p);
      times.inProcess.push(q);
      times.loopback.push(l);
      times.hop.push(h);
      times.tunnel.push(t);
      if (c !== undefined) times.curl.push(c);
    }
    agent.destroy();
    caller.close();
    console.log(line('loopback in the container (python client)', times.loopback));
    console.log(line('a bare Node proxy in the container', times.hop));
    console.log(line('docker exec curl', times.curl));
    console.log(line('the tunnel alone (SessionPorts, no proxy)', times.tunnel));
    console.log(line('proxied through the engine', times.proxied));
    console.log(line('proxied, the client in the engine process', times.inProcess));
    ratios(times.proxied, times.loopback, 'proxied / loopback', TARGET);
    ratios(times.proxied, times.curl, 'proxied / docker exec curl');
    ratios(times.tunnel, times.loopback, 'tunnel alone / loopback');
    ratios(times.hop, times.loopback, 'bare Node proxy / loopback (any proxy hop)');
    ratios(times.proxied, times.hop, 'proxied / bare Node proxy');

    console.log('  WebSocket echo round trip (4 bytes), proxied vs the same in the container:');
    const ws = await proxiedSocket(`ws://127.0.0.1:${base}/v1/sessions/${sid}/ports/${PORT}/ws`);
    const echo = { proxied: [] as number[], loopback: [] as number[] };
    for (let i = 0; i < samples + 10; i++) {
      const p = await ws.echo();
      const l = await raw.sample('ws');
      if (i < 10) continue;
      echo.proxied.push(p);
      echo.loopback.push(l);
    }
    ws.close();
    raw.close();
    console.log(line('WebSocket loopback in the container', echo.loopback));
    console.log(line('WebSocket proxied through the engine', echo.proxied));
    ratios(echo.proxied, echo.loopback, 'proxied / loopback');
    await engine.endSession(sid);
  } finally {
    await engine.app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchPorts({ runs: Number(process.env.BENCH_RUNS ?? 40) }).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
