/**
 * Integration tests: the real Docker engine and the real sandbox image, SECURITY.md items 1–7, 10, 12, 16 and 17
 * observed from inside and outside the container. Short timeouts keep the file fast. Skipped (with a note) when no
 * Docker engine answers on a unix socket or the sandbox image is missing.
 *
 * The tier's overhead against raw dockerode create → start → wait → remove is measured by `npm run bench`
 * (bench/containers.ts), not here.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Language } from '@switchyard/common';
import Dockerode from 'dockerode';
import { TEST_IMAGE_SOURCE } from '../../../test/sandbox-image';
import { buildChildEnv } from '../../core/env-policy';
import { SandboxUnavailableError } from '../../core/sandbox.errors';
import { SandboxManager } from '../../sandbox-manager.service';
import { SandboxModule } from '../../sandbox.module';
import { resolveSandboxOptions } from '../../core/sandbox.options';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import { LABEL_ENGINE, LABEL_SESSION, LABEL_TIER } from './container.constants';
import { ContainerModule } from './container.module';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { currentImage, resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { buildContainerSpec } from './container-spec';
import { ContainerTier } from './container-tier';
import { DockerodeClient } from './docker-client';
import { prepareAndRun } from '../../sandbox-manager.testing';

const MiB = 1024 * 1024;
const SOCKET = process.env.DOCKER_HOST?.startsWith('unix://')
  ? process.env.DOCKER_HOST.slice('unix://'.length)
  : '/var/run/docker.sock';
const IMAGE = currentImage(resolveContainerOptions({ ...TEST_IMAGE_SOURCE, reapOnStart: false }));

/** Synchronous probe (describe blocks are chosen at load time): `/_ping` and the image, over the socket. */
function dockerReady(): boolean {
  if (!IMAGE || (process.env.DOCKER_HOST && !process.env.DOCKER_HOST.startsWith('unix://'))) return false;
  const script = `
    const http = require('node:http');
    const get = (p) => new Promise((ok, ko) => http.get({ socketPath: ${JSON.stringify(SOCKET)}, path: p, timeout: 3000 },
      (r) => { r.resume(); r.on('end', () => ok(r.statusCode)); }).on('error', ko).on('timeout', () => ko(new Error('timeout'))));
    get('/_ping').then((s) => s === 200 ? get('/images/' + encodeURIComponent(${JSON.stringify(IMAGE)}) + '/json') : s)
      .then((s) => process.exit(s === 200 ? 0 : 1), () => process.exit(1));`;
  return spawnSync(process.execPath, ['-e', script], { timeout: 10_000 }).status === 0;
}
// `npm test` starts Docker and builds the image first: a missing one is a failure, never a skip.
if (!dockerReady()) {
  throw new Error(
    `no Docker engine at ${SOCKET} or no sandbox image (${IMAGE ?? 'no tag file'}): ` +
      'run `npm run docker:engine` and `npm run sandbox:image`',
  );
}
const describeDocker = describe;

const TIMEOUT = 1000;
/** Run deadline plus what SECURITY.md allows for the kill: timeout + 2 s. */
const KILL_BOUND = TIMEOUT + 2000;
const CANARY = `SWITCHYARD_CANARY_${randomBytes(6).toString('hex')}`;
const SANDBOX_ID = 10001;

/**
 * Every engine id and session id here starts with this, so runs of this file in parallel processes (another
 * developer's `jest libs/sandbox`) never see, count or reap each other's containers.
 */
const RUN = `it${randomBytes(3).toString('hex')}`;

/** The pids cgroup directory of a container, wherever this host's Docker puts it (undefined if none found). */
function pidsCgroup(id: string): string | undefined {
  return [
    `/sys/fs/cgroup/pids/docker/${id}`,
    `/sys/fs/cgroup/pids/system.slice/docker-${id}.scope`,
    `/sys/fs/cgroup/docker/${id}`,
    `/sys/fs/cgroup/system.slice/docker-${id}.scope`,
  ].find((dir) => fs.existsSync(path.join(dir, 'pids.current')));
}

/** Host processes still inside any cgroup of the given containers. */
function processesOf(ids: string[]): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cgroups = fs.readFileSync(`/proc/${entry}/cgroup`, 'utf8');
      if (ids.some((id) => cgroups.includes(id))) found.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return found;
}

describeDocker('ContainerTier (real Docker)', () => {
  jest.setTimeout(30_000);
  const docker = new Dockerode({ socketPath: SOCKET });
  const client = new DockerodeClient(docker);
  const engineInstanceId = `${RUN}-main`;
  const tierOptions: ContainerTierOptions = {
    ...TEST_IMAGE_SOURCE,
    // The host kernel's view (cgroups, /proc) is what these checks read; gVisor, the default where Docker has it, is
    // checked end to end with its own evidence (test/e2e/container-runtime, container-security, container-tiers).
    runtime: 'runc',
    engineInstanceId,
    reapOnStart: false,
    // Every run here is a cold one, and nothing outlives a run; containers started ahead have their own spec
    // (ahead-containers.integration).
    ahead: { max: 0 },
    limits: { memoryBytes: 128 * MiB, pids: 64, tmpfsBytes: 16 * MiB, fsizeBytes: 8 * MiB, nofile: 128 },
  };
  const output = resolveSandboxOptions({ output: { maxBytes: 64 * 1024, maxLines: 1000 } }).output;
  let tier: ContainerTier;
  let root: string;
  let workspaceDir: string;

  /** One-off containers of this run's engines. */
  const leftovers = async () =>
    (await docker.listContainers({ all: true, filters: { label: [`${LABEL_TIER}=container`] } })).filter(
      (c) => (c.Labels[LABEL_ENGINE] ?? '').startsWith(RUN),
    );

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    process.env[CANARY] = 'engine-secret-value';
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-container-int-'));
    fs.chmodSync(root, 0o711);
    tier = new ContainerTier(client, resolveContainerOptions(tierOptions));
    expect(await tier.availability()).toMatchObject({ available: true, details: { image: IMAGE } });
  });

  afterAll(async () => {
    delete process.env[CANARY];
    await tier?.onApplicationShutdown();
    fs.rmSync(root, { recursive: true, force: true });
  });

  beforeEach(() => {
    workspaceDir = fs.mkdtempSync(path.join(root, 'ws-'));
    fs.chownSync(workspaceDir, SANDBOX_ID, SANDBOX_ID);
  });

  // Every run removes its container: `docker ps -a --filter label=dev.switchyard.tier=container` is empty again
  // moments after the run returns (a stopped container is removed right after its result, off the action's path).
  afterEach(async () => {
    const deadline = Date.now() + 5000;
    while ((await leftovers()).length > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(await leftovers()).toEqual([]);
  });

  function job(language: Language, code: string, extra: Partial<TierJob> = {}): TierJob {
    return {
      actionId: `it-${randomBytes(3).toString('hex')}`,
      sessionId: `${RUN}-session`,
      language,
      code,
      env: buildChildEnv({}, language),
      timeoutMs: TIMEOUT * 5,
      workspaceDir,
      output,
      ...extra,
    };
  }
  const run = (language: Language, code: string, extra: Partial<TierJob> = {}): Promise<TierRunResult> =>
    tier.run(job(language, code, extra));

  describe('runs code', () => {
    it.each([
      ['python', 'import sys\nprint("hi", sys.stdin.read().upper(), "€" * 3)\nsys.exit(3)', 'hi IN €€€\n', 3],
      [
        'node',
        'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{console.log("node",s);process.exit(4)})',
        'node in\n',
        4,
      ],
      ['bash', 'echo "bash $(cat)"; echo oops >&2; exit 5', 'bash in\n', 5],
    ] as const)('%s: output, exit code, stdin', async (language, code, stdout, exitCode) => {
      const r = await run(language, code, { stdin: 'in' });
      expect(r).toMatchObject({
        exitCode,
        stdout,
        timedOut: false,
        truncated: { stdout: false, stderr: false },
      });
      if (language === 'bash') expect(r.stderr).toBe('oops\n');
    });

    it('closes stdin when there is none, and streams output as it arrives', async () => {
      const chunks: string[] = [];
      const r = await run('bash', 'cat; echo done', { onOutput: (_, c) => chunks.push(c) });
      expect(r).toMatchObject({ exitCode: 0, stdout: 'done\n' });
      expect(chunks.join('')).toBe('done\n');
    });

    it('delivers close to 1 MiB of code intact, with stdin after it', async () => {
      const filler = `# ${'x'.repeat(1000)}\n`.repeat(1000);
      const code = `${filler}import sys\nsrc = open(__file__).read()\nprint(len(src.encode()), sys.stdin.read())`;
      const r = await run('python', code, { stdin: 'after' });
      expect(r).toMatchObject({ exitCode: 0, stdout: `${Buffer.byteLength(code)} after\n` });
    });
  });

  describe('workspace', () => {
    it('a file written by the code appears on the host; a host file is readable', async () => {
      fs.writeFileSync(path.join(workspaceDir, 'in.txt'), 'from host');
      const r = await run('bash', 'pwd; cat in.txt; echo from-sandbox > out.txt');
      expect(r).toMatchObject({ exitCode: 0, stdout: '/workspace\nfrom host' });
      const out = path.join(workspaceDir, 'out.txt');
      expect(fs.readFileSync(out, 'utf8')).toBe('from-sandbox\n');
      expect(fs.statSync(out).uid).toBe(SANDBOX_ID);
    });
  });

  describe('confinement (SECURITY.md #10, #12)', () => {
    it('no capabilities, no new privileges, seccomp, uid 10001, no docker socket; mount and unshare fail', async () => {
      const r = await run(
        'bash',
        [
          "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\\t'",
          'echo "uid=$(id -u) gid=$(id -g)"',
          'for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo "socket $s"; done',
          'mount -t tmpfs none /mnt 2>/dev/null && echo MOUNTED || echo mount-failed',
          'unshare --user --map-root-user true 2>/dev/null && echo UNSHARED || echo unshare-failed',
          'unshare --mount --pid --fork true 2>/dev/null && echo UNSHARED || echo unshare-failed',
          'touch /usr/x /x 2>/dev/null && echo ROOT-WRITABLE || echo root-read-only',
          'cat /proc/self/environ | tr "\\0" "\\n"',
        ].join('\n'),
      );
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain('CapEff:0000000000000000\nNoNewPrivs:1\nSeccomp:2\n');
      expect(r.stdout).toContain(`uid=${SANDBOX_ID} gid=${SANDBOX_ID}\n`);
      expect(r.stdout).toContain('mount-failed\nunshare-failed\nunshare-failed\nroot-read-only\n');
      expect(r.stdout).not.toContain('socket');
      expect(r.stdout).not.toContain(CANARY);
    });

    it('redacts secrets in output before the caps apply (#15)', async () => {
      const r = await run(
        'python',
        'import sys\nprint("key=" + "AKIA" + "ABCDEFGHIJKLMNOP")\nprint("AKIA" + "QRSTUVWXYZ234567", file=sys.stderr)',
      );
      expect(r.stdout).toBe('key=***REDACTED***\n');
      expect(r.stderr).toBe('***REDACTED***\n');
    });

    it('has no network, not even to the host loopback', async () => {
      let connections = 0;
      const server = net.createServer((s) => {
        connections++;
        s.destroy();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as net.AddressInfo).port;
      try {
        const r = await run(
          'python',
          [
            'import socket',
            'try:',
            `    socket.create_connection(("127.0.0.1", ${port}), timeout=1)`,
            '    print("CONNECTED")',
            'except OSError as e:',
            '    print("no connection:", type(e).__name__)',
            'ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]',
            'print("interfaces:", ifaces)',
          ].join('\n'),
        );
        expect(r.stdout).toBe("no connection: ConnectionRefusedError\ninterfaces: ['lo']\n");
        expect(connections).toBe(0);
      } finally {
        server.close();
      }
    });
  });

  describe('attacks and faults', () => {
    it('fork bombs hit the pids limit, end by the timeout, and leave other sessions alone (#1)', async () => {
      const sessions = [`${RUN}-bomb-bash`, `${RUN}-bomb-python`];
      const ids = new Set<string>();
      let peak = 0;
      let limitHits = 0;
      // Watches the bombs' pids cgroups while they run.
      const sample = async () => {
        const found = await docker.listContainers({
          filters: { label: [`${LABEL_ENGINE}=${engineInstanceId}`] },
        });
        for (const c of found.filter((f) => sessions.includes(f.Labels[LABEL_SESSION]))) {
          ids.add(c.Id);
          const dir = pidsCgroup(c.Id);
          if (!dir) continue;
          try {
            peak = Math.max(peak, Number(fs.readFileSync(path.join(dir, 'pids.current'), 'utf8')));
            const events = /max (\d+)/.exec(fs.readFileSync(path.join(dir, 'pids.events'), 'utf8'));
            limitHits = Math.max(limitHits, Number(events?.[1] ?? 0));
          } catch {
            // removed while we looked
          }
        }
      };
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          await sample();
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const started = Date.now();
      try {
        const [bash, python, other] = await Promise.all([
          // The shell itself may end early (its own forks fail), which stops the container: bounded either way.
          run('bash', ':(){ :|:& };:; sleep 1e6', { sessionId: sessions[0], timeoutMs: TIMEOUT }),
          run(
            'python',
            'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass',
            {
              sessionId: sessions[1],
              timeoutMs: TIMEOUT,
            },
          ),
          new Promise((r) => setTimeout(r, 500)).then(() =>
            run('python', 'print("still fine")', { sessionId: `${RUN}-other` }),
          ),
        ]);
        expect(Date.now() - started).toBeLessThan(KILL_BOUND + 1000);
        expect(python).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
        expect(bash.stderr).toContain('fork: retry: Resource temporarily unavailable');
        expect(other).toMatchObject({ exitCode: 0, stdout: 'still fine\n' });
      } finally {
        sampling = false;
        await sampler;
      }
      expect(ids.size).toBe(2);
      if (pidsCgroup([...ids][0]) !== undefined || peak > 0) {
        expect(peak).toBeLessThanOrEqual(64);
        expect(limitHits).toBeGreaterThan(0);
      }
      // Nothing of either bomb is left on the host.
      expect(processesOf([...ids])).toEqual([]);
    });

    it('a memory bomb is killed and reported as out of memory (#2)', async () => {
      const r = await run('python', 'x = bytearray(8 << 30)\nprint("allocated")', { timeoutMs: 10_000 });
      expect(r).toMatchObject({
        exitCode: 137,
        stdout: '',
        limit: { code: 'OUT_OF_MEMORY' },
        timedOut: false,
      });
    });

    it.each([
      ['bash', 'sleep 1e6'],
      ['bash', "trap '' TERM INT HUP; sleep 1e6"],
      ['python', 'while True:\n    pass'],
    ] as const)('%s %j is killed at the timeout (#3)', async (language, code) => {
      const started = Date.now();
      const r = await run(language, code, { timeoutMs: TIMEOUT });
      expect(r).toMatchObject({ timedOut: true, signal: 'SIGKILL', exitCode: 137 });
      expect(r.limit).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(KILL_BOUND + 500);
    });

    it.each([
      ['stdout lines', 'bash', 'yes', 'stdout'],
      [
        'one endless stdout line',
        'python',
        'import sys\nwhile True:\n    sys.stdout.write("x" * 65536)',
        'stdout',
      ],
      ['stderr', 'python', 'import sys\nwhile True:\n    sys.stderr.write("e" * 4096 + "\\n")', 'stderr'],
    ] as const)(
      'an output flood (%s) is capped and stops the run (#5)',
      async (_, language, code, stream) => {
        const started = Date.now();
        const r = await run(language, code);
        expect(r.truncated[stream]).toBe(true);
        expect(Buffer.byteLength(r[stream])).toBeLessThanOrEqual(output.maxBytes);
        expect(r.limit).toMatchObject({ code: 'OUTPUT_CAP' });
        expect(Date.now() - started).toBeLessThan(TIMEOUT * 5);
      },
    );

    it('filling /tmp stops at the tmpfs cap; a big file stops at the fsize limit (#6)', async () => {
      const tmp = await run(
        'bash',
        'for i in $(seq 1 10); do head -c 4M /dev/zero > /tmp/f$i || { echo "full at $i"; break; }; done; du -sk /tmp',
      );
      expect(tmp.stderr).toContain('No space left on device');
      const kb = Number(/(\d+)\s+\/tmp/.exec(tmp.stdout)?.[1]);
      expect(kb).toBeLessThanOrEqual(16 * 1024);
      expect(kb).toBeGreaterThan(8 * 1024);

      const big = await run('bash', 'head -c 32M /dev/zero > /workspace/big');
      expect(big).toMatchObject({ exitCode: 153, signal: 'SIGXFSZ', limit: { code: 'FILE_SIZE' } });
      expect(fs.statSync(path.join(workspaceDir, 'big')).size).toBe(8 * MiB);
    });

    it('fd exhaustion fails the action; the tier stays usable (#7)', async () => {
      const r = await run(
        'python',
        'import os\nfds = []\nwhile True:\n    fds.append(os.open("/dev/null", os.O_RDONLY))',
      );
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain('Too many open files');
      expect(await run('python', 'print("ok")')).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    });

    it('nothing is left in /tmp or the process table for the next run (#16)', async () => {
      await run('bash', 'echo secret > /tmp/left; (sleep 999 &) ; nohup sleep 999 >/dev/null 2>&1 &');
      const r = await run('bash', 'ls -A /tmp; ps -eo comm= | sort | tr "\\n" " "');
      expect(r.stdout).not.toContain('left');
      expect(r.stdout).not.toContain('sleep');
    });
  });

  describe('lifecycle', () => {
    async function runningContainer(sessionId: string): Promise<void> {
      for (let i = 0; i < 100; i++) {
        const found = await docker.listContainers({ filters: { label: [`${LABEL_SESSION}=${sessionId}`] } });
        if (found.length > 0) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no running container for ${sessionId}`);
    }

    it('an aborted run is killed and reported as aborted', async () => {
      const controller = new AbortController();
      const pending = tier.run(
        job('bash', 'sleep 1e6', { sessionId: `${RUN}-abort-me`, timeoutMs: 20_000 }),
        controller.signal,
      );
      await runningContainer(`${RUN}-abort-me`);
      const started = Date.now();
      controller.abort();
      expect(await pending).toMatchObject({ aborted: true, timedOut: false, signal: 'SIGKILL' });
      expect(Date.now() - started).toBeLessThan(2000);
    });

    it('releaseSession kills the session’s running container and no other', async () => {
      const doomed = run('bash', 'sleep 1e6', { sessionId: `${RUN}-released`, timeoutMs: 20_000 });
      const kept = run('bash', 'sleep 1; echo kept', { sessionId: `${RUN}-kept` });
      await runningContainer(`${RUN}-released`);
      await tier.releaseSession(`${RUN}-released`);
      expect(await doomed).toMatchObject({ aborted: true });
      expect(await kept).toMatchObject({ exitCode: 0, stdout: 'kept\n' });
    });

    it('reaps leftovers of dead engines, sparing live sessions (#17)', async () => {
      const spec = buildContainerSpec({
        job: job('bash', ''),
        image: IMAGE!,
        options: resolveContainerOptions({ ...tierOptions, engineInstanceId: `${RUN}-dead` }),
        hostsFile: '/etc/hosts',
      });
      const leftover = async (sessionId: string) => {
        const c = await docker.createContainer({
          ...spec,
          Entrypoint: ['sleep', '1000'],
          Cmd: [],
          Labels: { ...spec.Labels, [LABEL_SESSION]: sessionId },
        });
        await c.start();
        return c.id;
      };
      const dead = await leftover(`${RUN}-gone`);
      const live = await leftover(`${RUN}-alive`);
      try {
        // Every session but this test's `gone` one counts as live, so parallel runs of this file are left alone.
        const removed = await tier.reapLeftovers({ isLive: (s) => s !== `${RUN}-gone` });
        expect(removed).toEqual([dead]);
        const left = await leftovers();
        expect(left.map((c) => c.Id)).toEqual([live]);
        expect(left[0].Labels[LABEL_ENGINE]).toBe(`${RUN}-dead`);
      } finally {
        await docker.getContainer(live).remove({ force: true });
        await docker
          .getContainer(dead)
          .remove({ force: true })
          .catch(() => undefined);
      }
    });

    it('reaps every container of an engine dead on this host, even one of a live session (#17)', async () => {
      // This host's name and a pid above the kernel's pid_max: the label a SIGKILLed engine leaves on its containers.
      const deadHere = defaultEngineInstanceId(4_194_305);
      const spec = buildContainerSpec({
        job: job('bash', ''),
        image: IMAGE!,
        options: resolveContainerOptions({ ...tierOptions, engineInstanceId: deadHere }),
        hostsFile: '/etc/hosts',
      });
      const c = await docker.createContainer({
        ...spec,
        Entrypoint: ['sleep', '1000'],
        Cmd: [],
        Labels: { ...spec.Labels, [LABEL_SESSION]: `${RUN}-still-live` },
      });
      await c.start();
      try {
        // Every session counts as live: the action of a dead engine's container was interrupted all the same.
        expect(await tier.reapLeftovers({ isLive: () => true })).toContain(c.id);
        await expect(c.inspect()).rejects.toMatchObject({ statusCode: 404 });
      } finally {
        await c.remove({ force: true }).catch(() => undefined);
      }
    });

    it('shutdown kills running runs and removes everything the tier started', async () => {
      const other = new ContainerTier(
        client,
        resolveContainerOptions({ ...tierOptions, engineInstanceId: `${RUN}-shutdown` }),
      );
      const pending = other.run(
        job('bash', 'sleep 1e6', { sessionId: `${RUN}-shutdown`, timeoutMs: 20_000 }),
      );
      await runningContainer(`${RUN}-shutdown`);
      await other.onApplicationShutdown();
      expect(await pending).toMatchObject({ aborted: true });
      expect(await other.availability()).toMatchObject({
        available: false,
        reason: 'the engine is shutting down',
      });
    });

    it('removes a paused container by force (the pooled tier relies on it)', async () => {
      const c = await docker.createContainer({
        Image: IMAGE!,
        Entrypoint: ['sleep', '1000'],
        Labels: { [LABEL_TIER]: 'container', [LABEL_ENGINE]: engineInstanceId },
        HostConfig: { NetworkMode: 'none', LogConfig: { Type: 'none', Config: {} } },
      });
      await c.start();
      await c.pause();
      await client.remove(c.id);
      await client.remove(c.id); // idempotent
      await expect(client.inspect(c.id)).rejects.toMatchObject({ code: 'DOCKER_NOT_FOUND' });
    });
  });

  describe('availability', () => {
    it('says why and how to fix it when Docker does not answer', async () => {
      const bogus = new ContainerTier(
        new DockerodeClient(new Dockerode({ socketPath: path.join(root, 'no-docker.sock') })),
        resolveContainerOptions(tierOptions),
      );
      const a = await bogus.availability();
      expect(a.available).toBe(false);
      expect(a.reason).toContain('no-docker.sock');
      expect(a.reason).toContain('npm run docker:engine');
      await expect(bogus.run(job('bash', 'true'))).rejects.toBeInstanceOf(SandboxUnavailableError);
      await bogus.onApplicationShutdown();
    });

    it('says how to build a missing image', async () => {
      const missing = new ContainerTier(
        client,
        resolveContainerOptions({ ...tierOptions, image: 'switchyard/sandbox:does-not-exist' }),
      );
      expect(await missing.availability()).toMatchObject({
        available: false,
        reason: expect.stringContaining('npm run sandbox:image'),
      });
    });
  });

  describe('through the sandbox module', () => {
    it('the manager routes to the container tier and maps its results', async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          SandboxModule.forRoot(
            { output: { maxBytes: 64 * 1024 } },
            {
              imports: [
                ContainerModule.forRoot(
                  { ...tierOptions, engineInstanceId: `${RUN}-module` },
                  { docker: docker },
                ),
              ],
              tiers: [ContainerTier],
            },
          ),
        ],
      }).compile();
      moduleRef.enableShutdownHooks();
      await moduleRef.init();
      try {
        const manager = moduleRef.get(SandboxManager);
        const request = { sessionId: `${RUN}-module`, tier: 'container' as const, workspaceDir };
        const ok = await prepareAndRun(manager, {
          ...request,
          actionId: 'm1',
          language: 'python',
          code: 'print(6 * 7)',
        });
        expect(ok).toMatchObject({
          status: 'succeeded',
          tier: 'container',
          run: { stdout: '42\n', exitCode: 0 },
        });
        const slow = await prepareAndRun(manager, {
          ...request,
          actionId: 'm2',
          language: 'bash',
          code: 'sleep 1e6',
          timeoutMs: TIMEOUT,
        });
        expect(slow).toMatchObject({ status: 'timed_out', error: { code: 'TIMEOUT' } });
        const oom = await prepareAndRun(manager, {
          ...request,
          actionId: 'm3',
          language: 'python',
          code: 'x = bytearray(8 << 30)',
          timeoutMs: 10_000,
        });
        expect(oom).toMatchObject({ status: 'failed', error: { class: 'limit', code: 'OUT_OF_MEMORY' } });
      } finally {
        await moduleRef.close();
      }
    });
  });
});
