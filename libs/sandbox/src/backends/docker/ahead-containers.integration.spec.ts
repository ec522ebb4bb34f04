/**
 * Integration tests: one-off containers started ahead (`AheadContainers`) with the real Docker engine and the real
 * sandbox image, on runc (gVisor through the API: test/e2e/container-runtime). A session's next container is started
 * after its run and taken by its next run with the same settings; every run still gets a fresh container, removed
 * after it.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import type { Language } from '@switchyard/common';
import Dockerode from 'dockerode';
import { TEST_IMAGE_SOURCE } from '../../../test/sandbox-image';
import { buildChildEnv } from '../../core/env-policy';
import { resolveSandboxOptions } from '../../core/sandbox.options';
import type { TierJob } from '../../core/sandbox.types';
import { AHEAD_ACTION_LABEL } from './ahead-containers';
import { LABEL_ACTION, LABEL_ENGINE, LABEL_SESSION, LABEL_TIER } from './container.constants';
import { currentImage, resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { ContainerTier } from './container-tier';
import { DockerodeClient } from './docker-client';

const SOCKET = process.env.DOCKER_HOST?.startsWith('unix://')
  ? process.env.DOCKER_HOST.slice('unix://'.length)
  : '/var/run/docker.sock';
const IMAGE = currentImage(resolveContainerOptions({ ...TEST_IMAGE_SOURCE, reapOnStart: false }));
if (!IMAGE) throw new Error('no sandbox image tag: run `npm run sandbox:image`');
const SANDBOX_ID = 10001;
/** Engine and session ids of this run of the file: parallel runs never see each other's containers. */
const RUN = `ah${randomBytes(3).toString('hex')}`;

describe('one-off containers started ahead (real Docker)', () => {
  jest.setTimeout(30_000);
  const docker = new Dockerode({ socketPath: SOCKET });
  const client = new DockerodeClient(docker);
  const output = resolveSandboxOptions({}).output;
  const tiers: ContainerTier[] = [];
  let root: string;
  let workspaceDir: string;

  const newTier = (extra: Partial<ContainerTierOptions> = {}, name = 'main'): ContainerTier => {
    const tier = new ContainerTier(
      client,
      resolveContainerOptions({
        ...TEST_IMAGE_SOURCE,
        runtime: 'runc',
        engineInstanceId: `${RUN}-${name}`,
        reapOnStart: false,
        ...extra,
      }),
    );
    tiers.push(tier);
    return tier;
  };

  /** Containers of this file's engines, with their labels. */
  const containers = async (labels: string[] = []) =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_TIER}=container`, ...labels] },
      })
    ).filter((c) => (c.Labels[LABEL_ENGINE] ?? '').startsWith(RUN));
  const aheadOf = (sessionId: string) =>
    containers([`${LABEL_SESSION}=${sessionId}`, `${LABEL_ACTION}=${AHEAD_ACTION_LABEL}`]);

  /** Waits until `check` holds (the containers started ahead come after the result). */
  async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = await check();
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const startedAhead = (sessionId: string) =>
    until(`a container started ahead for ${sessionId}`, async () => {
      const [c] = await aheadOf(sessionId);
      return c?.State === 'running' ? c.Id : undefined;
    });

  function job(sessionId: string, language: Language, code: string, extra: Partial<TierJob> = {}): TierJob {
    return {
      actionId: `a-${randomBytes(3).toString('hex')}`,
      sessionId: `${RUN}-${sessionId}`,
      language,
      code,
      env: buildChildEnv({}, language),
      timeoutMs: 10_000,
      workspaceDir,
      output,
      ...extra,
    };
  }

  /**
   * Two runs in the session (a session's first one-off run starts no container ahead: only from its second), then its
   * container started ahead, once it runs.
   */
  async function warm(tier: ContainerTier, sessionId: string, language: Language): Promise<string> {
    const noop = language === 'node' ? '0' : language === 'python' ? 'pass' : 'true';
    for (let i = 0; i < 2; i++) await tier.run(job(sessionId, language, noop));
    return startedAhead(`${RUN}-${sessionId}`);
  }

  beforeAll(() => {
    Logger.overrideLogger(['error']);
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-ahead-int-'));
    fs.chmodSync(root, 0o711);
  });

  beforeEach(() => {
    workspaceDir = fs.mkdtempSync(path.join(root, 'ws-'));
    fs.chownSync(workspaceDir, SANDBOX_ID, SANDBOX_ID);
  });

  afterAll(async () => {
    await Promise.all(tiers.map((t) => t.onApplicationShutdown()));
    // Nothing of this file's engines outlives their shutdown, started ahead or not.
    expect(await containers()).toEqual([]);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("the session's next run takes the container started after its last one: a fresh container, its files seen", async () => {
    const tier = newTier();
    // A session's first one-off run starts nothing ahead: a session may have one high-risk action and no other.
    const opening = await tier.run(job('s1', 'python', 'pass'));
    expect(opening).toMatchObject({ exitCode: 0, startedAhead: false });
    await new Promise((r) => setTimeout(r, 500));
    expect(await aheadOf(`${RUN}-s1`)).toEqual([]);
    const first = await tier.run(
      job(
        's1',
        'python',
        "open('/tmp/mark', 'w').write('1')\nopen('made.txt', 'w').write('by run 1')\nprint('one')",
      ),
    );
    expect(first).toMatchObject({ exitCode: 0, stdout: 'one\n', startedAhead: false });
    const aheadId = await startedAhead(`${RUN}-s1`);
    expect(aheadId).not.toBe(first.containerId);
    // The host changes the workspace after that container started: the run sees it as it is now.
    fs.writeFileSync(path.join(workspaceDir, 'host.txt'), 'from the host');
    const second = await tier.run(
      job(
        's1',
        'python',
        "import os, sys\nprint(os.path.exists('/tmp/mark'), open('made.txt').read(), open('host.txt').read(), sys.stdin.read())\nsys.exit(7)",
        { stdin: 'in' },
      ),
    );
    expect(second).toMatchObject({
      exitCode: 7,
      stdout: 'False by run 1 from the host in\n',
      startedAhead: true,
      containerId: aheadId,
    });
    // Each run's container is removed after it; the third is already waiting.
    await until('the runs’ containers removed', async () => {
      const ids = (await containers([`${LABEL_SESSION}=${RUN}-s1`])).map((c) => c.Id);
      return ids.includes(first.containerId!) || ids.includes(aheadId) ? undefined : true;
    });
    expect(await startedAhead(`${RUN}-s1`)).not.toBe(aheadId);
  });

  it('python in a container started ahead sees what the session installed meanwhile: its user site, .pth files', async () => {
    const tier = newTier();
    await tier.run(job('site', 'python', 'pass'));
    const first = await tier.run(job('site', 'python', 'import site\nprint(site.getusersitepackages())'));
    const userSite = first.stdout.trim();
    expect(userSite).toMatch(/^\/workspace\/\.home\/\.local\/lib\/python3\.\d+\/site-packages$/);
    await startedAhead(`${RUN}-site`);
    // As a `pip install --user` in another tier would leave it, after that container started: the user site did not
    // exist then.
    const onHost = path.join(workspaceDir, userSite.slice('/workspace/'.length));
    fs.mkdirSync(path.join(onHost, 'extra'), { recursive: true });
    fs.writeFileSync(path.join(onHost, 'installed_mod.py'), 'VALUE = "installed"\n');
    fs.writeFileSync(path.join(onHost, 'extra', 'from_pth.py'), 'VALUE = "from a .pth"\n');
    fs.writeFileSync(path.join(onHost, 'paths.pth'), `${userSite}/extra\n`);
    fs.chownSync(path.join(workspaceDir, '.home'), SANDBOX_ID, SANDBOX_ID);
    const r = await tier.run(
      job(
        'site',
        'python',
        // The user site comes before the system's packages, as in any interpreter started now.
        'import installed_mod, from_pth, sys\n' +
          `print(installed_mod.VALUE, from_pth.VALUE, sys.path.index('${userSite}') < sys.path.index('/usr/lib/python3/dist-packages'), sys.flags.no_site, sys.stdin.read())`,
        { stdin: 'in' },
      ),
    );
    expect(r).toMatchObject({ exitCode: 0, stdout: 'installed from a .pth True 0 in\n', startedAhead: true });
    // Nothing changed in the user site since: the interpreter started ahead runs the code itself.
    await startedAhead(`${RUN}-site`);
    const again = await tier.run(
      job('site', 'python', 'import installed_mod, os\nprint(installed_mod.VALUE, os.getpid())'),
    );
    expect(again).toMatchObject({
      exitCode: 0,
      stdout: expect.stringMatching(/^installed \d+\n$/),
      startedAhead: true,
    });
  });

  it.each([
    ['bash', 'echo "bash $(cat)"; echo err >&2; exit 5', 'bash in\n', 5],
    [
      'node',
      'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{console.log("node",s);process.exit(4)})',
      'node in\n',
      4,
    ],
  ] as const)(
    '%s: output, exit code and stdin in a container started ahead',
    async (language, code, stdout, exitCode) => {
      const tier = newTier();
      const session = `lang-${language}`;
      await warm(tier, session, language);
      const r = await tier.run(job(session, language, code, { stdin: 'in' }));
      expect(r).toMatchObject({ exitCode, stdout, startedAhead: true });
    },
  );

  it('close to 1 MiB of code reaches a container started ahead intact; larger code goes to a new one', async () => {
    const tier = newTier();
    await warm(tier, 'big', 'python');
    const filler = `# ${'x'.repeat(1000)}\n`.repeat(1000);
    const code = `${filler}import sys\nprint(len(open(__file__).read().encode()), sys.stdin.read())`;
    const r = await tier.run(job('big', 'python', code, { stdin: 'after' }));
    expect(r).toMatchObject({
      exitCode: 0,
      stdout: `${Buffer.byteLength(code)} after\n`,
      startedAhead: true,
    });
    await startedAhead(`${RUN}-big`);
    const larger = `${filler}${filler}print(len(open(__file__).read()))`;
    const cold = await tier.run(job('big', 'python', larger));
    expect(cold).toMatchObject({ exitCode: 0, stdout: `${larger.length}\n`, startedAhead: false });
  });

  it('a run with other settings (its environment) gets a new container; the one started ahead is removed', async () => {
    const tier = newTier();
    const aheadId = await warm(tier, 'env', 'bash');
    const env = { ...buildChildEnv({}, 'bash'), GREETING: 'hello' };
    const r = await tier.run(job('env', 'bash', 'echo "$GREETING"', { env }));
    expect(r).toMatchObject({ exitCode: 0, stdout: 'hello\n', startedAhead: false });
    expect(r.containerId).not.toBe(aheadId);
    await until('the mismatched container removed', async () =>
      (await containers()).some((c) => c.Id === aheadId) ? undefined : true,
    );
    // The next one has the new settings.
    await startedAhead(`${RUN}-env`);
    expect(await tier.run(job('env', 'bash', 'echo "$GREETING"', { env }))).toMatchObject({
      stdout: 'hello\n',
      startedAhead: true,
    });
  });

  it("the run's timeout counts from the run, not from the container's start", async () => {
    const tier = newTier();
    await warm(tier, 'clock', 'bash');
    await new Promise((r) => setTimeout(r, 1500));
    const ok = await tier.run(job('clock', 'bash', 'echo in-time', { timeoutMs: 1000 }));
    expect(ok).toMatchObject({ exitCode: 0, stdout: 'in-time\n', timedOut: false, startedAhead: true });
    await startedAhead(`${RUN}-clock`);
    const started = Date.now();
    const late = await tier.run(job('clock', 'bash', 'sleep 30', { timeoutMs: 1000 }));
    expect(late).toMatchObject({ timedOut: true, startedAhead: true });
    expect(Date.now() - started).toBeLessThan(1000 + 2000);
  });

  it('a container started ahead that died is not used', async () => {
    const tier = newTier();
    const aheadId = await warm(tier, 'dead', 'bash');
    await docker.getContainer(aheadId).kill();
    await until('the kill seen', async () =>
      (await docker.getContainer(aheadId).inspect()).State.Running ? undefined : true,
    );
    const r = await tier.run(job('dead', 'bash', 'echo fine'));
    expect(r).toMatchObject({ exitCode: 0, stdout: 'fine\n', startedAhead: false });
  });

  it('removed when not taken within idleMs, when its session is released, and never more than max', async () => {
    const tier = newTier({ ahead: { max: 2, idleMs: 1500 } }, 'bounded');
    for (const s of ['b1', 'b2', 'b3']) {
      await warm(tier, s, 'bash');
    }
    // The least recently made went for the third.
    await until('two held', async () =>
      (await containers([`${LABEL_ENGINE}=${RUN}-bounded`])).length === 2 ? true : undefined,
    );
    expect(await aheadOf(`${RUN}-b1`)).toEqual([]);
    await tier.releaseSession(`${RUN}-b2`);
    expect(await aheadOf(`${RUN}-b2`)).toEqual([]);
    expect(await aheadOf(`${RUN}-b3`)).toHaveLength(1);
    await until(
      'the idle one removed',
      async () => ((await aheadOf(`${RUN}-b3`)).length === 0 ? true : undefined),
      5000,
    );
  });

  it('none with max 0', async () => {
    const tier = newTier({ ahead: { max: 0 } }, 'none');
    const r = await tier.run(job('n', 'bash', 'echo x'));
    expect(r).toMatchObject({ stdout: 'x\n', startedAhead: false });
    await new Promise((res) => setTimeout(res, 1000));
    expect(await containers([`${LABEL_ENGINE}=${RUN}-none`])).toEqual([]);
  });
});
