import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GVISOR_SANDBOX_PIDS, tmpfsInodes } from '@switchyard/sandbox';
import { EngineHarness } from '../support/engine-harness';
import { EngineProcess, freePort } from '../support/engine-process';
import { removeDataDir } from '../support/data-dir';
import {
  containerExists,
  containersWith,
  docker,
  eventually,
  forceRemove,
  freeSpace,
  hostPidIn,
  hostProcessCount,
  LABELS,
  processesInContainer,
  processesRunning,
  sleep,
} from '../support/host-probes';
import {
  podDirOnNode,
  SANDBOX_BACKENDS,
  TEST_KUBECONFIG,
  type SandboxBackendUnderTest,
  type SandboxDetails,
} from '../support/sandbox-backends';

/**
 * SECURITY.md items 1–7, 16, 17 and 19 for the two container tiers (pooled: a session's warm sandbox with the
 * runner inside; container: one one-off sandbox per action), through the REST API, on each sandbox backend: the
 * Docker engine `npm test` starts, and the single-node Kubernetes cluster it starts (a pod per session holding its
 * workspace, a pod per one-off action). Items 10 and 12 are in container-tiers.e2e-spec.ts.
 *
 * Every risk rule is switched off here, so attack code reaches the tier it asks for instead of being denied as
 * critical (or routed elsewhere): these tests show what the tiers themselves contain.
 */
// Jest's `testTimeout` is a global option (the e2e project's own value does not apply): engine start-ups, Docker
// and attacks under a loaded machine need more than the 5 s default.
jest.setTimeout(60_000);

const TIERS = ['pooled', 'container'] as const;
type ContainerTierName = (typeof TIERS)[number];

const ALL_RISK_RULES = [
  'network',
  'spawn',
  'write-outside-workspace',
  'destructive',
  'privilege-escalation',
  'secrets',
  'env-read',
  'package-install',
  'dynamic-eval',
  'obfuscation',
  'fork-bomb',
  'unbounded-loop',
].join(',');
const MiB = 2 ** 20;
const OUTPUT_CAP = 64 * 1024;
// Above the fsize limit, so one big file meets FILE_SIZE first and many files meet the workspace cap.
const WORKSPACE_CAP = 96 * MiB;
/** Sandbox defaults of both tiers (tmpfs /tmp, fsize ulimit). */
const TMPFS_BYTES = 64 * MiB;
const FSIZE_BYTES = 64 * MiB;
/** Timeout of attack code. */
const ATTACK_TIMEOUT = 2000;
/** Timeout of an action that only looks around (ps, grep): generous, since nothing in it may hang. */
const LOOK_TIMEOUT = 20_000;
/** Timeout of the "killed at the timeout" cases. */
const KILL_TIMEOUT = 1000;
/** SECURITY.md: an attack ends within its timeout plus this. */
const KILL_GRACE = 2000;
/** Host free space may move this much while other work runs on the machine. */
const DISK_MARGIN = 32 * MiB;
/**
 * Host free inodes may move this much meanwhile (other tests' workspaces, images, temp dirs: 1 400 was seen in CI);
 * a fill that reached the host would take 16 000 (the tmpfs' inodes) to 50 000 (gVisor's memory limit).
 */
const INODE_MARGIN = 8000;
/** `sleep <MARK><n>`: argv no other test uses, findable in the host's process table. */
const MARK = randomInt(10_000, 99_999);
const marker = (n: number): string => `sleep ${MARK}${n}`;

/** Container memory: small, so memory and inode bombs reach it fast. */
const CONTAINER_MEMORY = 128 * MiB;

const engineEnv = {
  SWITCHYARD_RISK_DISABLED_RULES: ALL_RISK_RULES,
  SWITCHYARD_POOLED_MEMORY_BYTES: String(CONTAINER_MEMORY),
  SWITCHYARD_CONTAINER_MEMORY_BYTES: String(CONTAINER_MEMORY),
  SWITCHYARD_OUTPUT_MAX_BYTES: String(OUTPUT_CAP),
  SWITCHYARD_OUTPUT_MAX_LINES: '1000',
  SWITCHYARD_MAX_WORKSPACE_BYTES: String(WORKSPACE_CAP),
};

/**
 * Kubernetes deletes a pod with a grace period (the engine's is 1 s): a pod the engine deleted is on its way out at
 * once (`sandboxesWith` leaves it out) and gone from the API within this.
 */
const POD_GONE_WITHIN = 15_000;
/**
 * Kubernetes: the kubelet evicts a pod whose disk-backed `/workspace` emptyDir outgrew its sizeLimit (it cannot make
 * the writes fail) once it has measured the emptyDir, which it does every volumeStatsAggPeriod (1 min by default,
 * jittered up to 2), and at its next eviction check (10 s). Seen on the test cluster: 7–15 s after the fill for a
 * pod filled right after its start, over 60 s for an older one.
 */
const EVICTION_WITHIN = 150_000;
/** Kubernetes: a deleted or evicted pod's emptyDirs go when the kubelet tears the pod down, soon after. */
const DISK_BACK_WITHIN = 20_000;

/** The backends under test, as `describe.each` rows. */
const BACKENDS = SANDBOX_BACKENDS.map((b) => [b.name, b] as const);
const DOCKER_BACKEND = SANDBOX_BACKENDS.find((b) => b.name === 'docker');

/**
 * The one-off tier's Docker runtime with the default SWITCHYARD_CONTAINER_RUNTIME (auto): gVisor when the Docker
 * engine has it, as the one `npm test` starts does. Each Docker suite checks that /health agrees. Known when the
 * tests are collected: which cases exist depends on it. Kubernetes' one-off pods run on the node's runtime (runc
 * here: their processes are host processes), so nothing gVisor-specific applies to them.
 */
const DOCKER_ONE_OFF_RUNTIME =
  DOCKER_BACKEND !== undefined &&
  execFileSync('docker', ['info', '--format', '{{json .Runtimes}}'], {
    encoding: 'utf8',
    timeout: 30_000,
  }).includes('"runsc"')
    ? 'runsc'
    : 'runc';
const DOCKER_GVISOR = DOCKER_ONE_OFF_RUNTIME === 'runsc';
/** Default pids limit of both container tiers; on gVisor the one-off tier adds its sandbox's own threads. */
const CONTAINER_PIDS = 128;
const DOCKER_ONE_OFF_PIDS_CGROUP = CONTAINER_PIDS + (DOCKER_GVISOR ? GVISOR_SANDBOX_PIDS : 0);

/**
 * Host processes of a Docker container: those in its cgroups and those naming it in their argv (its shim; under
 * gVisor its runsc-sandbox, the sandbox's ptrace stubs and runsc-gofer). Under gVisor the code's own processes are
 * not host processes at all: they exist only inside the sandbox's processes, so when none of these is left, nothing
 * of the code is left either.
 */
function dockerHostProcessesOf(containerId: string): string[] {
  const inCgroups = processesInContainer(containerId.slice(0, 12));
  const naming = readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(containerId);
    } catch {
      return false;
    }
  });
  return [...new Set([...inCgroups, ...naming])];
}

/** Bytes of the files under a host directory (`du`), 0 when it is gone. */
function bytesUnder(dir: string): number {
  if (!existsSync(dir)) return 0;
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** What the suites ask the host about one backend's sandboxes. */
function probesOf(backend: SandboxBackendUnderTest) {
  /** gVisor applies to Docker's one-off tier only. */
  const gvisor = backend.name === 'docker' && DOCKER_GVISOR;
  /** The running one-off sandbox of a session, if there is one. */
  const runningOneOff = async (sessionId: string): Promise<string | undefined> =>
    (await backend.sandboxesWith({ session: sessionId, tier: 'container' })).find(
      (r) => r.state === 'running',
    )?.id;
  return {
    gvisor,
    /**
     * Whether a process with this argv runs for the session's action right now: in the host's process table, or,
     * for a one-off container under gVisor (whose processes the host cannot see), inside the session's running
     * container. Resolves with the sandbox it was found in (`host` for the host's table).
     */
    async runningFor(tier: ContainerTierName, sessionId: string, argv: string): Promise<string | undefined> {
      if (processesRunning(argv).length > 0) return 'host';
      if (tier !== 'container' || !gvisor) return undefined;
      const id = await runningOneOff(sessionId);
      return id !== undefined && (await backend.processesInside(id)).includes(argv) ? id : undefined;
    },
    /**
     * Host processes of a sandbox. Docker: `dockerHostProcessesOf`. Kubernetes: those in the pod's cgroups (its
     * pods run on runc: every process of the code is one of those; nothing else on the host names a pod).
     */
    hostProcessesOf: (id: string): Promise<string[]> =>
      backend.name === 'docker' ? Promise.resolve(dockerHostProcessesOf(id)) : backend.hostProcessesIn(id),
    /**
     * Kubernetes: the one-off pods of a session, polled while an action runs. A one-off pod is deleted when its action
     * ends, and only a pod still there tells its uid, which is how its cgroups are found afterwards
     * (`hostProcessesIn`). Resolves with the pods seen.
     */
    watchOneOffs(sessionId: string): { stop(): Promise<Set<string>> } {
      const seen = new Set<string>();
      let stopped = false;
      const polling = (async () => {
        while (!stopped) {
          const rows = await backend.sandboxesWith({ session: sessionId, tier: 'container' }).catch(() => []);
          for (const r of rows) seen.add(r.id);
          await sleep(100);
        }
      })();
      return {
        async stop() {
          stopped = true;
          await polling;
          return seen;
        },
      };
    },
  };
}

/**
 * Watches the pids cgroups of every Docker container from a separate process, every 2 ms (a gVisor sandbox that
 * meets its pids limit is gone a few milliseconds later), until stopped. Per full container id: the most processes
 * (and threads) its cgroup held and how often the cgroup refused one (`pids.events` max).
 */
function watchPidsCgroups(): { stop(): Promise<Map<string, { peak: number; refused: number }>> } {
  const script = `
    const fs = require('node:fs');
    const roots = ['/sys/fs/cgroup/pids/docker', '/sys/fs/cgroup/pids/system.slice', '/sys/fs/cgroup/docker',
      '/sys/fs/cgroup/system.slice'];
    const seen = {};
    const tick = () => {
      for (const root of roots) {
        let entries = [];
        try { entries = fs.readdirSync(root); } catch { continue; }
        for (const e of entries) {
          const id = /([0-9a-f]{64})/.exec(e)?.[1];
          if (!id) continue;
          try {
            const current = Number(fs.readFileSync(root + '/' + e + '/pids.current', 'utf8'));
            const refused = Number(/max (\\d+)/.exec(fs.readFileSync(root + '/' + e + '/pids.events', 'utf8'))[1]);
            const s = (seen[id] ??= { peak: 0, refused: 0 });
            s.peak = Math.max(s.peak, current);
            s.refused = Math.max(s.refused, refused);
          } catch {}
        }
      }
    };
    const timer = setInterval(tick, 2);
    process.stdin.on('data', () => { clearInterval(timer); tick(); process.stdout.write(JSON.stringify(seen)); process.exit(0); });
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    async stop() {
      child.stdin.write('stop\n');
      await exited;
      return new Map(
        Object.entries(JSON.parse(out || '{}') as Record<string, { peak: number; refused: number }>),
      );
    },
  };
}

describe.each(BACKENDS)(
  'container tiers under attack, through the API (SECURITY.md 1–7, 16), on %s',
  (_name, backend) => {
    const { gvisor, runningFor, hostProcessesOf, watchOneOffs } = probesOf(backend);
    const onK8s = backend.name === 'kubernetes';
    let engine: EngineHarness;
    let engineLabel: string | undefined;
    /** Per tier: the session most attacks run in, and a bystander session. */
    const main = {} as Record<ContainerTierName, string>;
    const other = {} as Record<ContainerTierName, string>;
    /** Per tier: latency of a trivial action (sandbox create/start/remove for one-off), added to time bounds. */
    const overhead = {} as Record<ContainerTierName, number>;
    const extraSessions: string[] = [];
    /**
     * Kubernetes: a session whose pooled code filled /workspace past the cap in `beforeAll`, so that the kubelet's
     * eviction, which may take minutes (EVICTION_WITHIN), comes while the other cases run; the last case checks it.
     */
    let overfilled: { sid: string; pod: string; at: number; r: any; bytesOnNode: number } | undefined;
    const workspaceFill =
      'mkdir fill; for i in $(seq 1 16); do head -c 16M /dev/zero > fill/f$i || exit $?; done; du -sk fill';

    const code = (
      sid: string,
      tier: ContainerTierName,
      language: string,
      src: string,
      timeoutMs = ATTACK_TIMEOUT,
    ): Promise<any> => engine.action(sid, { type: 'code', tier, language, code: src, timeoutMs });
    const timed = async (run: Promise<any>): Promise<[any, number]> => {
      const t0 = Date.now();
      const r = await run;
      return [r, Date.now() - t0];
    };
    const newSession = async (): Promise<string> => {
      const sid = await engine.createSession();
      extraSessions.push(sid);
      return sid;
    };
    const deleteSession = async (sid: string): Promise<void> => {
      expect((await engine.request('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
      extraSessions.splice(extraSessions.indexOf(sid), 1);
    };
    /** The sandbox an action ran in, as recorded in the graph: Docker's full container id, or the pod's name. */
    const containerOfAction = async (sid: string, actionId: string): Promise<string> => {
      const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${actionId}`)).body;
      expect(view.sandbox?.containerId).toMatch(onK8s ? /^sy-[sc]-[0-9a-z-]+$/ : /^[0-9a-f]{64}$/);
      return view.sandbox.containerId;
    };
    /** Runs `hostname` in the session's sandbox of the tier; resolves with that sandbox. */
    const containerOf = async (sid: string, tier: ContainerTierName): Promise<string> => {
      const r = await code(sid, tier, 'bash', 'hostname');
      expect(r).toMatchObject({ status: 'succeeded', tier });
      return containerOfAction(sid, r.id);
    };
    /** What `hostname` says in a sandbox: Docker's short container id; a pod's is always `sandbox`. */
    const hostnameOf = (sandbox: string): string => (onK8s ? 'sandbox' : sandbox.slice(0, 12));
    /**
     * A directory on the disk sandbox writes land on: the engine's data dir (Docker: the workspaces), or the test
     * cluster's state dir, which holds its kubelet's root (pods' emptyDirs) and container logs.
     */
    const hostDisk = (): string => (onK8s ? path.dirname(TEST_KUBECONFIG) : engine.dataDir);

    beforeAll(async () => {
      engine = await EngineHarness.start({ ...engineEnv, ...(await backend.env()) });
      const health = (await engine.request('GET', '/health')).body;
      expect(health.backend).toMatchObject({ name: backend.name });
      for (const tier of TIERS) {
        expect(health.tiers[tier]).toMatchObject({ available: true });
        // The memory and inode bombs rely on the configured container memory limit.
        if (!onK8s) {
          expect(health.tiers[tier]).toMatchObject({
            details: { limits: { memoryBytes: CONTAINER_MEMORY } },
          });
          if (tier === 'container') expect(health.tiers[tier].details.runtime).toBe(DOCKER_ONE_OFF_RUNTIME);
        }
        main[tier] = await engine.createSession();
        other[tier] = await engine.createSession();
        // Claims the pooled sandboxes now, and measures a trivial action of the tier.
        await containerOf(other[tier], tier);
        let slowest = 0;
        for (let i = 0; i < 2; i++) {
          const [r, ms] = await timed(code(main[tier], tier, 'bash', 'hostname'));
          expect(r.status).toBe('succeeded');
          slowest = Math.max(slowest, ms);
        }
        overhead[tier] = slowest;
        if (onK8s) {
          // /health does not report a pod's limits: its own memory cgroup does (v1 or v2).
          const limit = await code(
            main[tier],
            tier,
            'bash',
            'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
          );
          expect(limit).toMatchObject({ status: 'succeeded', stdout: `${CONTAINER_MEMORY}\n` });
        }
      }
      const pooledSandbox = await containerOf(main.pooled, 'pooled');
      engineLabel = await backend.engineLabelOf(pooledSandbox);
      // The host-process probe finds a sandbox's processes (docker-init or the pod's pause process, and the runner):
      // its empty answers below mean something.
      expect((await backend.hostProcessesIn(pooledSandbox)).length).toBeGreaterThanOrEqual(2);
      if (onK8s) {
        const sid = await newSession();
        const pod = await containerOf(sid, 'pooled');
        expect(await backend.exists(pod)).toBe(true);
        const at = Date.now();
        const r = await code(sid, 'pooled', 'bash', workspaceFill, 30_000);
        overfilled = { sid, pod, at, r, bytesOnNode: bytesUnder(podDirOnNode(pod)) };
      }
    });

    afterAll(async () => {
      for (const sid of [...extraSessions]) await engine?.request('DELETE', `/v1/sessions/${sid}`);
      await engine?.stop();
      // Never list (and remove) every engine's sandboxes: only this one's, once known.
      if (engineLabel === undefined) return;
      // The engine removes everything it started when it stops.
      const left = await backend.sandboxesWith({ engine: engineLabel });
      await backend.remove(left.map((c) => c.id));
      expect(left).toEqual([]);
    });

    /**
     * Each bomb first prints its sandbox's hostname (Docker's short container id), then keeps the action alive
     * until the timeout, so the tier has to kill a bomb at its peak rather than watch it die with its first process.
     */
    const bombs: Array<[ContainerTierName, string, string]> = TIERS.flatMap(
      (tier): Array<[ContainerTierName, string, string]> => [
        [tier, 'bash', 'hostname\n:(){ :|:& };:\nwhile :; do sleep 1; done'],
        [
          tier,
          'python',
          'import os, socket\nprint(socket.gethostname(), flush=True)\ntold = False\nwhile True:\n    try:\n' +
            '        os.fork()\n    except OSError as e:\n        if not told:\n' +
            '            print("fork failed:", e.strerror, flush=True)\n            told = True',
        ],
      ],
    );
    it.each(bombs)(
      '1. %s: %s fork bomb ends within timeout + 2 s, leaves no process behind, and another session keeps working',
      async (tier, language, bomb) => {
        const before = hostProcessCount();
        // Another session of the same tier runs while the bomb is at its peak.
        const bystander = sleep(700).then(async () => {
          const [b, bms] = await timed(code(other[tier], tier, 'python', 'print("unaffected")'));
          return [b, bms, Date.now()] as const;
        });
        // The pids cgroup watcher reads Docker's cgroups (it is how a gVisor sandbox's end is seen).
        const watch = tier === 'container' && !onK8s ? watchPidsCgroups() : undefined;
        const pods = tier === 'container' && onK8s ? watchOneOffs(main[tier]) : undefined;
        const [r, ms] = await timed(code(main[tier], tier, language, bomb));
        const bombEnded = Date.now();
        const pids = await watch?.stop();
        const podsSeen = await pods?.stop();
        // gVisor's ptrace platform runs every thread of the code on a host thread of the sandbox, all in the
        // container's pids cgroup, and keeps the code's processes in its own memory: the bomb meets a limit of the
        // sandbox as a whole, which then ends at once with the bomb inside, instead of fork() failing in it. At the
        // pids limit the sandbox cannot start a thread (runsc's "fatal error: newosproc", exit 2; gVisor issue #2490);
        // a bomb of bigger processes (python) may meet the memory limit first.
        const sandboxEnded = tier === 'container' && gvisor && r.status === 'failed';
        const atPidsLimit = !sandboxEnded || r.exitCode === 2;
        if (sandboxEnded) {
          expect(r).toMatchObject(
            atPidsLimit
              ? { tier, status: 'failed', exitCode: 2 }
              : { tier, status: 'failed', exitCode: 137, error: { class: 'limit', code: 'OUT_OF_MEMORY' } },
          );
          expect(ms).toBeLessThan(ATTACK_TIMEOUT + overhead[tier]);
        } else {
          // Pooled: the runner shares the sandbox's CPU quota with the bomb, which runs at niceness 19 so the runner
          // still answers and kills it in time (not RUNNER_UNRESPONSIVE). Kubernetes: the kubelet's podPidsLimit
          // (128) is the pids cgroup fork() fails at, in both tiers.
          expect(r).toMatchObject({
            tier,
            status: 'timed_out',
            error: { class: 'timeout', code: 'TIMEOUT' },
          });
          expect(ms).toBeLessThan(ATTACK_TIMEOUT + KILL_GRACE + overhead[tier]);
          // The bomb did go off: forks failed at the sandbox's pids limit.
          expect(`${r.stdout}${r.stderr}`).toMatch(/Resource temporarily unavailable/);
        }
        const sandbox = await containerOfAction(main[tier], r.id);
        if (pids && atPidsLimit) {
          // The bomb did go off (whatever the runtime): its container's pids cgroup filled up and refused a fork.
          // The refusals are the cgroup's own count (`pids.events`), so they prove it was full; the peak is sampled
          // every 2 ms (cgroup v1 has no `pids.peak`), which on a loaded machine can miss the last few forks before
          // the kill, so it is held to the limit from above only.
          const seen = pids.get(sandbox);
          expect(seen?.refused).toBeGreaterThan(0);
          expect(seen?.peak).toBeLessThanOrEqual(DOCKER_ONE_OFF_PIDS_CGROUP);
          expect(seen?.peak).toBeGreaterThan(DOCKER_ONE_OFF_PIDS_CGROUP / 2);
        }
        const [meanwhile, bystanderMs, bystanderEnded] = await bystander;
        expect(meanwhile).toMatchObject({ status: 'succeeded', stdout: 'unaffected\n' });
        expect(bystanderMs).toBeLessThan(ATTACK_TIMEOUT + overhead[tier]);
        // It ran while the bomb was going off (the bomb's answer and the bystander's may cross on a loaded host).
        expect(bystanderEnded).toBeLessThanOrEqual(bombEnded + 1000);

        // Nothing of the bomb is left: its sandbox holds only its init and the runner (pooled: docker-init, or the
        // pod's pause process) or is gone.
        expect(r.stdout.split('\n')[0]).toBe(hostnameOf(sandbox));
        if (podsSeen) expect([...podsSeen]).toContain(sandbox);
        const leftInSandbox = tier === 'pooled' ? 2 : 0;
        expect(
          await eventually(
            async () => (await backend.hostProcessesIn(sandbox)).length <= leftInSandbox,
            KILL_GRACE,
          ),
        ).toBe(true);
        if (tier === 'container') {
          if (onK8s) {
            // A pod is deleted with a grace period: on its way out at once, gone soon after.
            expect(await backend.sandboxesWith({ action: r.id })).toEqual([]);
            expect(await eventually(async () => !(await backend.exists(sandbox)), POD_GONE_WITHIN)).toBe(
              true,
            );
          } else {
            expect(await backend.exists(sandbox)).toBe(false);
          }
          // No host process of its sandbox is left (under gVisor, the bomb's processes lived only in those).
          expect(
            await eventually(async () => (await hostProcessesOf(sandbox)).length === 0, KILL_GRACE),
          ).toBe(true);
        }
        // Other work on the machine comes and goes; a surviving bomb would add up to its pids limit (128).
        expect(await eventually(() => hostProcessCount() <= before + 40, KILL_GRACE)).toBe(true);
        const after = await code(other[tier], tier, 'bash', 'echo still-fine');
        expect(after).toMatchObject({ status: 'succeeded', stdout: 'still-fine\n' });
      },
    );

    it.each(TIERS)(
      '2. %s: a memory bomb is killed and reported as out of memory; the host, the backend and the engine are fine',
      async (tier) => {
        const r = await code(
          main[tier],
          tier,
          'python',
          'x = bytearray(8 << 30)\nprint("allocated", len(x))',
          15_000,
        );
        expect(r).toMatchObject({
          tier,
          status: 'failed',
          stdout: '',
          error: { class: 'limit', code: 'OUT_OF_MEMORY' },
        });
        expect(r.error.message).toMatch(/out of memory/i);
        const health = await engine.request('GET', '/health');
        expect(health.status).toBe(200);
        expect(health.body.tiers[tier]).toMatchObject({ available: true });
        expect(await backend.healthy()).toBe(true);
        const next = await code(main[tier], tier, 'python', 'print("alive")');
        expect(next).toMatchObject({ status: 'succeeded', stdout: 'alive\n' });
      },
    );

    const burns: Array<[ContainerTierName, string, string, string]> = TIERS.flatMap(
      (tier): Array<[ContainerTierName, string, string, string]> => [
        [tier, 'CPU burn', 'python', 'while True:\n    pass'],
        [tier, 'sleep 1e6', 'bash', 'sleep 1e6'],
        [tier, "trap '' TERM; sleep 1e6", 'bash', "trap '' TERM; sleep 1e6"],
      ],
    );
    it.each(burns)(
      '3. %s: %s is killed at the timeout and reported timed_out',
      async (tier, _name, language, src) => {
        const [r, ms] = await timed(code(main[tier], tier, language, src, KILL_TIMEOUT));
        expect(r).toMatchObject({ tier, status: 'timed_out', error: { class: 'timeout', code: 'TIMEOUT' } });
        expect(r.durationMs).toBeGreaterThanOrEqual(KILL_TIMEOUT);
        expect(ms).toBeLessThan(KILL_TIMEOUT + KILL_GRACE + overhead[tier]);
      },
    );

    /**
     * Kubernetes: the session keeps its pod (its workspace) whatever tier its code runs in; no one-off pod stays.
     * Docker: the stopped one-off container is removed right after the result, off the action's path: gone within the
     * same 2 s as its processes. What the session may hold then is the container started ahead for its next one-off
     * action (`dev.switchyard.action=ahead`), made after this one ended: nothing of `mark` runs in it.
     */
    const noOneOffSandboxOf = async (sid: string, actionId: string, mark?: string): Promise<void> => {
      const ofSession = async () => {
        const ahead = new Set(
          (await backend.sandboxesWith({ session: sid, action: 'ahead' })).map((c) => c.id),
        );
        return (
          await backend.sandboxesWith(onK8s ? { session: sid, tier: 'container' } : { session: sid })
        ).filter((c) => !ahead.has(c.id));
      };
      await eventually(async () => (await ofSession()).length === 0, KILL_GRACE);
      expect(await ofSession()).toEqual([]);
      expect(await backend.sandboxesWith({ action: actionId })).toEqual([]);
      if (mark === undefined) return;
      for (const { id } of await backend.sandboxesWith({ session: sid, action: 'ahead' })) {
        expect((await backend.processesInside(id)).filter((p) => p.includes(mark))).toEqual([]);
      }
    };

    /**
     * Code that starts `sleep <n>` in the background, shows it running, and ends. The check inside proves the
     * child really existed when the action ended, so the checks after it are not vacuous.
     */
    const detach: Array<[ContainerTierName, string, number, string]> = TIERS.flatMap(
      (tier, t): Array<[ContainerTierName, string, number, string]> => [
        [tier, 'background child (&)', 10 + t, `${marker(10 + t)} &`],
        [tier, 'double fork', 20 + t, `( ( ${marker(20 + t)} & ) & )`],
        [tier, 'nohup', 30 + t, `nohup ${marker(30 + t)} >/dev/null 2>&1 &`],
        [tier, 'setsid', 40 + t, `setsid ${marker(40 + t)} >/dev/null 2>&1 < /dev/null &`],
      ],
    );
    it.each(detach)(
      '4. %s: nothing of a %s survives the action (2 s after it ends)',
      async (tier, _name, n, start) => {
        const pods = tier === 'container' && onK8s ? watchOneOffs(main[tier]) : undefined;
        const r = await code(
          main[tier],
          tier,
          'bash',
          `${start}\nfor i in $(seq 40); do ps -eo args | grep -qx "${marker(n)}" && break; sleep 0.05; done\n` +
            `ps -eo args | grep -cx "${marker(n)}"`,
        );
        const ended = Date.now();
        const podsSeen = await pods?.stop();
        expect(r).toMatchObject({ tier, status: 'succeeded', stdout: '1\n' });
        // One-off: no host process of its sandbox either (under gVisor the child lived only in those).
        const sandbox = tier === 'container' ? await containerOfAction(main[tier], r.id) : undefined;
        if (podsSeen) expect([...podsSeen]).toContain(sandbox);
        expect(
          await eventually(
            async () =>
              processesRunning(marker(n)).length === 0 &&
              (sandbox === undefined || (await hostProcessesOf(sandbox)).length === 0),
            KILL_GRACE,
          ),
        ).toBe(true);
        expect(Date.now() - ended).toBeLessThanOrEqual(KILL_GRACE + 100);
        if (tier === 'pooled') {
          // The session's sandbox is still there; nothing of the last action runs in it.
          const ps = await code(main[tier], tier, 'bash', 'ps -eo args');
          expect(ps.status).toBe('succeeded');
          expect(ps.stdout).toContain('runner.py');
          expect(ps.stdout).not.toContain(marker(n));
        } else {
          await noOneOffSandboxOf(main[tier], r.id, marker(n));
        }
      },
    );

    it.each(TIERS)('4. %s: nothing of a timed-out action survives it either', async (tier) => {
      const pods = tier === 'container' && onK8s ? watchOneOffs(main[tier]) : undefined;
      const r = await code(main[tier], tier, 'bash', `${marker(51)} &\n${marker(52)}`, KILL_TIMEOUT);
      const podsSeen = await pods?.stop();
      expect(r).toMatchObject({ tier, status: 'timed_out' });
      const sandbox = tier === 'container' ? await containerOfAction(main[tier], r.id) : undefined;
      if (podsSeen) expect([...podsSeen]).toContain(sandbox);
      expect(
        await eventually(
          async () =>
            processesRunning(marker(51)).length + processesRunning(marker(52)).length === 0 &&
            (sandbox === undefined || (await hostProcessesOf(sandbox)).length === 0),
          KILL_GRACE,
        ),
      ).toBe(true);
      if (tier === 'pooled') {
        const ps = await code(main[tier], tier, 'bash', 'ps -eo args');
        expect(ps.stdout).not.toContain(`sleep ${MARK}5`);
      } else {
        await noOneOffSandboxOf(main[tier], r.id, `sleep ${MARK}5`);
      }
    });

    const floods: Array<[ContainerTierName, string, string, string, 'stdout' | 'stderr']> = TIERS.flatMap(
      (tier): Array<[ContainerTierName, string, string, string, 'stdout' | 'stderr']> => [
        [tier, 'yes', 'bash', 'yes', 'stdout'],
        [
          tier,
          'one endless line',
          'python',
          'import sys\nwhile True:\n    sys.stdout.write("x" * 4096)',
          'stdout',
        ],
        [tier, 'stderr', 'bash', 'yes 1>&2', 'stderr'],
      ],
    );
    it.each(floods)(
      '5. %s: output flood (%s) is capped with the truncated flag; response, engine memory and host disk bounded',
      async (tier, _name, language, src, stream) => {
        const rssBefore = process.memoryUsage().rss;
        const diskBefore = freeSpace(onK8s ? hostDisk() : os.tmpdir()).bytes;
        const res = await engine.request('POST', `/v1/sessions/${main[tier]}/actions`, {
          type: 'code',
          tier,
          language,
          code: src,
          timeoutMs: 10_000,
        });
        expect(res.status).toBe(200);
        const r = res.body;
        expect(r).toMatchObject({
          tier,
          status: 'failed',
          error: { class: 'limit', code: 'OUTPUT_CAP' },
          truncated: { [stream]: true },
        });
        expect(r[stream].length).toBeGreaterThan(0);
        expect(Buffer.byteLength(r[stream])).toBeLessThanOrEqual(OUTPUT_CAP);
        expect(Buffer.byteLength(JSON.stringify(r))).toBeLessThan(2 * OUTPUT_CAP + 16 * 1024);
        expect(r.durationMs).toBeLessThan(10_000);
        expect(process.memoryUsage().rss - rssBefore).toBeLessThan(64 * MiB);
        // Docker: the containers log nowhere, so the flood never reaches the daemon's disk. Kubernetes: the runner's
        // stream is its container's stdout, which the node does log: only what the runner's output cap let through.
        expect(diskBefore - freeSpace(onK8s ? hostDisk() : os.tmpdir()).bytes).toBeLessThan(DISK_MARGIN);
      },
    );

    it.each(TIERS)(
      '6. %s: filling /tmp stops at the tmpfs cap with "No space left on device"; host disk untouched',
      async (tier) => {
        const before = freeSpace(hostDisk()).bytes;
        const r = await code(
          main[tier],
          tier,
          'bash',
          'rc=0; for i in $(seq 1 8); do head -c 16M /dev/zero > /tmp/fill$i || { rc=$?; break; }; done\n' +
            'du -sk /tmp | cut -f1; rm -f /tmp/fill*; exit $rc',
          5000,
        );
        expect(r).toMatchObject({ tier, status: 'failed', exitCode: 1 });
        expect(r.stderr).toContain('No space left on device');
        const kib = Number(r.stdout.trim());
        expect(kib * 1024).toBeLessThanOrEqual(TMPFS_BYTES);
        expect(kib * 1024).toBeGreaterThan(TMPFS_BYTES / 2);
        expect(before - freeSpace(hostDisk()).bytes).toBeLessThan(DISK_MARGIN);
      },
    );

    const inodeFill =
      'import os\nos.mkdir("/tmp/inodes")\nn = 0\ntry:\n    while True:\n' +
      '        open("/tmp/inodes/%d" % n, "w").close()\n        n += 1\nfinally:\n    print(n)';

    // Kubernetes: see the case after this one. gVisor's tmpfs (Debian's runsc, 2022) has no inode cap either: it
    // ignores nr_inodes; see the case after that.
    if (!onK8s) {
      it.each(TIERS.filter((tier) => tier !== 'container' || !gvisor))(
        '6. %s: an inode fill of /tmp stops at its nr_inodes cap with "No space left on device"; host disk untouched',
        async (tier) => {
          // Empty files cost no bytes: the /tmp tmpfs's inode cap (one per 4 KiB of its size) is what stops them, long
          // before the memory limit. A dedicated session: the filled /tmp goes with it.
          const sid = await newSession();
          const before = freeSpace(engine.dataDir);
          const [r, ms] = await timed(code(sid, tier, 'python', inodeFill, 10_000));
          expect(r).toMatchObject({ tier, status: 'failed', exitCode: 1 });
          expect(r.stderr).toContain('No space left on device');
          const files = Number(r.stdout.trim());
          expect(files).toBeLessThan(tmpfsInodes(TMPFS_BYTES));
          expect(files).toBeGreaterThan(tmpfsInodes(TMPFS_BYTES) - 16);
          expect(ms).toBeLessThan(10_000);
          const after = freeSpace(engine.dataDir);
          expect(before.bytes - after.bytes).toBeLessThan(DISK_MARGIN);
          expect(before.inodes - after.inodes).toBeLessThan(INODE_MARGIN);
          await deleteSession(sid);
        },
      );
    }

    // Kubernetes mounts a memory-backed emptyDir as a tmpfs with size= only: its inode cap (half the node's RAM in
    // pages) is far beyond what the pod's memory holds, and each empty file's inode and dentry are kernel memory
    // charged to the pod. The fill ends at the memory limit (or, on a node with little RAM, at that cap).
    if (onK8s) {
      it.each(TIERS)(
        '6. %s: an inode fill of /tmp ends at the pod memory limit (OUT_OF_MEMORY) or ENOSPC; host disk untouched; the session works on',
        async (tier) => {
          const sid = await newSession();
          try {
            const before = freeSpace(hostDisk());
            const r = await code(sid, tier, 'python', inodeFill, 30_000);
            // Whichever it met, the run failed with it (a message of the engine's own is neither).
            const limit =
              r.error?.class === 'limit' && r.error.code === 'OUT_OF_MEMORY'
                ? 'OUT_OF_MEMORY'
                : r.exitCode === 1 && /No space left on device/.test(r.stderr ?? '')
                  ? 'ENOSPC'
                  : `neither: ${JSON.stringify(r.error ?? r.stderr ?? null)}`;
            expect({ tier: r.tier, status: r.status, limit }).toEqual({
              tier,
              status: 'failed',
              limit: expect.stringMatching(/^(OUT_OF_MEMORY|ENOSPC)$/),
            });
            const after = freeSpace(hostDisk());
            expect(before.bytes - after.bytes).toBeLessThan(DISK_MARGIN);
            expect(before.inodes - after.inodes).toBeLessThan(INODE_MARGIN);
            // The filled /tmp stays with a pooled session (it is its state): its next action must still run (the
            // runner restarted in the pod's memory reserve), and deleting the files gives the memory back.
            const next = await code(sid, tier, 'bash', 'echo alive');
            expect(next).toMatchObject({ status: 'succeeded', stdout: 'alive\n' });
            if (tier === 'pooled') {
              const cleaned = await code(sid, tier, 'bash', 'rm -rf /tmp/inodes && echo cleaned');
              expect(cleaned).toMatchObject({ status: 'succeeded', stdout: 'cleaned\n' });
              const half = CONTAINER_MEMORY / 2;
              const after = await code(sid, tier, 'python', `print(len(bytearray(${half})))`);
              expect(after).toMatchObject({ status: 'succeeded', stdout: `${half}\n` });
            }
          } finally {
            // Its pod goes with it, whatever happened above.
            await deleteSession(sid);
          }
        },
        90_000,
      );
    }

    if (gvisor) {
      it('6. container (gVisor): an inode fill of /tmp ends at the memory limit (OUT_OF_MEMORY); host disk untouched', async () => {
        // Under gVisor an empty file in /tmp is memory of the sandbox, charged to the container's memory cgroup: the
        // fill stops there, not at an inode cap (about 50 000 files and 15 s for 128 MiB on ptrace here).
        const sid = await newSession();
        const before = freeSpace(engine.dataDir);
        const r = await code(
          sid,
          'container',
          'python',
          'import os\nos.mkdir("/tmp/inodes")\nn = 0\nwhile True:\n    open("/tmp/inodes/%d" % n, "w").close()\n    n += 1',
          50_000,
        );
        expect(r).toMatchObject({ tier: 'container', status: 'failed' });
        // The memory limit ends it: the OOM killer (OUT_OF_MEMORY), or, on a busy machine, gVisor's own memory
        // accounting refusing the next file first (the code then dies of that error). Never a timeout, never the disk.
        if (r.error?.code !== 'OUT_OF_MEMORY') {
          expect(r.stderr).toMatch(/MemoryError|\[Errno (12|28)\]/);
        } else {
          expect(r.error).toMatchObject({ class: 'limit', code: 'OUT_OF_MEMORY' });
        }
        const after = freeSpace(engine.dataDir);
        expect(before.bytes - after.bytes).toBeLessThan(DISK_MARGIN);
        expect(before.inodes - after.inodes).toBeLessThan(INODE_MARGIN);
        await deleteSession(sid);
      }, 90_000);
    }

    it.each(TIERS)(
      '6. %s: one big file in /workspace stops at the fsize limit (FILE_SIZE); the file API works after',
      async (tier) => {
        const before = freeSpace(hostDisk()).bytes;
        const r = await code(main[tier], tier, 'bash', 'head -c 100M /dev/zero > big.bin', 5000);
        expect(r).toMatchObject({
          tier,
          status: 'failed',
          exitCode: 153,
          error: { class: 'limit', code: 'FILE_SIZE' },
        });
        // Docker: the workspace is a directory of this host. Kubernetes: it is in the session's pod (the file API's).
        if (!onK8s) {
          expect(statSync(path.join(engine.workspaceOf(main[tier]), 'big.bin')).size).toBe(FSIZE_BYTES);
        }
        const stat = await engine.action(main[tier], { type: 'file', op: 'stat', path: 'big.bin' });
        expect(stat).toMatchObject({ status: 'succeeded', output: { size: FSIZE_BYTES } });
        const del = await engine.action(main[tier], { type: 'file', op: 'delete', path: 'big.bin' });
        expect(del.status).toBe('succeeded');
        const write = await engine.action(main[tier], {
          type: 'file',
          op: 'write',
          path: 'ok.txt',
          content: 'ok',
        });
        expect(write.status).toBe('succeeded');
        if (onK8s) {
          // The deleted file's blocks go back when the node's filesystem commits; a one-off pod's copy of the
          // workspace goes with its emptyDir when the kubelet tears the pod down.
          expect(
            await eventually(() => before - freeSpace(hostDisk()).bytes < DISK_MARGIN, DISK_BACK_WITHIN, 500),
          ).toBe(true);
        } else {
          // The deleted file's blocks go back to the host's disk when the workspace's filesystem commits (a btrfs
          // image commits every 30 s; its discard runs at the commit): force the commit rather than wait for it.
          execFileSync('sync', ['-f', engine.workspaceOf(main[tier])]);
          expect(before - freeSpace(engine.dataDir).bytes).toBeLessThan(DISK_MARGIN);
        }
      },
    );

    // Docker: each workspace is its own loop-mounted filesystem of SWITCHYARD_MAX_WORKSPACE_BYTES (WorkspaceQuota), so
    // code writing many files, each under the fsize limit, stops at the workspace cap with ENOSPC, whatever the tier.
    // Kubernetes: see the two cases after this one.
    if (!onK8s) {
      it.each(TIERS)(
        '6. %s: filling /workspace with many files stops at the workspace cap (ENOSPC); host free space unchanged',
        async (tier) => {
          const sid = await newSession();
          const before = freeSpace(engine.dataDir).bytes;
          try {
            const r = await code(
              sid,
              tier,
              'bash',
              workspaceFill,
              // Writing ~96 MiB through gVisor's gofer (the one-off tier's default runtime) takes seconds on a loaded
              // machine: time enough for the write to reach the cap, so the outcome is the ENOSPC, never a timeout.
              30_000,
            );
            const used = before - freeSpace(engine.dataDir).bytes;
            expect({
              status: r.status,
              hostBytesUsedBeyondCap: Math.max(0, used - WORKSPACE_CAP - DISK_MARGIN),
            }).toEqual({ status: 'failed', hostBytesUsedBeyondCap: 0 });
            expect(r.exitCode === undefined || r.exitCode !== 0).toBe(true);
            expect(r.stderr).toContain('No space left on device');
          } finally {
            // Deleting the session removes its workspace and gives the space back, whatever happened above.
            await deleteSession(sid);
          }
        },
      );
    }

    // Kubernetes: the session's workspace is its pod's disk-backed emptyDir, whose sizeLimit
    // (SWITCHYARD_MAX_WORKSPACE_BYTES) the kubelet enforces by evicting the pod, never with ENOSPC: the writes go
    // through, the pod goes once the kubelet has seen it, and its workspace with it. The pooled case is the last one
    // of this block (its fill runs in beforeAll); a one-off pod's workspace is only copied back up to a bound.
    if (onK8s) {
      it("6. container: a one-off action filling /workspace past the cap fails, its workspace is not copied back; the session's workspace is untouched, the one-off pod's data leaves the host disk", async () => {
        const sid = await newSession();
        try {
          const pod = await containerOf(sid, 'pooled');
          const pods = watchOneOffs(sid);
          const r = await code(sid, 'container', 'bash', workspaceFill, 30_000);
          const podsSeen = [...(await pods.stop())];
          // Copying the one-off pod's workspace back into the session's pod stops past the cap (+ 64 MiB of slack).
          expect(r).toMatchObject({
            tier: 'container',
            status: 'error',
            error: { class: 'internal', code: 'KUBE_EXEC_OUTPUT' },
          });
          expect(r.error.message).toMatch(/output over \d+ bytes/);
          await noOneOffSandboxOf(sid, r.id);
          const after = await code(sid, 'pooled', 'bash', 'ls -A; echo same');
          expect(after).toMatchObject({ status: 'succeeded', stdout: '.home\nsame\n' });
          expect(await containerOfAction(sid, after.id)).toBe(pod);
          // The one-off pod's volumes (the 256 MiB it wrote) go when the kubelet tears it down.
          expect(podsSeen).toHaveLength(1);
          const dir = podDirOnNode(podsSeen[0]);
          expect(await eventually(() => !existsSync(dir), DISK_BACK_WITHIN, 250)).toBe(true);
        } finally {
          await deleteSession(sid);
        }
      }, 90_000);
    }

    it.each(TIERS)('7. %s: fd exhaustion fails the action; the engine stays healthy', async (tier) => {
      const r = await code(
        main[tier],
        tier,
        'python',
        'import os\nfds = []\nwhile True:\n    fds.append(os.open("/dev/null", os.O_RDONLY))',
      );
      expect(r).toMatchObject({ tier, status: 'failed', exitCode: 1 });
      expect(r.stderr).toContain('Too many open files');
      const health = await engine.request('GET', '/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: 'ok', tiers: { [tier]: { available: true } } });
      const next = await code(main[tier], tier, 'python', 'print("ok")');
      expect(next).toMatchObject({ status: 'succeeded', stdout: 'ok\n' });
    });

    it.each(TIERS)(
      '16. %s: no residue between sessions (/tmp, /dev/shm, processes), also after a session is deleted',
      async (tier) => {
        const a = await newSession();
        const b = await newSession();
        const wrote = await code(
          a,
          tier,
          'bash',
          'echo a-secret > /tmp/residue; echo a-secret > /dev/shm/residue; cat /tmp/residue /dev/shm/residue; hostname',
        );
        expect(wrote).toMatchObject({ status: 'succeeded' });
        const containerA = await containerOfAction(a, wrote.id);
        expect(wrote.stdout).toBe(`a-secret\na-secret\n${hostnameOf(containerA)}\n`);
        // A pooled session keeps its /tmp and /dev/shm between its own actions; a one-off sandbox never does.
        const again = await code(a, tier, 'bash', 'cat /tmp/residue /dev/shm/residue 2>/dev/null; hostname');
        const againIn = await containerOfAction(a, again.id);
        if (tier === 'pooled') {
          expect(againIn).toBe(containerA);
          expect(again.stdout).toBe(`a-secret\na-secret\n${hostnameOf(containerA)}\n`);
        } else {
          expect(againIn).not.toBe(containerA);
          expect(again.stdout).toBe(`${hostnameOf(againIn)}\n`);
        }

        // While A runs something, B looks for A's files and processes.
        const running = code(a, tier, 'bash', marker(61), 4000);
        let runningIn: string | undefined;
        expect(
          await eventually(
            async () => (runningIn = await runningFor(tier, a, marker(61))) !== undefined,
            3000,
          ),
        ).toBe(true);
        const look =
          'for f in /tmp/residue /dev/shm/residue; do test -e $f && echo "found $f"; done; ls -A /tmp /dev/shm; ' +
          'ps -eo args; grep -rls a-secret /tmp /dev/shm /workspace 2>/dev/null; echo host=$(hostname)';
        // Looking is not an attack: a one-off sandbox's start on a loaded machine must not time it out.
        const seen = await code(b, tier, 'bash', look, LOOK_TIMEOUT);
        expect(seen.status).toBe('succeeded');
        expect(seen.stdout).not.toContain('a-secret');
        expect(seen.stdout).not.toContain('residue');
        expect(seen.stdout).not.toContain(marker(61));
        // Every pod's hostname is `sandbox`: on Kubernetes the engine's record tells the sandboxes apart.
        if (!onK8s) expect(seen.stdout).not.toContain(`host=${hostnameOf(containerA)}`);
        expect(await containerOfAction(b, seen.id)).not.toBe(containerA);

        // Deleting A ends its running action and removes its sandbox; a new session never sees A's files. The DELETE
        // answers once the session is fenced (its running action stopped); the sandbox goes in the background teardown.
        await deleteSession(a);
        const ended = await running;
        expect(ended.status).not.toBe('succeeded');
        await engine.tornDown();
        expect(await backend.sandboxesWith({ session: a })).toEqual([]);
        if (onK8s) {
          // A pod is deleted with a grace period: on its way out at once (above), gone soon after.
          expect(await eventually(async () => !(await backend.exists(containerA)), POD_GONE_WITHIN)).toBe(
            true,
          );
        } else {
          expect(await backend.exists(containerA)).toBe(false);
        }
        expect(await eventually(() => processesRunning(marker(61)).length === 0, KILL_GRACE)).toBe(true);
        // Found inside its container (gVisor): no host process of that container is left either.
        if (runningIn !== 'host') expect(await hostProcessesOf(runningIn!)).toEqual([]);
        const c = await newSession();
        const fresh = await code(c, tier, 'bash', look, LOOK_TIMEOUT);
        expect(fresh.status).toBe('succeeded');
        expect(fresh.stdout).not.toContain('a-secret');
        expect(fresh.stdout).not.toContain('residue');
        if (!onK8s) expect(fresh.stdout).not.toContain(`host=${hostnameOf(containerA)}`);
        expect(await containerOfAction(c, fresh.id)).not.toBe(containerA);
        await deleteSession(b);
        await deleteSession(c);
      },
    );

    if (onK8s) {
      it(
        "6. pooled: filling /workspace past the cap (in beforeAll) gets the session's pod evicted: the loss is " +
          "reported, the session goes on in a fresh pod, the pod's data leaves the host disk",
        async () => {
          const { sid, pod, at, r, bytesOnNode } = overfilled!;
          const lostMessage =
            /\(Evicted: .*(EmptyDir volume "workspace"|ephemeral local storage).*\); its workspace is lost/;
          if (r.status === 'succeeded') {
            // No limit stopped the writes: they are on the node's disk, past the cap.
            expect(Number(r.stdout.split('\t')[0]) * 1024).toBeGreaterThan(WORKSPACE_CAP);
            expect(bytesOnNode).toBeGreaterThan(WORKSPACE_CAP);
          } else {
            // The eviction came during the run.
            expect(r).toMatchObject({ tier: 'pooled', status: 'error', error: { class: 'internal' } });
            expect(r.error.message).toMatch(lostMessage);
          }
          // The kubelet evicts the pod (phase Failed; or the engine, told, deleted it already).
          const evicted = await eventually(
            async () =>
              (await backend.sandboxesWith({ session: sid, tier: 'pooled' })).some(
                (p) => p.id === pod && p.state === 'failed',
              ) || !(await backend.exists(pod)),
            Math.max(0, at + EVICTION_WITHIN - Date.now()),
            500,
          );
          expect({ evicted, afterMs: Date.now() - at }).toEqual({
            evicted: true,
            afterMs: expect.any(Number),
          });
          // The session's next action reports the loss (unless the fill's own action did); the one after runs in a
          // fresh pod with an empty workspace.
          if (r.status === 'succeeded') {
            const next = await code(sid, 'pooled', 'bash', 'ls');
            expect(next).toMatchObject({ tier: 'pooled', status: 'error', error: { class: 'internal' } });
            expect(next.error.message).toMatch(lostMessage);
          }
          const fresh = await code(sid, 'pooled', 'bash', 'ls -A; echo fresh');
          expect(fresh).toMatchObject({ status: 'succeeded', stdout: '.home\nfresh\n' });
          expect(await containerOfAction(sid, fresh.id)).not.toBe(pod);
          expect(await eventually(async () => !(await backend.exists(pod)), POD_GONE_WITHIN)).toBe(true);
          // The evicted pod's volumes go with it.
          const dir = podDirOnNode(pod);
          expect(await eventually(() => !existsSync(dir), DISK_BACK_WITHIN, 250)).toBe(true);
          await deleteSession(sid);
        },
        EVICTION_WITHIN + 60_000,
      );
    }
  },
);

/**
 * Docker only: warm and claimed containers broken with `docker pause`, `docker kill` and a SIGKILLed runner. On
 * Kubernetes a session pod's runner that dies is restarted in the same pod (the workspace is the pod's), and a pod
 * that goes away takes the workspace with it: those cases are in libs/sandbox/src/backends/kubernetes/
 * kubernetes.integration.spec.ts ('a runner killed by the code fails the run with RUNNER_LOST…', 'restarts a runner
 * whose connection dropped…'), and an evicted session pod is above (6. pooled, on kubernetes).
 */
if (DOCKER_BACKEND) {
  describe('unhealthy pooled containers, through the API (SECURITY.md 19), on docker', () => {
    let engine: EngineHarness;
    let engineLabel: string;
    /** Short ids of every container a session of this block was given. */
    const claimed: string[] = [];
    const sessions: string[] = [];

    const pooled = (sid: string, src: string, timeoutMs = 5000): Promise<any> =>
      engine.action(sid, { type: 'code', tier: 'pooled', language: 'bash', code: src, timeoutMs });
    const newSession = async (): Promise<string> => {
      const sid = await engine.createSession();
      sessions.push(sid);
      return sid;
    };
    /** Runs `hostname` in the session's pooled container. */
    const containerOf = async (sid: string): Promise<string> => {
      const r = await pooled(sid, 'hostname');
      expect(r).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      const id = r.stdout.trim();
      claimed.push(id);
      return id;
    };
    /** This engine's pooled containers that no session of this block holds: the warm ones. */
    const warmContainers = async (): Promise<string[]> =>
      (await containersWith({ [LABELS.tier]: 'pooled', [LABELS.engine]: engineLabel }))
        .filter((c) => c.state === 'running' && !claimed.some((s) => c.id.startsWith(s)))
        .map((c) => c.id);
    /** Waits until the pool holds `n` ready warm containers and nothing is starting or being checked. */
    const poolSettled = async (n: number): Promise<string[]> => {
      let warm: string[] = [];
      const ok = await eventually(
        async () => {
          const pool = (await engine.request('GET', '/health')).body.tiers.pooled.details?.pool;
          warm = await warmContainers();
          return (
            pool?.available >= n &&
            pool.borrowed === 0 &&
            pool.pending === 0 &&
            pool.size === pool.available &&
            warm.length === pool.available
          );
        },
        15_000,
        100,
      );
      expect(ok).toBe(true);
      return warm;
    };
    const breakContainer = async (how: string, id: string): Promise<void> => {
      switch (how) {
        case 'paused':
          await docker('pause', id);
          return;
        case 'killed':
          await docker('kill', id);
          return;
        case 'runner-killed':
          // The runner is the container's main process under docker-init (pooled-container.ts, RUNNER_CMD).
          process.kill(await hostPidIn(id, 'runner.py'), 'SIGKILL');
          return;
        default:
          throw new Error(how);
      }
    };

    beforeAll(async () => {
      engine = await EngineHarness.start(engineEnv);
      engineLabel = await DOCKER_BACKEND.engineLabelOf(await containerOf(await newSession()));
    });

    afterAll(async () => {
      const ours = await containersWith({ [LABELS.engine]: engineLabel });
      for (const c of ours.filter((x) => x.state === 'paused'))
        await docker('unpause', c.id).catch(() => undefined);
      await engine.stop();
      const left = await containersWith({ [LABELS.engine]: engineLabel });
      await forceRemove(left.map((c) => c.id));
      expect(left).toEqual([]);
    });

    it.each(['paused', 'killed', 'runner-killed'])(
      '19. warm containers that are %s are never handed out; a new session gets a healthy one',
      async (how) => {
        const victims = await poolSettled(2);
        await Promise.all(victims.map((id) => breakContainer(how, id)));
        const sid = await newSession();
        const t0 = Date.now();
        const r = await pooled(sid, 'echo fresh; hostname');
        expect(r).toMatchObject({ status: 'succeeded', tier: 'pooled' });
        expect(Date.now() - t0).toBeLessThan(10_000);
        const [out, id] = r.stdout.trim().split('\n');
        expect(out).toBe('fresh');
        claimed.push(id);
        expect(victims.some((v) => v.startsWith(id))).toBe(false);
        // The broken ones are found by the pool's health checks and removed.
        expect(
          await eventually(
            async () => !(await Promise.all(victims.map(containerExists))).some(Boolean),
            10_000,
          ),
        ).toBe(true);
      },
    );

    it.each(['killed', 'runner-killed'])(
      '19. a claimed container %s between actions is detected and replaced: the next action runs in a fresh one',
      async (how) => {
        const sid = await newSession();
        const first = await pooled(sid, 'echo kept > kept.txt; echo lost > /tmp/lost.txt; hostname');
        const id = first.stdout.trim();
        claimed.push(id);
        await breakContainer(how, id);
        // The runner connection closing is the health signal: the engine destroys the container by itself.
        expect(await eventually(async () => !(await containerExists(id)), 5000)).toBe(true);
        const next = await pooled(
          sid,
          'cat kept.txt; cat /tmp/lost.txt 2>/dev/null || echo no-tmp; hostname',
        );
        expect(next).toMatchObject({ status: 'succeeded' });
        const [kept, tmp, fresh] = next.stdout.trim().split('\n');
        expect([kept, tmp]).toEqual(['kept', 'no-tmp']);
        expect(fresh).not.toBe(id);
        claimed.push(fresh);
        const after = await pooled(sid, 'hostname');
        expect(after).toMatchObject({ status: 'succeeded', stdout: `${fresh}\n` });
      },
    );

    it.each([
      ['killed with docker kill', 'killed', 'RUNNER_LOST'],
      ['whose runner is killed', 'runner-killed', 'RUNNER_LOST'],
    ])(
      '19. a claimed container %s during a run: that action reports a clear error; the next one runs in a fresh container',
      async (_name, how, errorCode) => {
        const sid = await newSession();
        const id = (await pooled(sid, 'echo kept > kept.txt; hostname')).stdout.trim();
        claimed.push(id);
        const n = how === 'killed' ? 71 : 72;
        const pending = pooled(sid, marker(n), 20_000);
        expect(await eventually(() => processesRunning(marker(n)).length > 0, 3000)).toBe(true);
        const t0 = Date.now();
        await breakContainer(how, id);
        const r = await pending;
        expect(Date.now() - t0).toBeLessThan(5000);
        expect(r).toMatchObject({
          status: 'error',
          tier: 'pooled',
          error: { class: 'internal', code: errorCode },
        });
        expect(r.error.message).toMatch(/fresh/);
        expect(await containerExists(id)).toBe(false);
        const next = await pooled(sid, 'cat kept.txt; hostname');
        expect(next).toMatchObject({ status: 'succeeded' });
        const [kept, fresh] = next.stdout.trim().split('\n');
        expect(kept).toBe('kept');
        expect(fresh).not.toBe(id);
        claimed.push(fresh);
      },
    );

    it('19. a claimed container that is paused: the next action reports it unresponsive; the one after runs in a fresh container', async () => {
      const sid = await newSession();
      const id = await containerOf(sid);
      await breakContainer('paused', id);
      const t0 = Date.now();
      const r = await pooled(sid, 'echo never', 1000);
      // Bounded by the action's timeout plus the tier's runner grace (2 s).
      expect(Date.now() - t0).toBeLessThan(1000 + 2000 + 2000);
      expect(r).toMatchObject({
        status: 'error',
        tier: 'pooled',
        error: { class: 'internal', code: 'RUNNER_UNRESPONSIVE' },
      });
      expect(r.error.message).toMatch(/fresh/);
      expect(await containerExists(id)).toBe(false);
      const next = await pooled(sid, 'echo back; hostname');
      expect(next).toMatchObject({ status: 'succeeded' });
      const [back, fresh] = next.stdout.trim().split('\n');
      expect(back).toBe('back');
      expect(fresh).not.toBe(id);
      claimed.push(fresh);
    });
  });
}

describe.each(BACKENDS)(
  'engine killed with SIGKILL mid-action, then restarted (SECURITY.md 17), on %s',
  (_name, backend) => {
    const { runningFor, hostProcessesOf } = probesOf(backend);
    const onK8s = backend.name === 'kubernetes';
    let dataDir: string;
    let port: number;
    let env: Record<string, string>;
    let first: EngineProcess;
    let second: EngineProcess | undefined;
    const sessionOf = {} as Record<ContainerTierName, string>;
    let pooledSandbox: string;
    let deadEngineId: string;
    let leftovers: SandboxDetails[] = [];
    const sleeper = (tier: ContainerTierName): string => marker(tier === 'pooled' ? 81 : 82);
    /** Sandboxes (any state but a pod on its way out) labelled with an engine of this process id. */
    const ofEngine = async (pid: number): Promise<SandboxDetails[]> =>
      (await backend.describeSandboxes({})).filter((c) => c.engine.split(':')[1] === String(pid));

    beforeAll(async () => {
      env = { ...engineEnv, ...(await backend.env()) };
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-kill9-'));
      port = await freePort();
      first = await EngineProcess.start(dataDir, port, env);
      const health = (await first.request('GET', '/health')).body;
      expect(health.backend).toMatchObject({ name: backend.name });
      if (!onK8s) expect(health.tiers.container.details.runtime).toBe(DOCKER_ONE_OFF_RUNTIME);
      for (const tier of TIERS) sessionOf[tier] = await first.createSession();
      // The pooled session holds its sandbox before the long action starts.
      const claim = await first.request('POST', `/v1/sessions/${sessionOf.pooled}/actions`, {
        type: 'code',
        tier: 'pooled',
        language: 'bash',
        code: 'hostname',
      });
      expect(claim.body).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      pooledSandbox = (
        await first.request('GET', `/v1/sessions/${sessionOf.pooled}/actions/${claim.body.id}`)
      ).body.sandbox.containerId;
      // Both long actions run (their sleep is in the host's process table, or, under gVisor, in the one-off
      // container's), then the engine is SIGKILLed.
      const pending = TIERS.map((tier) =>
        first
          .request('POST', `/v1/sessions/${sessionOf[tier]}/actions`, {
            type: 'code',
            tier,
            language: 'bash',
            code: sleeper(tier),
            timeoutMs: 30_000,
          })
          .catch(() => undefined),
      );
      const running = await eventually(
        async () =>
          (await Promise.all(TIERS.map((t) => runningFor(t, sessionOf[t], sleeper(t))))).every(Boolean),
        15_000,
      );
      if (!running) throw new Error(`the long actions did not start: ${first.log}`);
      await first.stop('SIGKILL');
      await Promise.all(pending);
      leftovers = await ofEngine(first.pid);
      deadEngineId = leftovers[0]?.engine;
      second = await EngineProcess.start(dataDir, port, env);
    });

    afterAll(async () => {
      await second?.stop('SIGTERM');
      await first?.stop('SIGKILL');
      // Never leave anything behind, whatever failed above.
      if (first) {
        const left = [...(await ofEngine(first.pid)), ...(second ? await ofEngine(second.pid) : [])];
        await backend.remove(left.map((c) => c.id));
      }
      removeDataDir(dataDir);
    });

    it('17. the dead engine left sandboxes of both tiers, labelled with its engine id', () => {
      expect(deadEngineId).toMatch(new RegExp(`:${first.pid}:\\d+:[0-9a-f]{8}$`));
      expect(leftovers.every((c) => c.engine === deadEngineId)).toBe(true);
      const oneOff = leftovers.filter((c) => c.tier === 'container');
      expect(oneOff).toEqual([expect.objectContaining({ state: 'running', session: sessionOf.container })]);
      expect(leftovers.some((c) => c.tier === 'pooled' && c.id === pooledSandbox)).toBe(true);
    });

    it.each(TIERS)(
      "17. %s: the restarted engine reaps the dead engine's sandboxes by label (on Kubernetes it adopts the session pod)",
      async (tier) => {
        if (onK8s && tier === 'pooled') {
          // A session pod outlives its engine: the restarted engine adopts it (files, kernels and processes kept,
          // docs/kubernetes.md), and the runner's resync ended the run the dead engine had started.
          const adopted = await eventually(async () => {
            const [pod] = await backend.describeSandboxes({ session: sessionOf.pooled, tier: 'pooled' });
            return pod?.id === pooledSandbox && pod.engine.split(':')[1] === String(second!.pid);
          }, 15_000);
          expect(adopted).toBe(true);
          expect(await backend.sandboxesWith({ engine: deadEngineId, tier })).toEqual([]);
          expect(await eventually(async () => processesRunning(sleeper(tier)).length === 0, 5000)).toBe(true);
          return;
        }
        const gone = await eventually(
          async () => (await backend.sandboxesWith({ engine: deadEngineId, tier })).length === 0,
          15_000,
          200,
        );
        expect(gone).toBe(true);
        const ids = leftovers.filter((l) => l.tier === tier).map((c) => c.id);
        // Kubernetes deletes a pod with a grace period: on its way out at once (above), then gone.
        const allGone = async () => !(await Promise.all(ids.map((id) => backend.exists(id)))).some(Boolean);
        expect(onK8s ? await eventually(allGone, POD_GONE_WITHIN, 200) : await allGone()).toBe(true);
        // Nor any host process of them (under gVisor, the one-off sleeper lived only in those).
        expect(
          await eventually(
            async () =>
              processesRunning(sleeper(tier)).length === 0 &&
              (await Promise.all(ids.map(hostProcessesOf))).every((p) => p.length === 0),
            2000,
          ),
        ).toBe(true);
      },
    );

    it.each(TIERS)('17. %s: the action running at the kill is interrupted', async (tier) => {
      const timeline = await second!.request('GET', `/v1/sessions/${sessionOf[tier]}/actions`);
      expect(timeline.status).toBe(200);
      const last = timeline.body.actions.at(-1);
      expect(last).toMatchObject({
        status: 'interrupted',
        inputSummary: expect.stringContaining(sleeper(tier)),
      });
      const one = await second!.request('GET', `/v1/sessions/${sessionOf[tier]}/actions/${last.id}`);
      expect(one).toMatchObject({ status: 200, body: { id: last.id, status: 'interrupted', tier } });
    });

    it.each(TIERS)(
      '17. %s: the graph is readable and consistent, and the session works again',
      async (tier) => {
        const sid = sessionOf[tier];
        const graph = await second!.request('GET', `/v1/sessions/${sid}/graph`);
        expect(graph.status).toBe(200);
        const ids = new Set(graph.body.nodes.map((n: any) => n.id));
        expect(ids.has(sid)).toBe(true);
        for (const e of graph.body.edges) {
          expect(ids.has(e.from)).toBe(true);
          expect(ids.has(e.to)).toBe(true);
        }
        const timeline = (await second!.request('GET', `/v1/sessions/${sid}/actions`)).body.actions;
        for (const a of timeline) {
          const node = graph.body.nodes.find((n: any) => n.id === a.id);
          expect(node).toMatchObject({ label: 'Action', properties: { status: a.status } });
        }
        const interrupted = timeline.filter((a: any) => a.status === 'interrupted');
        expect(interrupted).toHaveLength(1);
        expect(graph.body.nodes.find((n: any) => n.id === interrupted[0].id)).toMatchObject({
          properties: { status: 'interrupted' },
        });
        const again = await second!.request('POST', `/v1/sessions/${sid}/actions`, {
          type: 'code',
          tier,
          language: 'bash',
          code: 'echo back',
        });
        expect(again.body).toMatchObject({ status: 'succeeded', tier, stdout: 'back\n' });
      },
    );
  },
);
