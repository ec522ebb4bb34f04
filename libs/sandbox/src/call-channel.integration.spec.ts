/**
 * Integration tests of the per-action call channel in every tier, for real: bubblewrap, a pooled container and a
 * one-off container (runc and gVisor) run python that connects to `SWITCHYARD_CALL_SOCKET` and gets an answer from a
 * real `net.Server` in this process, while the sandbox still reaches no network. Each tier is built the way its own
 * integration spec builds it. `npm test` installs bubblewrap, starts Docker (with runsc registered) and builds the
 * image first: anything missing is a failure, never a skip.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import Dockerode from 'dockerode';
import { TEST_IMAGE_SOURCE } from '../test/sandbox-image';
import { CALL_SOCKET_TARGET } from './core/call-channel';
import { currentImage, resolveContainerOptions } from './backends/docker/container.options';
import { ContainerTier } from './backends/docker/container-tier';
import { DockerodeClient } from './backends/docker/docker-client';
import { buildChildEnv } from './core/env-policy';
import { ChildProcessHostMounts } from './backends/docker/pooled/host-mounts';
import { resolvePooledOptions } from './backends/docker/pooled/pooled.options';
import { PooledTier } from './backends/docker/pooled/pooled-tier';
import { resolveSandboxOptions } from './core/sandbox.options';
import type { SandboxTier } from './core/sandbox-tier.port';
import { CALL_SOCKET_ENV, type CallChannel, type TierJob } from './core/sandbox.types';
import { BubblewrapTier } from './backends/subprocess/bubblewrap-tier';
import { detectProcessLimiter } from './backends/subprocess/cgroup-limiter';
import { SpawnerProcessLauncher } from './backends/subprocess/spawner-launcher';

const BWRAP = '/usr/bin/bwrap';
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : undefined;
const RUNNER_DIR = path.resolve(__dirname, '../../../docker/sandbox/runner');
/** Host uid of sandboxed code: the image's user, and the subprocess tier's `runAs` when the engine is root. */
const SANDBOX_HOST_ID = 10001;
const RUN = `cc${randomBytes(3).toString('hex')}`;

function cannotRun(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root (the pooled tier bind-mounts workspaces on the host)';
  const bwrap = spawnSync(BWRAP, ['--unshare-all', '--ro-bind', '/', '/', '--', '/bin/true'], {
    timeout: 10_000,
  });
  if (bwrap.status !== 0) return 'bubblewrap cannot create namespaces here';
  const image = currentImage(resolveContainerOptions({ ...TEST_IMAGE_SOURCE, reapOnStart: false }));
  if (!image) return 'no sandbox image tag (npm run sandbox:image)';
  if (spawnSync('docker', ['image', 'inspect', image], { timeout: 10_000 }).status !== 0) {
    return `docker or image ${image} unavailable (npm run docker:engine, npm run sandbox:image)`;
  }
  const runtimes = spawnSync('docker', ['info', '--format', '{{json .Runtimes}}'], { timeout: 10_000 });
  if (!String(runtimes.stdout).includes('"runsc"')) return 'the Docker engine has no runsc runtime';
  return undefined;
}
const unavailable = cannotRun();
if (unavailable) throw new Error(`call channel integration tests cannot run: ${unavailable}`);

const closeServer = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()));

/**
 * The engine's side of a channel, as the skill server will make it: a server on `<dir>/call.sock` (socket 0666,
 * directory 0755, both root's) answering each line with `pong:<line>`, and `listen` making another one on the path
 * the tier asks for, with the same handler.
 */
class TestChannel implements CallChannel {
  /** Every path `listen` was asked for, and whether its stop has been called. */
  readonly listened = new Map<string, { stopped: boolean }>();
  private readonly servers = new Set<net.Server>();

  private constructor(readonly socketDir: string) {}

  static async open(root: string): Promise<TestChannel> {
    const dir = fs.mkdtempSync(path.join(root, 'call-'));
    fs.chmodSync(dir, 0o755);
    const channel = new TestChannel(dir);
    await channel.serve(path.join(dir, 'call.sock'));
    return channel;
  }

  listen = async (socketPath: string): Promise<() => Promise<void>> => {
    const state = { stopped: false };
    this.listened.set(socketPath, state);
    const stop = await this.serve(socketPath);
    return async () => {
      state.stopped = true;
      await stop();
    };
  };

  async close(): Promise<void> {
    await Promise.all([...this.servers].map(closeServer));
  }

  private async serve(socketPath: string): Promise<() => Promise<void>> {
    const connections = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
      socket.on('error', () => undefined);
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('utf8');
        const nl = received.indexOf('\n');
        if (nl !== -1) socket.end(`pong:${received.slice(0, nl)}\n`);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, resolve);
    });
    fs.chmodSync(socketPath, 0o666);
    this.servers.add(server);
    return async () => {
      this.servers.delete(server);
      for (const c of connections) c.destroy();
      await closeServer(server);
    };
  }
}

/** A tier under test, and where a run of it finds its channel's socket. */
interface Harness {
  tier: SandboxTier;
  socketInside(actionId: string): string;
  close(): Promise<void>;
}

/** As bubblewrap-tier.integration.spec.ts builds it, with the runner directory configured as the engine does. */
async function subprocessTier(): Promise<Harness> {
  const options = resolveSandboxOptions({
    interpreters: PYTHON ? { python: PYTHON } : {},
    subprocess: { memoryBytes: 256 * 2 ** 20, pids: 64 },
    stateful: { runnerDir: RUNNER_DIR },
  });
  const limiter = detectProcessLimiter(options.subprocess.cgroup);
  const tier = new BubblewrapTier(options, new SpawnerProcessLauncher(), limiter);
  expect(await tier.availability()).toMatchObject({ available: true });
  return { tier, socketInside: () => CALL_SOCKET_TARGET, close: () => tier.onApplicationShutdown() };
}

/** As pooled-tier.integration.spec.ts builds it. */
async function pooledTier(): Promise<Harness> {
  const options = resolvePooledOptions({
    ...TEST_IMAGE_SOURCE,
    min: 1,
    max: 3,
    maxSessions: 8,
    acquireTimeoutMs: 8000,
    runnerGraceMs: 2000,
    mountRoot: path.join(os.tmpdir(), `sy-call-it-${randomBytes(4).toString('hex')}`),
    limits: { memoryBytes: 256 * 2 ** 20, pids: 128 },
  });
  const mounts = new ChildProcessHostMounts();
  const tier = new PooledTier(options, new DockerodeClient(new Dockerode()), mounts);
  await tier.onModuleInit();
  expect(await tier.availability()).toMatchObject({ available: true });
  return {
    tier,
    socketInside: (actionId) => `/run/switchyard-egress/call-${actionId}.sock`,
    close: async () => {
      await tier.onApplicationShutdown();
      await mounts.close();
      spawnSync('umount', [options.mountRoot]);
      fs.rmSync(options.mountRoot, { recursive: true, force: true });
    },
  };
}

/** As container-tier.integration.spec.ts builds it, on the runtime given. */
async function containerTier(runtime: 'runc' | 'runsc'): Promise<Harness> {
  const tier = new ContainerTier(
    new DockerodeClient(new Dockerode()),
    resolveContainerOptions({
      ...TEST_IMAGE_SOURCE,
      runtime,
      engineInstanceId: `${RUN}-${runtime}`,
      reapOnStart: false,
    }),
  );
  expect(await tier.availability()).toMatchObject({ available: true });
  return { tier, socketInside: () => CALL_SOCKET_TARGET, close: () => tier.onApplicationShutdown() };
}

/** Connects to the channel, sends a line, prints the socket's path and the answer; then tries the network. */
const CALL_CODE = `
import os, socket
path = os.environ["${CALL_SOCKET_ENV}"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.sendall(b"hello from the sandbox\\n")
print(path)
print(s.makefile().readline().strip(), flush=True)
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3)
    print("network: reachable")
except OSError:
    print("network: none")
print("runner dir:", os.path.isfile("/opt/switchyard/runner/runner.py"))
`;

/** What a run without a channel sees of one. */
const NO_CALL_CODE = `
import os
print(os.environ.get("${CALL_SOCKET_ENV}"))
print(os.path.exists("/run/switchyard-call"))
d = "/run/switchyard-egress"
print(sorted(f for f in (os.listdir(d) if os.path.isdir(d) else []) if f.startswith("call-")))
`;

describe.each([
  ['subprocess', subprocessTier],
  ['pooled', pooledTier],
  ['container (runc)', () => containerTier('runc')],
  ['container (runsc)', () => containerTier('runsc')],
] as const)('call channel in the %s tier (real sandbox)', (name, make) => {
  jest.setTimeout(60_000);
  let harness: Harness;
  let root: string;
  let workspaceDir: string;
  let channel: TestChannel;
  const sessionId = `${RUN}-${name.replace(/\W+/g, '-')}`;

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-call-int-'));
    // The sandbox user (bubblewrap's runAs) must traverse it to its workspace and the channel's directory.
    fs.chmodSync(root, 0o755);
    workspaceDir = fs.mkdtempSync(path.join(root, 'ws-'));
    fs.chownSync(workspaceDir, SANDBOX_HOST_ID, SANDBOX_HOST_ID);
    harness = await make();
  });

  beforeEach(async () => {
    channel = await TestChannel.open(root);
  });

  afterEach(async () => {
    await channel.close();
  });

  afterAll(async () => {
    await harness?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const job = (code: string, extra: Partial<TierJob> = {}): TierJob => ({
    actionId: `act_${randomBytes(12).toString('hex')}`,
    sessionId,
    language: 'python',
    code,
    env: buildChildEnv({}, 'python'),
    timeoutMs: 10_000,
    workspaceDir,
    output: { maxBytes: 64 * 1024, maxLines: 1000 },
    ...extra,
  });

  it('reaches the engine over its socket, and still no network', async () => {
    // An entry already in the environment (a template's, say) never decides where the code connects.
    const j = job(CALL_CODE, {
      channel,
      env: { ...buildChildEnv({}, 'python'), [CALL_SOCKET_ENV]: '/tmp/forged.sock' },
    });
    const r = await harness.tier.run(j);
    expect(r).toMatchObject({ exitCode: 0, timedOut: false, stderr: '' });
    expect(r.stdout).toBe(
      `${harness.socketInside(j.actionId)}\npong:hello from the sandbox\nnetwork: none\nrunner dir: True\n`,
    );
  });

  it('gives a run without a channel no socket, no variable and no directory', async () => {
    const r = await harness.tier.run(job(NO_CALL_CODE));
    expect(r).toMatchObject({ exitCode: 0, stdout: 'None\nFalse\n[]\n', stderr: '' });
  });

  if (name === 'pooled') {
    it("answers in the container's own directory for exactly the run", async () => {
      const j = job(
        `${CALL_CODE}\nprint(sorted(f for f in os.listdir("/run/switchyard-egress") if f.startswith("call-")))`,
        {
          channel,
        },
      );
      const r = await harness.tier.run(j);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain(`pong:hello from the sandbox\n`);
      // During the run the container saw its socket, and only it.
      expect(r.stdout).toContain(`['call-${j.actionId}.sock']`);
      const [[socketPath, state]] = [...channel.listened];
      expect(path.basename(socketPath)).toBe(`call-${j.actionId}.sock`);
      expect(path.basename(path.dirname(socketPath))).toMatch(/^[0-9a-f]+\.egress$/);
      expect(state.stopped).toBe(true);
      expect(fs.existsSync(socketPath)).toBe(false);
    });

    it('stops answering and removes the socket when the run times out', async () => {
      const j = job(`${CALL_CODE}\nimport time\ntime.sleep(30)`, { channel, timeoutMs: 1500 });
      const r = await harness.tier.run(j);
      expect(r.timedOut).toBe(true);
      expect(r.stdout).toContain('pong:hello from the sandbox\n');
      const [[socketPath, state]] = [...channel.listened];
      expect(state.stopped).toBe(true);
      expect(fs.existsSync(socketPath)).toBe(false);
      // The session's container goes on serving runs, with no socket of that action left.
      const next = await harness.tier.run(job(NO_CALL_CODE));
      expect(next).toMatchObject({ exitCode: 0, stdout: 'None\nFalse\n[]\n' });
    });
  }
});
