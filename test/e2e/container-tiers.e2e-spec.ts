import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { eventually } from '../support/host-probes';
import { SANDBOX_BACKENDS } from '../support/sandbox-backends';

jest.setTimeout(60_000);

/**
 * Container tiers through the API, on each sandbox backend: the Docker engine `npm test` starts, and the
 * single-node Kubernetes cluster it starts (where a session's workspace lives in its pod).
 */
describe.each(SANDBOX_BACKENDS.map((b) => [b.name, b] as const))('container tiers (%s)', (_name, backend) => {
  let engine: EngineHarness;
  let a: string;
  let b: string;
  /** The one-off tier's runtime as /health reports it (`runsc`: gVisor, when the Docker engine has it). */
  let oneOffRuntime: string | undefined;
  const run = (sid: string, tier: string, language: string, code: string): Promise<any> =>
    engine.action(sid, { type: 'code', language, code, tier, timeoutMs: 20_000 });
  /** The sandbox (container id, pod name) an action ran in, as the engine recorded it. */
  const sandboxOf = async (sid: string, actionId: string): Promise<string> =>
    (await engine.request('GET', `/v1/sessions/${sid}/actions/${actionId}`)).body.sandbox.containerId;

  /** One template: the sandbox image as is (an `image` template) with an env variable. */
  const templatesDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-templates-'));
  const imageTag = readFileSync(path.resolve(__dirname, '../../.runtime/sandbox-image.tag'), 'utf8').trim();
  writeFileSync(
    path.join(templatesDir, 'greeter.toml'),
    `description = "the sandbox image, greeting"\nimage = "${imageTag}"\n\n[env]\nGREETING = "from-template"\n`,
  );

  beforeAll(async () => {
    engine = await EngineHarness.start({
      ...(await backend.env()),
      SWITCHYARD_TEMPLATES_DIR: templatesDir,
      SWITCHYARD_SKILLS_DIR: path.resolve(__dirname, '../../examples/skills'),
    });
    const health = (await engine.request('GET', '/health')).body;
    expect(health.backend).toMatchObject({ name: backend.name, ready: true });
    oneOffRuntime = health.tiers.container.details.runtime;
    a = await engine.createSession();
    b = await engine.createSession();
  });
  afterAll(async () => {
    await engine?.stop();
    rmSync(templatesDir, { recursive: true, force: true });
  });

  it.each([
    ['pooled', 'python', 'print("py")', 'py\n'],
    ['pooled', 'node', 'console.log("js")', 'js\n'],
    ['pooled', 'bash', 'echo sh', 'sh\n'],
    ['container', 'python', 'print("py")', 'py\n'],
    ['container', 'node', 'console.log("js")', 'js\n'],
    ['container', 'bash', 'echo sh', 'sh\n'],
  ])('%s tier runs %s', async (tier, language, code, stdout) => {
    const r = await run(a, tier, language, code);
    expect(r).toMatchObject({ status: 'succeeded', tier, stdout, exitCode: 0 });
  });

  it('shares one workspace between the file API, pooled code, one-off sandboxes and low-risk code', async () => {
    await engine.action(a, { type: 'file', op: 'write', path: 'from-api.txt', content: 'api' });
    const pooled = await run(a, 'pooled', 'bash', 'cat from-api.txt; echo pooled > from-pooled.txt');
    expect(pooled.stdout).toBe('api');
    const read = await engine.action(a, { type: 'file', op: 'read', path: 'from-pooled.txt' });
    expect(read.output.content).toBe('pooled\n');
    const oneOff = await run(a, 'container', 'bash', 'cat from-pooled.txt; echo oneoff > from-oneoff.txt');
    expect(oneOff.stdout).toBe('pooled\n');
    const sub = await run(a, 'subprocess', 'bash', 'cat from-oneoff.txt');
    expect(sub.stdout).toBe('oneoff\n');
    // On Kubernetes the workspace is in the session's pod: low-risk code runs there too (never weaker).
    expect(sub.tier).toBe(backend.name === 'kubernetes' ? 'pooled' : 'subprocess');
    const back = await run(a, 'pooled', 'bash', 'cat from-oneoff.txt');
    expect(back.stdout).toBe('oneoff\n');
  });

  it("runs a session's pooled python in an interpreter started after its previous run: a fresh process, what the session installed meanwhile seen", async () => {
    const s = await engine.createSession();
    /** Whether this run's interpreter is the one started ahead (its program holds `_seen = _site()`), its pid. */
    const probe =
      "import os\nprint(b'_seen = _site()' in open('/proc/self/cmdline', 'rb').read(), os.getpid())";
    // The session's first two runs start their own; from its second on, the runner keeps the next one started.
    const first = await run(s, 'pooled', 'python', probe);
    expect(first).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    expect(first.stdout).toMatch(/^False \d+\n$/);
    const second = await run(s, 'pooled', 'python', probe);
    expect(second.stdout).toMatch(/^False \d+\n$/);
    const third = await run(s, 'pooled', 'python', probe);
    expect(third.stdout).toMatch(/^True \d+\n$/);
    expect(third.stdout.split(' ')[1]).not.toBe(second.stdout.split(' ')[1]);
    // A package written into the session's user site by another tier (a `pip install --user` would): the next pooled
    // python imports it, with the user site ahead of the system's packages, as a python started now would.
    const site = await run(s, 'pooled', 'python', 'import site\nprint(site.getusersitepackages())');
    const userSite = site.stdout.trim();
    const made = await run(
      s,
      'container',
      'bash',
      `mkdir -p ${userSite}/extra && echo 'VALUE = "installed"' > ${userSite}/installed_mod.py && ` +
        `echo 'VALUE = "via pth"' > ${userSite}/extra/pth_mod.py && echo ${userSite}/extra > ${userSite}/extra.pth`,
    );
    expect(made).toMatchObject({ status: 'succeeded' });
    const imported = await run(
      s,
      'pooled',
      'python',
      'import installed_mod, pth_mod, sys\n' +
        `print(installed_mod.VALUE, pth_mod.VALUE, sys.path.index('${userSite}') < sys.path.index('/usr/lib/python3/dist-packages'))`,
    );
    expect(imported).toMatchObject({ status: 'succeeded', stdout: 'installed via pth True\n' });
    await engine.request('DELETE', `/v1/sessions/${s}`);
  });

  it('keeps a session pooled state between actions, and never shows it to another session', async () => {
    await run(a, 'pooled', 'bash', 'echo secret-a > /tmp/state.txt; sleep 30 &');
    const again = await run(a, 'pooled', 'bash', 'cat /tmp/state.txt');
    expect(again.stdout).toBe('secret-a\n');
    const other = await run(b, 'pooled', 'bash', 'cat /tmp/state.txt 2>&1; ls /workspace; ps -eo args');
    expect(other.stdout).not.toContain('secret-a');
    expect(other.stdout).not.toContain('from-api.txt');
    expect(other.stdout).not.toContain('sleep 30');
    const inA = await run(a, 'pooled', 'bash', 'true');
    const inB = await run(b, 'pooled', 'bash', 'true');
    expect(await sandboxOf(a, inA.id)).not.toBe(await sandboxOf(b, inB.id));
  });

  it.each(['pooled', 'container'])(
    '%s: no capabilities, no new privileges, seccomp, non-root, no Docker socket',
    async (tier) => {
      // `mount`, `unshare` and naming docker.sock score as privilege escalation (high risk), which the policy keeps
      // out of the pooled tier: the socket is looked for by listing the run directories instead.
      const escalation =
        tier === 'container'
          ? '; mount -t tmpfs x /mnt 2>&1 || echo mount-failed; unshare -r true 2>&1 || echo unshare-failed'
          : '';
      const r = await run(
        a,
        tier,
        'bash',
        `grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status; setpriv -d | grep no_new_privs; id -u; ` +
          `ls -a /var/run/ /run/ 2>&1${escalation}`,
      );
      expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
      // The kernel's own answer (prctl PR_GET_NO_NEW_PRIVS); gVisor's /proc/self/status has no NoNewPrivs line.
      expect(r.stdout).toMatch(/no_new_privs:\s+1/);
      if (tier === 'pooled' || oneOffRuntime !== 'runsc') expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
      expect(r.stdout).toMatch(/Seccomp:\s+2/);
      expect(r.stdout).toMatch(/^10001$/m);
      expect(r.stdout).not.toContain('docker.sock');
      if (tier === 'container') {
        expect(r.stdout).toContain('mount-failed');
        expect(r.stdout).toContain('unshare-failed');
      }
    },
  );

  it('container: clone3 cannot make a namespace (it answers ENOSYS, so glibc uses clone), and threads start', async () => {
    // clone3 takes its flags in memory, where no seccomp rule can look: on Docker the one-off's profile answers it
    // ENOSYS, on runc (Docker's default profile) and on gVisor (gvisor.ts, GvisorSeccompProbe) alike.
    const r = await run(
      a,
      'container',
      'python',
      [
        'import ctypes, os, struct, threading',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'args = struct.pack("11Q", 0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)  # CLONE_NEWUSER, SIGCHLD',
        'pid = libc.syscall(435, ctypes.create_string_buffer(args), len(args))',
        'if pid == 0:',
        '    os._exit(0)',
        'print("clone3:", "made a user namespace" if pid > 0 else os.strerror(ctypes.get_errno()))',
        'threading.Thread(target=lambda: print("thread started")).start()',
      ].join('\n'),
    );
    if (backend.name === 'docker') expect(r.stdout).toContain('clone3: Function not implemented');
    else expect(r.stdout).toMatch(/^clone3: /m);
    expect(r.stdout).toContain('thread started');
  });

  it.each(['pooled', 'container'])('%s: no network', async (tier) => {
    const r = await run(
      a,
      tier,
      'python',
      'import socket\ntry:\n    socket.create_connection(("127.0.0.1", 80), timeout=1)\n    print("connected")\nexcept OSError as e:\n    print("refused", type(e).__name__)',
    );
    expect(r.stdout).toMatch(/^refused/);
  });

  it('records the container each action ran in: a Sandbox node per container, RAN_IN edges', async () => {
    const s = await engine.createSession();
    const p1 = await run(s, 'pooled', 'bash', 'true');
    const p2 = await run(s, 'pooled', 'bash', 'true');
    const one = await run(s, 'container', 'bash', 'true');
    const sub = await run(s, 'subprocess', 'bash', 'true');

    const graph = (await engine.request('GET', `/v1/sessions/${s}/graph`)).body;
    const sandboxes = graph.nodes.filter((n: any) => n.label === 'Sandbox');
    expect(sandboxes).toHaveLength(2);
    const pooledNode = sandboxes.find((n: any) => n.properties.tier === 'pooled');
    const oneOffNode = sandboxes.find((n: any) => n.properties.tier === 'container');
    expect(await backend.exists(pooledNode.properties.containerId)).toBe(true);
    // The one-off sandbox is gone (or, a pod, on its way out) once its action ended.
    expect(await backend.sandboxesWith({ action: one.id })).toEqual([]);
    const ranIn = graph.edges
      .filter((e: any) => e.type === 'RAN_IN')
      .map((e: any) => `${e.from}->${e.to}`)
      .sort();
    const expected = [
      `${p1.id}->${pooledNode.id}`,
      `${p2.id}->${pooledNode.id}`,
      `${one.id}->${oneOffNode.id}`,
    ];
    // Kubernetes: the subprocess-tier request ran in the session's pod, and says so.
    if (backend.name === 'kubernetes') expected.push(`${sub.id}->${pooledNode.id}`);
    else expect(ranIn.some((e: string) => e.startsWith(sub.id))).toBe(false);
    expect(ranIn).toEqual(expected.sort());
    const view = (await engine.request('GET', `/v1/sessions/${s}/actions/${one.id}`)).body;
    expect(view.sandbox).toEqual({
      tier: 'container',
      containerId: oneOffNode.properties.containerId,
      runtime: oneOffRuntime,
    });
  });

  it('lists the files code created, modified and deleted, in subdirectories too, up to the snapshot bound', async () => {
    /** The files an action wrote, as recorded (on Kubernetes the session pod's runner walks the workspace). */
    const filesOf = async (sid: string, r: any) => {
      expect(r).toMatchObject({ status: 'succeeded' });
      expect(r.hints).toBeUndefined(); // the workspace was read before and after
      const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`)).body;
      return view.files.map((f: any) => `${f.access} ${f.path}`);
    };
    const s = await engine.createSession();
    const setUp =
      'mkdir -p src/deep && echo one > edit.txt && echo x > src/deep/gone.py && echo same > keep.txt';
    expect(await filesOf(s, await run(s, 'pooled', 'bash', setUp))).toEqual([
      'write edit.txt',
      'write keep.txt',
      'write src/deep/gone.py',
    ]);
    const change =
      'echo two >> edit.txt && rm src/deep/gone.py && mkdir -p out/sub && echo a > out/sub/new.csv';
    expect(await filesOf(s, await run(s, 'pooled', 'bash', change))).toEqual([
      'write edit.txt',
      'write out/sub/new.csv',
      'write src/deep/gone.py',
    ]);
    // The one-off tier's changes come back into the workspace; a kernel cell's are found the same way. On Kubernetes
    // the copy back replaces the session pod's workspace with the one-off pod's (new inodes), so every file it holds
    // reads as written: the list holds the changes and the files they were copied back with.
    const oneOff = await filesOf(s, await run(s, 'container', 'bash', 'echo 3 >> edit.txt && rm keep.txt'));
    expect(oneOff).toEqual(
      backend.name === 'kubernetes'
        ? ['write edit.txt', 'write keep.txt', 'write out/sub/new.csv']
        : ['write edit.txt', 'write keep.txt'],
    );
    const cell = await engine.action(s, {
      type: 'code',
      language: 'python',
      state: 'session',
      tier: 'pooled',
      code: "import os\nos.makedirs('k/l', exist_ok=True)\nopen('k/l/cell.txt', 'w').write('c')",
    });
    expect(await filesOf(s, cell)).toContain('write k/l/cell.txt');
    expect(await filesOf(s, await run(s, 'pooled', 'bash', 'cat edit.txt'))).toEqual([]);

    // At most 10 000 files and links per snapshot (the host walk's bound, in the pod too): past it, only what both
    // snapshots cover is compared, so a change after the bound in walk order is not listed.
    const t = await engine.createSession();
    const many = 'echo one > a.txt && mkdir many && cd many && for i in $(seq -w 1 10050); do : > f$i; done';
    const wrote = await filesOf(t, await run(t, 'pooled', 'bash', many));
    expect(wrote).toHaveLength(10_000);
    expect(wrote.slice(0, 3)).toEqual(['write a.txt', 'write many/f00001', 'write many/f00002']);
    expect(wrote.at(-1)).toBe('write many/f09999');
    expect(
      await filesOf(t, await run(t, 'pooled', 'bash', 'echo two >> a.txt && echo late > zz.txt')),
    ).toEqual(['write a.txt']);
  });

  it('keeps everything a session makes in its one workspace: files, code, kernels, processes, browser artifacts, checkpoints', async () => {
    const s = await engine.createSession();
    const ok = (r: any) => expect(r).toMatchObject({ status: 'succeeded' });
    ok(
      await engine.action(s, { type: 'file', op: 'write', path: 'site/index.html', content: '<h1>hi</h1>' }),
    );
    // A kernel and a background server, both in the session's stateful sandbox, serving the workspace.
    ok(
      await engine.action(s, {
        type: 'code',
        language: 'python',
        state: 'session',
        tier: 'pooled',
        code: 'n = 41',
      }),
    );
    const cell = await engine.action(s, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'n + 1',
    });
    expect(cell).toMatchObject({ status: 'succeeded', tier: 'pooled', output: { result: '42' } });
    const started = await engine.action(s, {
      type: 'process',
      op: 'start',
      command: 'python3 -m http.server 8765',
      cwd: 'site',
      tier: 'pooled',
    });
    expect(started).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    const fetched = await engine.action(s, {
      type: 'code',
      language: 'bash',
      state: 'session',
      tier: 'pooled',
      code: 'for i in $(seq 50); do curl -sf localhost:8765/ && break; sleep 0.1; done',
    });
    expect(fetched.stdout).toBe('<h1>hi</h1>');
    ok(await engine.action(s, { type: 'process', op: 'stop', processId: started.output.processId }));

    // A browser screenshot is an artifact of the workspace, readable by code and the file API.
    const shot = await engine.action(s, { type: 'browser', op: 'screenshot', path: 'shots/blank.png' });
    expect(shot).toMatchObject({ status: 'succeeded', output: { artifacts: [{ path: 'shots/blank.png' }] } });
    const png = await run(s, 'pooled', 'bash', 'head -c 4 shots/blank.png | od -An -c | tr -d " "');
    expect(png.stdout.trim()).toBe('211PNG');
    expect(await engine.action(s, { type: 'file', op: 'stat', path: 'shots/blank.png' })).toMatchObject({
      output: { size: shot.output.artifacts[0].bytes },
    });

    // A checkpoint, a bad step, a restore; a fork starts from the checkpoint in a sandbox of its own.
    const cp = await engine.request('POST', `/v1/sessions/${s}/checkpoints`, { label: 'before' });
    expect(cp.status).toBe(201);
    expect(cp.body.files).toBeGreaterThanOrEqual(2);
    await run(s, 'container', 'bash', 'rm -rf site; echo broken > notes.txt');
    expect(
      (await engine.action(s, { type: 'file', op: 'list', path: '.' })).output.entries.map(
        (e: any) => e.path,
      ),
    ).toEqual(expect.arrayContaining(['notes.txt']));
    const diff = (await engine.request('GET', `/v1/sessions/${s}/checkpoints/${cp.body.id}/diff`)).body;
    expect(diff.added.map((e: any) => e.path)).toContain('notes.txt');
    expect(diff.removed.map((e: any) => e.path)).toContain('site/index.html');
    const restored = await engine.request('POST', `/v1/sessions/${s}/checkpoints/${cp.body.id}/restore`);
    expect(restored.status).toBe(200);
    const after = await run(s, 'pooled', 'bash', 'cat site/index.html; ls notes.txt 2>&1 >/dev/null | wc -l');
    expect(after.stdout).toBe('<h1>hi</h1>1\n');
    const fork = await engine.request('POST', `/v1/sessions/${s}/fork`, { checkpointId: cp.body.id });
    expect(fork.status).toBe(201);
    const inFork = await run(fork.body.id, 'pooled', 'bash', 'cat site/index.html');
    expect(inFork.stdout).toBe('<h1>hi</h1>');
    expect(await sandboxOf(fork.body.id, inFork.id)).not.toBe(await sandboxOf(s, after.id));
  });

  it("runs a template session's code in the template's image with its env, in both tiers", async () => {
    const created = await engine.request('POST', '/v1/sessions', { template: 'greeter' });
    expect(created.status).toBe(201);
    const s = created.body.id;
    for (const tier of ['pooled', 'container']) {
      const r = await run(s, tier, 'bash', 'echo "$GREETING"');
      expect(r).toMatchObject({ status: 'succeeded', tier, stdout: 'from-template\n' });
    }
  });

  it('runs a skill (the example file-report) whose calls come back into the session', async () => {
    const s = await engine.createSession();
    await engine.action(s, { type: 'file', op: 'write', path: 'a.txt', content: 'one two three' });
    const r = await engine.action(s, { type: 'skill', name: 'file-report', input: {} });
    expect(r).toMatchObject({ status: 'succeeded', output: { value: { files: 1, words: 3 } } });
    const report = await engine.action(s, { type: 'file', op: 'read', path: r.output.value.report });
    expect(report.output.content).toContain('| a.txt | 1 | 3 |');
  });

  it('a burst of new sessions grows the warm pool: the next burst like it claims only warm sandboxes', async () => {
    const N = 4;
    /** The warm pool as /health reports it (Docker: `pool`, Kubernetes: `warm`). */
    const pool = async () => {
      const details = (await engine.request('GET', '/health')).body.tiers.pooled.details;
      const p = details.pool ?? details.warm;
      return { idle: p.available ?? p.warm, min: p.min, target: p.target, warmClaims: p.warmClaims };
    };
    const burst = async () => {
      const sids = await Promise.all(
        Array.from({ length: N }, async () => {
          const sid = await engine.createSession();
          expect(await run(sid, 'pooled', 'python', 'print(1)')).toMatchObject({
            status: 'succeeded',
            stdout: '1\n',
          });
          return sid;
        }),
      );
      for (const sid of sids)
        expect((await engine.request('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
    };
    await burst();
    // The pool now holds its floor plus the burst (for SWITCHYARD_POOL_DEMAND_WINDOW_MS), once the starts are done.
    const grown = async () => {
      const p = await pool();
      return p.target >= p.min + N && p.idle >= p.target;
    };
    expect(await eventually(grown, 45_000, 200)).toBe(true);
    const before = (await pool()).warmClaims;
    await burst();
    expect((await pool()).warmClaims - before).toBe(N);
  });

  it('deleting a session destroys its pooled sandbox', async () => {
    const s = await engine.createSession();
    const id = await sandboxOf(s, (await run(s, 'pooled', 'bash', 'true')).id);
    expect(await backend.exists(id)).toBe(true);
    expect((await engine.request('DELETE', `/v1/sessions/${s}`)).status).toBe(204);
    await engine.tornDown();
    if (backend.name === 'docker') {
      expect(await backend.exists(id)).toBe(false);
    } else {
      // A pod is deleted with a grace period: gone, or on its way out (left out of sandboxesWith).
      expect(await backend.sandboxesWith({ session: s })).toEqual([]);
      expect((await backend.sandboxesWith({})).map((p) => p.id)).not.toContain(id);
    }
  });
});
