/**
 * Runner protocol 5's tunnels and ports for real: servers inside a bubblewrap box (the runner's own pid and network
 * namespaces, as in the subprocess tier), reached only through `RunnerConnection.openTunnel`: HTTP through the Duplex,
 * 20 MiB both ways under flow control, half-close, refusal, the runner's death; and `listPorts` naming the process or
 * kernel that listens. Then, shorter, in the real sandbox image through Docker (its python, Docker's seccomp profile,
 * a container with no network).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import {
  BOX_ENV,
  eventually,
  requireBubblewrap,
  type RunnerBox,
  sandboxImage,
  startRunnerBox,
  startRunnerContainer,
  stopRunnerBox,
} from '../test/runner-box';
import { RunnerRefusedError } from './core/runner/runner.errors';
import { type RunnerTunnel, TunnelError } from './core/runner/runner-tunnel';

requireBubblewrap();

const MiB = 1024 * 1024;
const TRANSFER = 20 * MiB;

// `python3 servers.py <mode> <port>`: the servers these tests reach, run as the box's background processes.
const SERVERS = String.raw`
import hashlib, socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
# A small fixed receive buffer: the kernel cannot absorb the upload (autotuning grows it to megabytes otherwise).
listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
listener.bind(("127.0.0.1", port))
listener.listen(16)
while True:
    conn, _ = listener.accept()
    if mode == "echo":  # echoes until the client shuts its side, then says bye and closes
        while data := conn.recv(65536):
            conn.sendall(data)
        conn.sendall(b"bye")
    elif mode == "both":  # sends 20 MiB reading nothing, then reads to EOF and answers its size and sha256
        block = bytes(range(256)) * 256
        for _ in range(320):
            conn.sendall(block)
        digest, total = hashlib.sha256(), 0
        while data := conn.recv(1 << 20):
            digest.update(data)
            total += len(data)
        conn.sendall(("\n%d %s\n" % (total, digest.hexdigest())).encode())
    elif mode == "hold":
        time.sleep(100)
    conn.close()
`;

/** GET `path` through `tunnel`: the status and body. */
function get(tunnel: RunnerTunnel, path: string): Promise<{ status?: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { createConnection: () => tunnel, path, headers: { connection: 'close' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      },
    );
    request.on('error', reject);
    request.end();
  });
}

/** Bytes of the pattern the "both" server sends, and the client uploads. */
function pattern(bytes: number): Buffer {
  const block = Buffer.alloc(65536);
  for (let i = 0; i < block.length; i++) block[i] = i % 256;
  return Buffer.concat(Array.from({ length: bytes / block.length }, () => block));
}

describe('runner tunnels and ports (protocol 5) in a bubblewrap box', () => {
  let box: RunnerBox;

  beforeAll(async () => {
    box = startRunnerBox();
    await box.connection.hello;
    fs.writeFileSync(path.join(box.dir, 'servers.py'), SERVERS);
    fs.writeFileSync(path.join(box.dir, 'hello.txt'), 'hello from the box\n');
    const start = (proc: string, command: string) =>
      box.connection.procStart({ proc, command, cwd: '', env: BOX_ENV, workspace: box.workspace });
    await start('prc_http', 'exec python3 -m http.server 8080 --bind 127.0.0.1');
    await start('prc_echo', 'exec python3 servers.py echo 8081');
    await start('prc_both', 'exec python3 servers.py both 8082');
    await eventually(async () => (await box.connection.listPorts()).length === 3);
  });

  afterAll(() => stopRunnerBox(box));

  it('lists the listening ports with the process holding each', async () => {
    await expect(box.connection.listPorts()).resolves.toEqual([
      { port: 8080, address: '127.0.0.1', proc: 'prc_http', kernel: null },
      { port: 8081, address: '127.0.0.1', proc: 'prc_echo', kernel: null },
      { port: 8082, address: '127.0.0.1', proc: 'prc_both', kernel: null },
    ]);
  });

  it('carries an HTTP request and its response through the tunnel', async () => {
    const tunnel = await box.connection.openTunnel(8080);
    expect([tunnel.proc, tunnel.kernel]).toEqual(['prc_http', null]);
    await expect(get(tunnel, '/hello.txt')).resolves.toEqual({ status: 200, body: 'hello from the box\n' });
  });

  it('half-closes: the server sees the end and still answers after it', async () => {
    const tunnel = await box.connection.openTunnel(8081);
    tunnel.end('ping');
    let read = '';
    for await (const chunk of tunnel) read += (chunk as Buffer).toString('utf8');
    expect(read).toBe('pingbye');
  });

  it('moves 20 MiB each way at once, with backpressure both ways and at most ~2 MiB held here', async () => {
    const tunnel = await box.connection.openTunnel(8082);
    let held = 0;
    const sample = () => (held = Math.max(held, tunnel.bufferedBytes));
    const sampler = setInterval(sample, 2);
    let produced = 0;
    const upload = Readable.from(
      (function* () {
        const chunk = pattern(64 * 1024);
        for (let sent = 0; sent < TRANSFER; sent += chunk.length) {
          produced += chunk.length;
          yield chunk;
        }
      })(),
    );
    upload.pipe(tunnel);
    const received: Buffer[] = [];
    let receivedBytes = 0;
    let producedWhenDownloaded = -1;
    // Reads nothing at first: the runner's window must stop the server's 20 MiB.
    await new Promise((r) => setTimeout(r, 300));
    sample();
    const heldWhilePaused = tunnel.bufferedBytes;
    for await (const chunk of tunnel as AsyncIterable<Buffer>) {
      sample();
      received.push(chunk);
      receivedBytes += chunk.length;
      if (producedWhenDownloaded < 0 && receivedBytes >= TRANSFER) producedWhenDownloaded = produced;
    }
    clearInterval(sampler);
    const all = Buffer.concat(received);
    expect(all.subarray(0, TRANSFER).equals(pattern(TRANSFER))).toBe(true);
    const digest = createHash('sha256').update(pattern(TRANSFER)).digest('hex');
    expect(all.subarray(TRANSFER).toString('utf8')).toBe(`\n${TRANSFER} ${digest}\n`);
    // Download: while nobody read, the engine held about the runner's window, not the server's 20 MiB.
    expect(heldWhilePaused).toBeGreaterThan(MiB / 2);
    expect(heldWhilePaused).toBeLessThan(1.5 * MiB);
    // Upload: until the server read anything (it sends first), the source was held back (by the runner's 1 MiB
    // queue and the kernel's socket buffers, about 6 MiB here), never buffered here.
    expect(producedWhenDownloaded).toBeLessThan(TRANSFER / 2);
    expect(held).toBeLessThan(2.5 * MiB);
  });

  it('refuses a port nothing listens on with code connect', async () => {
    const refused = box.connection.openTunnel(8099);
    await expect(refused).rejects.toBeInstanceOf(RunnerRefusedError);
    await expect(refused).rejects.toMatchObject({
      code: 'connect',
      message:
        'runner refused: nothing accepts connections on port 8099: 127.0.0.1: connection refused (ECONNREFUSED); ' +
        '::1: connection refused (ECONNREFUSED)',
    });
  });

  it('names a kernel that listens, and closes a tunnel whose server dies', async () => {
    await box.connection.kernelStart({
      kernel: 'krn_py',
      language: 'python',
      env: {},
      workspace: box.workspace,
    });
    const code = 'import socket\ns = socket.socket()\ns.bind(("127.0.0.1", 8083))\ns.listen()';
    const cell = box.connection.cell(
      {
        kernel: 'krn_py',
        code,
        env: {},
        timeoutMs: 10_000,
        graceMs: 1000,
        capBytes: 1 << 20,
        capLines: 1000,
      },
      () => undefined,
    );
    expect((await cell.done).ok).toBe(true);
    const tunnel = await box.connection.openTunnel(8083);
    expect([tunnel.proc, tunnel.kernel]).toEqual([null, 'krn_py']);
    const failed = new Promise<Error>((resolve) => tunnel.once('error', resolve));
    tunnel.resume();
    await box.connection.kernelStop('krn_py');
    // Accepted by nobody, the connection is reset when the listener goes with its kernel.
    await expect(failed).resolves.toMatchObject({
      message: 'tunnel to the box: connection reset by peer (ECONNRESET)',
    });
  });

  it('destroys every tunnel when the runner dies', async () => {
    const own = startRunnerBox();
    try {
      await own.connection.hello;
      fs.writeFileSync(path.join(own.dir, 'servers.py'), SERVERS);
      await own.connection.procStart({
        proc: 'prc_hold',
        command: 'exec python3 servers.py hold 8084',
        cwd: '',
        env: BOX_ENV,
        workspace: own.workspace,
      });
      await eventually(async () => (await own.connection.listPorts()).length === 1);
      const tunnels: RunnerTunnel[] = [
        await own.connection.openTunnel(8084),
        await own.connection.openTunnel(8084),
      ];
      const errors = tunnels.map((t) => new Promise<Error>((resolve) => t.once('error', resolve)));
      own.child.kill('SIGKILL');
      for (const err of await Promise.all(errors)) {
        expect(err).toBeInstanceOf(TunnelError);
        expect(err.message).toBe('tunnel to the box: the runner connection closed');
      }
      expect(tunnels.every((t) => t.destroyed)).toBe(true);
    } finally {
      await stopRunnerBox(own);
    }
  });
});

describe('runner tunnels and ports (protocol 5) in the sandbox image', () => {
  let box: RunnerBox;

  beforeAll(async () => {
    box = startRunnerContainer(sandboxImage(), `switchyard-runner-it-${randomBytes(4).toString('hex')}`);
    await box.connection.hello;
    fs.writeFileSync(path.join(box.dir, 'hello.txt'), 'hello from the image\n');
  });

  afterAll(() => stopRunnerBox(box));

  it('lists a server on every address and reaches it through a tunnel', async () => {
    await box.connection.procStart({
      proc: 'prc_http',
      command: 'exec python3 -m http.server 8080 --bind ::',
      cwd: '',
      env: BOX_ENV,
      workspace: box.workspace,
    });
    await expect(eventually(async () => (await box.connection.listPorts())[0])).resolves.toEqual({
      port: 8080,
      address: '::',
      proc: 'prc_http',
      kernel: null,
    });
    const tunnel = await box.connection.openTunnel(8080);
    expect(tunnel.proc).toBe('prc_http');
    await expect(get(tunnel, '/hello.txt')).resolves.toEqual({ status: 200, body: 'hello from the image\n' });
    await expect(box.connection.openTunnel(8081)).rejects.toMatchObject({ code: 'connect' });
  });
});
