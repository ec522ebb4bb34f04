import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { RunnerRefusedError } from './runner.errors';
import { dialRelay, RelayUnavailableError } from './runner-relay';

const accepted: net.Socket[] = [];

/** A stand-in for the runner's relay: `answer` gets each connection's first line and the socket. */
async function relay(
  file: string,
  answer: (line: string, socket: net.Socket) => void,
): Promise<{ server: net.Server; lines: string[] }> {
  const lines: string[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    accepted.push(socket);
    let seen = '';
    const onData = (d: Buffer) => {
      seen += d.toString();
      const newline = seen.indexOf('\n');
      if (newline < 0) return;
      socket.removeListener('data', onData);
      lines.push(seen.slice(0, newline));
      answer(seen.slice(0, newline), socket);
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(file, resolve));
  return { server, lines };
}

describe('dialRelay', () => {
  let dir: string;
  const servers: net.Server[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'relay-'));
  });
  afterEach(async () => {
    for (const socket of accepted.splice(0)) socket.destroy();
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sends the port, reads ok with the owner, then carries bytes both ways, a server speaking first included', async () => {
    const file = path.join(dir, 'relay.sock');
    const { server, lines } = await relay(file, (_line, socket) => {
      socket.write('ok prc_1 -\nhello first');
      socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
    });
    servers.push(server);
    const { socket, proc, kernel } = await dialRelay(file, 8000);
    expect(lines).toEqual(['8000']);
    expect([proc, kernel]).toEqual(['prc_1', null]);
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString()));
    socket.write('ping');
    await until(() => got === 'hello firstecho:ping');
    socket.destroy();
  });

  it('names the kernel when a kernel holds the port', async () => {
    const file = path.join(dir, 'relay.sock');
    const { server } = await relay(file, (_line, socket) => socket.write('ok - krn_2\n'));
    servers.push(server);
    const { socket, proc, kernel } = await dialRelay(file, 8888);
    expect([proc, kernel]).toEqual([null, 'krn_2']);
    socket.destroy();
  });

  it("gives the runner's refusal as RunnerRefusedError with its code", async () => {
    const file = path.join(dir, 'relay.sock');
    const { server } = await relay(file, (_line, socket) =>
      socket.end('err connect nothing accepts connections on port 9: 127.0.0.1: connection refused\n'),
    );
    servers.push(server);
    const refused = await dialRelay(file, 9).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RunnerRefusedError);
    expect((refused as RunnerRefusedError).code).toBe('connect');
    expect((refused as Error).message).toBe(
      'nothing accepts connections on port 9: 127.0.0.1: connection refused',
    );
  });

  it('never follows a symlink planted where the socket should be (the other socket gets no connection)', async () => {
    const target = path.join(dir, 'elsewhere.sock');
    let reached = 0;
    const other = net.createServer((socket) => {
      reached++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => other.listen(target, resolve));
    servers.push(other);
    const file = path.join(dir, 'relay.sock');
    fs.symlinkSync(target, file);
    await expect(dialRelay(file, 80)).rejects.toThrow(new RelayUnavailableError(`${file} is not a socket`));
    await new Promise((r) => setTimeout(r, 50));
    expect(reached).toBe(0);
  });

  it('refuses what is not a socket, and a path with nothing there', async () => {
    const file = path.join(dir, 'relay.sock');
    fs.writeFileSync(file, '');
    await expect(dialRelay(file, 80)).rejects.toThrow(RelayUnavailableError);
    await expect(dialRelay(path.join(dir, 'none.sock'), 80)).rejects.toThrow(
      new RelayUnavailableError(`${path.join(dir, 'none.sock')}: ENOENT`),
    );
  });

  it('a relay that never answers is unavailable, not a refusal', async () => {
    const file = path.join(dir, 'relay.sock');
    const { server } = await relay(file, () => undefined);
    servers.push(server);
    await expect(dialRelay(file, 80, 100)).rejects.toThrow(
      new RelayUnavailableError(`the relay at ${file} did not answer within 100 ms`),
    );
  });
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}
