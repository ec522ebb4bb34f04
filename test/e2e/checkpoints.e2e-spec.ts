import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { tierRows } from '../support/sandbox-backends';

/** Prints the workspace as a checkpoint must keep it: every entry's type, mode, size, mtime, contents' hash, link. */
const LIST_TREE = `
import hashlib, json, os, stat
out = {}
for root, dirs, files in os.walk('.'):
    dirs.sort()
    for name in sorted(dirs + files):
        p = os.path.join(root, name)[2:]
        st = os.lstat(p)
        e = {'mode': oct(stat.S_IMODE(st.st_mode)), 'mtime': st.st_mtime_ns}
        if stat.S_ISLNK(st.st_mode):
            e = {'link': os.readlink(p)}
        elif stat.S_ISDIR(st.st_mode):
            e['type'] = 'dir'
        else:
            e['size'] = st.st_size
            e['sha'] = hashlib.sha256(open(p, 'rb').read()).hexdigest()[:16]
        out[p] = e
print(json.dumps(out, sort_keys=True))
`;
import { fieldsOf } from '../support/error-body';

/** A project the way an agent leaves one: nested files, an executable, a private directory, links in and out. */
const BUILD = `
set -e
mkdir -p src/pkg data/raw private
printf 'print("v1")\\n' > src/app.py
printf '' > src/pkg/__init__.py
printf '#!/bin/sh\\necho run\\n' > run.sh && chmod 750 run.sh
head -c 100000 /dev/urandom > data/raw/blob.bin
printf 'secret' > private/token && chmod 600 private/token && chmod 700 private
ln -s src/app.py app
ln -s ../outside up
`;

/** What a failed action leaves behind: a half-written file, a deleted directory, new files, changed modes. */
const DAMAGE = `
printf 'print("v2' > src/app.py
rm -rf src/pkg data
mkdir -p build/out && printf x > build/out/a.o
chmod 777 run.sh
rm app && ln -s /etc/passwd app
printf junk > new.txt
`;

/** Each tier on each backend under test (on Kubernetes the workspace is the session pod's: no subprocess tier there). */
const ROWS = tierRows(['subprocess', 'pooled', 'container'], ['pooled', 'container']);

describe('checkpoints, restore and fork through the API', () => {
  let engine: EngineHarness;
  /** The engine of the row under test: the Docker one, or one on the other backend for its rows. */
  let target: EngineHarness;
  const settings = {
    SWITCHYARD_POOL_MIN: '1',
    SWITCHYARD_MAX_CHECKPOINTS: '5',
    SWITCHYARD_CHECKPOINT_KEEP_AUTO: '2',
  };
  beforeAll(async () => {
    engine = await EngineHarness.start(settings);
    target = engine;
  });
  afterAll(() => engine.stop());

  const code = (sid: string, language: string, source: string, extra: Record<string, unknown> = {}) =>
    target.action(sid, { type: 'code', language, code: source, timeoutMs: 30_000, ...extra });
  const checkpoint = (sid: string, body: Record<string, unknown> = {}) =>
    target.request('POST', `/v1/sessions/${sid}/checkpoints`, body);
  const restore = (sid: string, id: string) =>
    target.request('POST', `/v1/sessions/${sid}/checkpoints/${id}/restore`);

  describe.each(ROWS)('in the %s tier', (_row, tier, backend) => {
    let rowEngine: EngineHarness | undefined;
    beforeAll(async () => {
      if (backend) rowEngine = await EngineHarness.start({ ...(await backend.env()), ...settings });
      target = rowEngine ?? engine;
    });
    afterAll(async () => {
      target = engine;
      await rowEngine?.stop();
    });

    const tree = async (sid: string): Promise<Record<string, unknown>> => {
      const r = await code(sid, 'python', LIST_TREE, { tier });
      expect(r).toMatchObject({ status: 'succeeded', tier });
      return JSON.parse(r.stdout) as Record<string, unknown>;
    };

    it('puts back the exact tree: files, directories, modes, links, times', async () => {
      const sid = await target.createSession();
      expect(await code(sid, 'bash', BUILD, { tier })).toMatchObject({ status: 'succeeded', tier });
      const before = await tree(sid);
      expect(Object.keys(before)).toEqual(
        expect.arrayContaining([
          'app',
          'up',
          'run.sh',
          'private/token',
          'data/raw/blob.bin',
          'src/pkg/__init__.py',
        ]),
      );
      const taken = await checkpoint(sid, { label: 'clean' });
      expect(taken.status).toBe(201);
      expect(taken.body).toMatchObject({
        id: expect.stringMatching(/^chk_/),
        label: 'clean',
        files: 7,
        auto: false,
      });
      expect(taken.body.bytes).toBe(12 + 0 + 19 + 100_000 + 6);

      expect(await code(sid, 'bash', DAMAGE, { tier })).toMatchObject({ status: 'succeeded' });
      expect(await tree(sid)).not.toEqual(before);
      const restored = await restore(sid, taken.body.id);
      expect(restored.status).toBe(200);
      expect(restored.body).toMatchObject({
        checkpoint: { id: taken.body.id },
        restored: { checkpointId: taken.body.id, removed: expect.any(Number) },
        running: { kernels: [], processes: [] },
      });
      expect(restored.body.note).toBeUndefined();
      expect(await tree(sid)).toEqual(before);
    });
  });

  it('checkpoint, restore and fork keep the same entries: files, directories, every symlink as a link; never fifos or sockets', async () => {
    // A fifo and a Unix socket are not data: a checkpoint does not count them, a restore does not bring them
    // back, and a fork (now or at a checkpoint) does not copy them either. Links, in or out, are kept as links.
    const SPECIALS =
      'import os, stat\nos.mkfifo("pipe")\nos.mkfifo("sub/pipe2")\n' +
      'os.mknod("sock", stat.S_IFSOCK | 0o600)\nprint("made")';
    const ENTRIES =
      'import os, stat, json\nout = {}\nfor root, dirs, files in os.walk("."):\n' +
      '    for n in dirs + files:\n        p = os.path.join(root, n)[2:]\n        m = os.lstat(p).st_mode\n' +
      '        out[p] = "link:" + os.readlink(p) if stat.S_ISLNK(m) else "dir" if stat.S_ISDIR(m) else ' +
      '"file" if stat.S_ISREG(m) else "fifo" if stat.S_ISFIFO(m) else "sock" if stat.S_ISSOCK(m) else "other"\n' +
      'print(json.dumps(out, sort_keys=True))';
    const entries = async (sid: string) => {
      const r = await code(sid, 'python', ENTRIES);
      expect(r).toMatchObject({ status: 'succeeded' });
      return JSON.parse(r.stdout) as Record<string, string>;
    };
    // Every workspace holds the session's home (HOME, `.home`) beside the session's files.
    const kept = {
      '.home': 'dir',
      'a.txt': 'file',
      sub: 'dir',
      'sub/b.txt': 'file',
      in: 'link:sub/b.txt',
      out: 'link:/etc/hostname',
      up: 'link:../outside',
    };
    const sid = await engine.createSession();
    const made = await code(
      sid,
      'bash',
      'mkdir sub && printf a > a.txt && printf b > sub/b.txt && ln -s sub/b.txt in && ln -s /etc/hostname out && ' +
        'ln -s ../outside up',
    );
    expect(made).toMatchObject({ status: 'succeeded' });
    expect(await code(sid, 'python', SPECIALS)).toMatchObject({ status: 'succeeded', stdout: 'made\n' });
    expect(await entries(sid)).toEqual({ ...kept, pipe: 'fifo', 'sub/pipe2': 'fifo', sock: 'sock' });

    const taken = await checkpoint(sid);
    expect(taken.status).toBe(201);
    // Two files and three links; the fifos and the socket are not in the checkpoint, so not in its counts.
    expect(taken.body).toMatchObject({ files: 5, directories: 2, bytes: 2 });

    // Fork now and at the checkpoint: the same entries as the checkpoint keeps.
    const now = await engine.request('POST', `/v1/sessions/${sid}/fork`, {});
    const past = await engine.request('POST', `/v1/sessions/${sid}/fork`, { checkpointId: taken.body.id });
    expect([now.status, past.status]).toEqual([201, 201]);
    expect(await entries(now.body.id)).toEqual(kept);
    expect(await entries(past.body.id)).toEqual(kept);

    // Restore over an emptied workspace: the same again.
    expect(await code(sid, 'bash', 'rm -rf ./* && ls -A')).toMatchObject({ stdout: '.home\n' });
    const restored = await restore(sid, taken.body.id);
    expect(restored.status).toBe(200);
    expect(await entries(sid)).toEqual(kept);
    // A diff against the workspace with a fifo made since: nothing to say (a fifo is not data either way).
    expect(await code(sid, 'bash', 'mkfifo late')).toMatchObject({ status: 'succeeded' });
    const diff = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${taken.body.id}/diff`)).body;
    expect(diff).toMatchObject({ added: [], removed: [], modified: [] });
  });

  it('refuses a restore while an action of the session runs (409), then restores once it is cancelled', async () => {
    const sid = await engine.createSession();
    const taken = (await checkpoint(sid)).body;
    const slow = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'echo half > half.txt; sleep 30',
      wait: false,
    });
    expect(slow.status).toBe(202);
    const refused = await restore(sid, taken.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: 'ACTIONS_RUNNING',
      message: expect.stringContaining('cancel'),
    });
    await engine.request('POST', `/v1/sessions/${sid}/actions/${slow.body.id}/cancel`);
    expect((await restore(sid, taken.id)).status).toBe(200);
    expect(existsSync(path.join(engine.workspaceOf(sid), 'half.txt'))).toBe(false);
  });

  it('says so when kernels and background processes keep running through a restore', async () => {
    const sid = await engine.createSession();
    await code(sid, 'python', 'x = 1', { state: 'session' });
    const started = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: 'sleep 60',
      name: 'sleeper',
    });
    expect(started.status).toBe('succeeded');
    const taken = (await checkpoint(sid)).body;
    const res = await restore(sid, taken.id);
    expect(res.status).toBe(200);
    expect(res.body.running.kernels).toHaveLength(1);
    expect(res.body.running.processes).toEqual([started.output.processId]);
    expect(res.body.note).toMatch(/1 kernel\(s\) and 1 background process\(es\) kept running/);
    await engine.request('DELETE', `/v1/sessions/${sid}`);
  });

  it('undoes a half-written failure: a retry with restore: true starts from the tree before the original', async () => {
    const sid = await engine.createSession();
    await code(sid, 'bash', 'mkdir -p out && echo keep > out/keep.txt');
    const failed = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code:
        'import os\nos.remove("out/keep.txt")\nopen("out/partial.csv", "w").write("a,b\\n1,")\n' +
        'raise SystemExit("disk exploded halfway")',
      checkpoint: 'before',
    });
    expect(failed).toMatchObject({ status: 'failed', checkpoint: { id: expect.stringMatching(/^chk_/) } });
    // The graph keeps the action's input without the steering field; the failure context names the checkpoint.
    const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${failed.id}`)).body;
    expect(view.input).not.toHaveProperty('checkpoint');
    const context = (await engine.request('GET', `/v1/sessions/${sid}/actions/${failed.id}/context`)).body;
    expect(context.checkpoint).toMatchObject({ id: failed.checkpoint.id, auto: true });

    const retried = await engine.request('POST', `/v1/sessions/${sid}/actions/${failed.id}/retry`, {
      restore: true,
      reason: 'start clean',
      action: {
        type: 'code',
        language: 'bash',
        code: 'test -f out/keep.txt && test ! -e out/partial.csv && echo clean',
      },
    });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({
      status: 'succeeded',
      stdout: 'clean\n',
      restored: { checkpointId: failed.checkpoint.id },
    });
    // A retry of that retry still finds the checkpoint, back along the chain.
    const again = await engine.request('POST', `/v1/sessions/${sid}/actions/${retried.body.id}/retry`, {
      restore: true,
    });
    expect(again.body).toMatchObject({
      status: 'succeeded',
      restored: { checkpointId: failed.checkpoint.id },
    });

    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const node = `checkpoint:${failed.checkpoint.id}`;
    expect(graph.nodes).toContainEqual(expect.objectContaining({ id: node, label: 'Checkpoint' }));
    expect(graph.edges).toContainEqual(
      expect.objectContaining({ type: 'HAS_CHECKPOINT', from: sid, to: node }),
    );
    expect(graph.edges).toContainEqual(
      expect.objectContaining({ type: 'BEFORE', from: node, to: failed.id }),
    );
    expect(graph.edges).toContainEqual(
      expect.objectContaining({ type: 'RESTORED', from: retried.body.id, to: node }),
    );

    // No checkpoint to go back to: a clear 409 that says how to get one.
    const plain = await engine.action(sid, { type: 'code', language: 'bash', code: 'exit 3' });
    const none = await engine.request('POST', `/v1/sessions/${sid}/actions/${plain.id}/retry`, {
      restore: true,
    });
    expect(none.status).toBe(409);
    expect(none.body.error).toMatchObject({
      code: 'NO_CHECKPOINT',
      message: expect.stringContaining('"checkpoint": "before"'),
    });
  });

  it('forks at now and at a checkpoint: isolated both ways, lineage followed across', async () => {
    const sid = await engine.createSession({ metadata: { run: 'source' } });
    await engine.action(sid, { type: 'file', op: 'write', path: 'notes.md', content: 'v1' });
    const at = (await checkpoint(sid)).body;
    await engine.action(sid, { type: 'file', op: 'write', path: 'notes.md', content: 'v2' });

    const now = await engine.request('POST', `/v1/sessions/${sid}/fork`, {});
    const past = await engine.request('POST', `/v1/sessions/${sid}/fork`, { checkpointId: at.id });
    expect(now.status).toBe(201);
    expect(now.body).toMatchObject({ metadata: { run: 'source' }, forkedFrom: { sessionId: sid } });
    expect(past.body.forkedFrom).toEqual({ sessionId: sid, checkpointId: at.id });
    const read = async (s: string) =>
      (await engine.action(s, { type: 'file', op: 'read', path: 'notes.md' })).output.content;
    expect(await read(now.body.id)).toBe('v2');
    expect(await read(past.body.id)).toBe('v1');

    await engine.action(now.body.id, { type: 'file', op: 'write', path: 'notes.md', content: 'fork' });
    await engine.action(sid, { type: 'file', op: 'write', path: 'only-source.txt', content: 's' });
    expect(await read(sid)).toBe('v2');
    expect(await read(now.body.id)).toBe('fork');
    const forkFiles = await engine.action(now.body.id, { type: 'file', op: 'list', path: '.' });
    expect(forkFiles.output.entries.map((e: any) => e.name)).not.toContain('only-source.txt');
    expect((await engine.request('GET', `/v1/sessions/${now.body.id}/checkpoints`)).body.checkpoints).toEqual(
      [],
    );
    // Code in the fork sees the copy too.
    expect((await code(now.body.id, 'bash', 'cat notes.md')).stdout).toBe('fork');

    const lineage = (await engine.request('GET', `/v1/sessions/${now.body.id}/files/lineage?path=notes.md`))
      .body;
    // The source's two writes up to the fork, then the fork's own reads and write (the source's later read is not).
    expect(lineage.entries.map((e: any) => e.sessionId)).toEqual([
      sid,
      sid,
      now.body.id,
      now.body.id,
      now.body.id,
    ]);
    expect(lineage.entries.map((e: any) => e.access)).toEqual([
      ['write'],
      ['write'],
      ['read'],
      ['write'],
      ['read'],
    ]);
    const graph = (await engine.request('GET', `/v1/sessions/${past.body.id}/graph`)).body;
    expect(graph.edges).toContainEqual(
      expect.objectContaining({
        type: 'FORKED_FROM',
        from: past.body.id,
        to: sid,
        properties: expect.objectContaining({ checkpointId: at.id }),
      }),
    );
    const unknown = await engine.request('POST', `/v1/sessions/${sid}/fork`, { checkpointId: 'chk_nope' });
    expect(unknown.status).toBe(404);
  });

  it('lists, gets, deletes and diffs; bad ids and bad input are clear 4xx', async () => {
    const sid = await engine.createSession();
    await engine.action(sid, { type: 'file', op: 'write', path: 'a.txt', content: 'one\ntwo\n' });
    const first = (await checkpoint(sid, { label: 'first' })).body;
    await engine.action(sid, { type: 'file', op: 'write', path: 'a.txt', content: 'one\nthree\n' });
    await engine.action(sid, { type: 'file', op: 'write', path: 'b.bin', content: 'xyz' });
    const second = (await checkpoint(sid)).body;

    const list = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints`)).body.checkpoints;
    expect(list.map((c: any) => c.id)).toEqual([first.id, second.id]);
    expect((await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${first.id}`)).body).toEqual(first);

    const diff = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${first.id}/diff`)).body;
    expect(diff).toMatchObject({ from: first.id, to: 'current', truncated: false, removed: [] });
    expect(diff.added).toEqual([{ path: 'b.bin', type: 'file', size: 3 }]);
    // Not text: no diff, and the reason.
    await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: 'open("a.txt", "ab").write(bytes([0, 255]))',
    });
    const binary = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${second.id}/diff`)).body;
    expect(binary.modified).toEqual([
      { path: 'a.txt', type: 'file', sizeBefore: 10, sizeAfter: 12, diffOmitted: 'binary' },
    ]);
    expect(diff.modified).toEqual([
      {
        path: 'a.txt',
        type: 'file',
        sizeBefore: 8,
        sizeAfter: 10,
        diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+three\n',
      },
    ]);
    const between = await engine.request(
      'GET',
      `/v1/sessions/${sid}/checkpoints/${first.id}/diff?to=${second.id}`,
    );
    expect(between.body.added.map((e: any) => e.path)).toEqual(['b.bin']);

    const badTo = await engine.request(
      'GET',
      `/v1/sessions/${sid}/checkpoints/${first.id}/diff?to=yesterday`,
    );
    expect(badTo.status).toBe(400);
    expect(fieldsOf(badTo.body)).toContain('to');
    const badLabel = await checkpoint(sid, { label: 7 });
    expect(badLabel.status).toBe(400);
    expect(JSON.stringify(badLabel.body)).toContain('label');
    // A well-formed id of no checkpoint: the real one with its last digit changed (to another digit, always).
    const unknown = first.id.slice(0, -1) + (first.id.endsWith('0') ? '1' : '0');
    for (const id of ['chk_0000', '..%2F..%2Fetc', unknown]) {
      expect((await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${id}`)).status).toBe(404);
      expect((await restore(sid, id)).status).toBe(404);
    }
    expect((await engine.request('DELETE', `/v1/sessions/${sid}/checkpoints/${first.id}`)).status).toBe(204);
    expect((await engine.request('GET', `/v1/sessions/${sid}/checkpoints/${first.id}`)).status).toBe(404);
    // The graph keeps it, marked deleted.
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const node = graph.nodes.find((n: any) => n.id === `checkpoint:${first.id}`);
    expect(node.properties).toMatchObject({ deleteReason: 'deleted', deletedAt: expect.any(String) });
    // Another tenant's session (or an unknown one) is a 404 like any.
    expect((await engine.request('POST', '/v1/sessions/ses_nope/checkpoints', {})).status).toBe(404);
  });

  it('holds the limit (409 naming the setting) and prunes automatic checkpoints to the keep count', async () => {
    const sid = await engine.createSession();
    const auto: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await engine.action(sid, {
        type: 'file',
        op: 'write',
        path: `f${i}`,
        content: `${i}`,
        checkpoint: 'before',
      });
      auto.push(r.checkpoint.id);
    }
    let ids = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints`)).body.checkpoints.map(
      (c: any) => c.id,
    );
    expect(ids).toEqual(auto.slice(1)); // SWITCHYARD_CHECKPOINT_KEEP_AUTO=2
    for (let i = 0; i < 3; i++) expect((await checkpoint(sid)).status).toBe(201);
    const over = await checkpoint(sid);
    expect(over.status).toBe(409);
    expect(over.body.error).toMatchObject({
      code: 'CHECKPOINT_LIMIT',
      message: expect.stringContaining('SWITCHYARD_MAX_CHECKPOINTS'),
    });
    // An automatic one at the limit replaces the oldest automatic one instead.
    const next = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'g',
      content: 'g',
      checkpoint: 'before',
    });
    expect(next.status).toBe('succeeded');
    ids = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints`)).body.checkpoints.map(
      (c: any) => c.id,
    );
    expect(ids).toHaveLength(5);
    expect(ids).not.toContain(auto[1]);
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const pruned = graph.nodes.find((n: any) => n.id === `checkpoint:${auto[0]}`);
    expect(pruned.properties.deleteReason).toBe('pruned');
    const bad = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'file',
      op: 'read',
      path: 'g',
      checkpoint: 'after',
    });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.body)).toEqual(['checkpoint']);
  });

  it('checkpoints each step of a plan, and a replan restores to a step', async () => {
    const sid = await engine.createSession();
    const plan = await engine.request('POST', `/v1/sessions/${sid}/plans`, {
      checkpoints: 'each-step',
      wait: true,
      steps: [
        { id: 'setup', action: { type: 'file', op: 'write', path: 'config.json', content: '{"ok":true}' } },
        {
          id: 'migrate',
          dependsOn: ['setup'],
          action: { type: 'code', language: 'bash', code: 'rm config.json; echo broken > state.db; exit 1' },
        },
      ],
    });
    expect(plan.body.status).toBe('needs_replan');
    const steps = Object.fromEntries(plan.body.steps.map((s: any) => [s.id, s]));
    expect(steps.setup.attempts[0].checkpointId).toMatch(/^chk_/);
    expect(steps.migrate.attempts[0].checkpointId).toMatch(/^chk_/);
    expect(plan.body.failureContext.checkpointId).toBe(steps.migrate.attempts[0].checkpointId);

    const replanned = await engine.request('POST', `/v1/sessions/${sid}/plans/${plan.body.id}/replan`, {
      restoreTo: 'migrate',
      wait: true,
      steps: [
        {
          id: 'migrate',
          dependsOn: ['setup'],
          action: {
            type: 'code',
            language: 'bash',
            code: 'test -f config.json && test ! -e state.db && echo ok',
          },
        },
      ],
    });
    expect(replanned.body.status).toBe('succeeded');
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    expect(graph.edges).toContainEqual(
      expect.objectContaining({
        type: 'RESTORED',
        from: sid,
        to: `checkpoint:${steps.migrate.attempts[0].checkpointId}`,
        properties: expect.objectContaining({ planId: plan.body.id }),
      }),
    );
    const noStep = await engine.request('POST', `/v1/sessions/${sid}/plans/${plan.body.id}/replan`, {
      restoreTo: 'nope',
      steps: [{ id: 'x', action: { type: 'file', op: 'read', path: 'config.json' } }],
    });
    expect([400, 409]).toContain(noStep.status);
  });

  it('keeps nothing of a checkpoint after its session ends', async () => {
    const sid = await engine.createSession();
    await checkpoint(sid);
    await engine.request('DELETE', `/v1/sessions/${sid}`);
    await engine.tornDown();
    const images = path.join(engine.dataDir, 'workspaces.images');
    expect(existsSync(path.join(images, `${sid}.img`))).toBe(false);
    expect(existsSync(path.join(images, '.roots', sid))).toBe(false);
    expect(existsSync(path.join(images, '.checkpoints', sid))).toBe(false);
    const mounts = execFileSync('cat', ['/proc/self/mountinfo']).toString();
    expect(mounts).not.toContain(sid);
    expect(readdirSync(path.join(images, '.roots'))).not.toContain(sid);
  });
});
