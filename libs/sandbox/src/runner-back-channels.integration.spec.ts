/**
 * Runner protocol 6's back channels for real, as a Kubernetes pod uses them: the real runner in a bubblewrap box (its
 * own network namespace: no route anywhere, no directory shared with a socket of this host), `PodChannels` on this
 * side connecting what the box's code opens to sockets on this host. The box's code reaches an HTTP proxy through the
 * egress forwarder on 127.0.0.1:3128 (8 MiB each way under the tunnels' flow control), and both skill SDKs reach a
 * call socket through `SWITCHYARD_CALL_SOCKET`, for their run only.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { PodChannels } from './backends/kubernetes/pod-channels';
import { withCallSocket } from './core/call-channel';
import type { RunnerExit } from './core/runner/runner-protocol';
import type { CallChannel, SessionEgressAccess } from './core/sandbox.types';
import {
  BOX_ENV,
  requireBubblewrap,
  type RunnerBox,
  startRunnerBox,
  stopRunnerBox,
} from '../test/runner-box';

requireBubblewrap();

const MiB = 1024 * 1024;
const warn = jest.fn();

/** A forward proxy on a Unix socket: answers `POST` with the size and sha256 of the body and `n` MiB of zeros. */
function proxyServer(socketPath: string) {
  const heads: string[] = [];
  const server = net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let head: string | undefined;
    let length = 0;
    const digest = createHash('sha256');
    let got = 0;
    socket.on('data', (chunk: Buffer) => {
      if (head === undefined) {
        buffered = Buffer.concat([buffered, chunk]);
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buffered.subarray(0, end).toString('latin1');
        heads.push(head.split('\r\n')[0]);
        length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        chunk = buffered.subarray(end + 4);
      }
      digest.update(chunk);
      got += chunk.length;
      if (got < length) return;
      const body = Buffer.alloc(8 * MiB);
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nX-Got: ${got} ${digest.digest('hex')}\r\n` +
          'Connection: close\r\n\r\n',
      );
      socket.end(body);
    });
    socket.on('error', () => undefined);
  });
  return {
    heads,
    listening: new Promise<void>((resolve) => server.listen(socketPath, resolve)),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A skill channel's socket: answers `input` with `{n: 20}`, a call with its result, and records the output. */
function callServer(socketPath: string) {
  const outputs: unknown[] = [];
  const server = net.createServer((socket) => {
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const request = JSON.parse(buffered.slice(0, nl)) as Record<string, any>;
        buffered = buffered.slice(nl + 1);
        const answer: Record<string, unknown> = { id: request.id, ok: true };
        if (request.op === 'input') answer.input = { n: 20 };
        if (request.op === 'call')
          answer.result = { status: 'succeeded', output: { value: request.input.n * 2 } };
        if (request.op === 'return') outputs.push(request.output);
        socket.write(`${JSON.stringify(answer)}\n`);
      }
    });
    socket.on('error', () => undefined);
  });
  return {
    outputs,
    listening: new Promise<void>((resolve) => server.listen(socketPath, resolve)),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

describe('runner back channels (protocol 6) in a bubblewrap box, as a Kubernetes pod uses them', () => {
  let box: RunnerBox;
  let dir: string;

  beforeAll(async () => {
    box = startRunnerBox();
    await box.connection.hello;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-back-channels-'));
  });
  afterAll(async () => {
    await stopRunnerBox(box);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh python run in the box: its exit and stdout. */
  async function run(
    code: string,
    env: Record<string, string> = BOX_ENV,
    language: 'python' | 'node' = 'python',
  ) {
    let stdout = '';
    let stderr = '';
    const { exit } = box.connection.run(
      {
        language,
        code,
        env,
        timeoutMs: 30_000,
        cpuSeconds: 0,
        capBytes: 1 << 20,
        capLines: 10_000,
        workspace: box.workspace,
      },
      (fd, data) => {
        if (fd === 1) stdout += data.toString('utf8');
        else stderr += data.toString('utf8');
      },
    );
    const done: RunnerExit = await exit;
    return { done, stdout, stderr };
  }

  it("relays the box's proxy connections to the session's proxy on this host, 8 MiB each way", async () => {
    const proxy = proxyServer(path.join(dir, 'proxy.sock'));
    await proxy.listening;
    const channels = new PodChannels({ warn });
    await channels.ensureEgress(box.connection, { socketDir: dir } as SessionEgressAccess);
    const { done, stdout, stderr } = await run(
      [
        'import hashlib, urllib.request',
        'body = bytes(range(256)) * (8 * 4096)',
        "opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': 'http://127.0.0.1:3128'}))",
        "res = opener.open(urllib.request.Request('http://pypi.test/upload', data=body, method='POST'))",
        'data = res.read()',
        "print(res.status, res.headers['X-Got'], len(data), hashlib.sha256(body).hexdigest())",
      ].join('\n'),
    );
    expect([done.exitCode, stderr]).toEqual([0, '']);
    const [status, got, digest, received, sent] = stdout.trim().split(' ');
    expect([status, got, received]).toEqual(['200', String(8 * MiB), String(8 * MiB)]);
    expect(digest).toBe(sent);
    expect(proxy.heads).toContain('POST http://pypi.test/upload HTTP/1.1');
    // Nothing was refused: not even the runner's own check that the new forwarder listens, made before it answered.
    expect(warn).not.toHaveBeenCalled();
    await proxy.close();
  });

  it.each([
    [
      'python',
      'import sys\nsys.path.insert(0, "/opt/switchyard/runner")\nimport switchyard_skill\n' +
        'def main(input, ctx):\n    return {"twice": ctx.call("double", {"n": input["n"]})["output"]["value"]}\n' +
        'switchyard_skill.run(main)\n',
    ],
    [
      'node',
      "const { run } = require('/opt/switchyard/runner/switchyard_skill.js');\n" +
        "run(async (input, ctx) => ({ twice: (await ctx.call('double', { n: input.n })).output.value }));\n",
    ],
  ] as const)(
    "gives a %s skill body its run's call socket, and only while the run goes",
    async (language, code) => {
      const server = callServer(path.join(dir, 'call.sock'));
      await server.listening;
      const channels = new PodChannels({ warn });
      const call = await channels.openCall(box.connection, `act_${language}`, {
        socketDir: dir,
      } as CallChannel);
      expect(call.inside).toMatch(/^@switchyard-call-[0-9a-f]{32}$/);
      const { done, stderr } = await run(code, withCallSocket(BOX_ENV, call.inside), language);
      expect([done.exitCode, stderr]).toEqual([0, '']);
      expect(server.outputs).toEqual([{ twice: 40 }]);
      await call.close();
      // Once the run is over, its socket is gone from the box.
      const after = await run(
        `import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect("\\0${call.inside.slice(1)}")\nexcept OSError as e:\n    print(type(e).__name__)\n`,
      );
      expect(after.stdout).toBe('ConnectionRefusedError\n');
      await server.close();
    },
  );
});
