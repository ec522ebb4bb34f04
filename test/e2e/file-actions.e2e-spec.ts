import { readFileSync, symlinkSync, linkSync, writeFileSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

describe('file actions', () => {
  let engine: EngineHarness;
  let sid: string;
  const file = (body: Record<string, unknown>): Promise<any> => engine.action(sid, { type: 'file', ...body });
  const fileRaw = (body: Record<string, unknown>) =>
    engine.request('POST', `/v1/sessions/${sid}/actions`, { type: 'file', ...body });

  beforeAll(async () => {
    engine = await EngineHarness.start({
      SWITCHYARD_MAX_FILE_BYTES: '65536',
      SWITCHYARD_MAX_WORKSPACE_BYTES: '200000',
    });
    sid = await engine.createSession();
  });
  afterAll(() => engine.stop());

  it('write, read with offset/limit, and the result envelope', async () => {
    const w = await file({ op: 'write', path: 'notes/a.txt', content: 'one\ntwo\nthree\nfour\n' });
    expect(w).toMatchObject({ type: 'file', status: 'succeeded', tier: 'engine', sessionId: sid });
    expect(w.id).toMatch(/^act_/);
    expect(w.risk).toEqual({ score: 0, level: 'low', reasons: [] });
    expect(w.truncated).toEqual({ stdout: false, stderr: false });
    expect(typeof w.durationMs).toBe('number');
    expect(Date.parse(w.startedAt)).toBeLessThanOrEqual(Date.parse(w.endedAt));
    expect(readFileSync(path.join(engine.workspaceOf(sid), 'notes/a.txt'), 'utf8')).toBe(
      'one\ntwo\nthree\nfour\n',
    );

    const r = await file({ op: 'read', path: 'notes/a.txt', offset: 2, limit: 2 });
    expect(r.status).toBe('succeeded');
    expect(r.output.content).toBe('two\nthree\n');
    expect(r.output.totalLines).toBe(4);
  });

  it('write modes: append, create fails when the file exists', async () => {
    await file({ op: 'write', path: 'm.txt', content: 'a' });
    await file({ op: 'write', path: 'm.txt', content: 'b', mode: 'append' });
    expect((await file({ op: 'read', path: 'm.txt' })).output.content).toBe('ab');
    const c = await file({ op: 'write', path: 'm.txt', content: 'c', mode: 'create' });
    expect(c.status).toBe('failed');
    expect(c.error).toMatchObject({ class: 'validation', code: 'EEXIST' });
    expect((await file({ op: 'read', path: 'm.txt' })).output.content).toBe('ab');
  });

  it('edit: exact, not found, ambiguous, all', async () => {
    await file({ op: 'write', path: 'e.py', content: 'x = 1\ny = 1\n' });
    const amb = await file({ op: 'edit', path: 'e.py', find: '= 1', replace: '= 2' });
    expect(amb.status).toBe('failed');
    expect(amb.error.code).toBe('EDIT_AMBIGUOUS');
    const missing = await file({ op: 'edit', path: 'e.py', find: 'zzz', replace: 'q' });
    expect(missing.error.code).toBe('EDIT_NOT_FOUND');
    const one = await file({ op: 'edit', path: 'e.py', find: 'x = 1', replace: 'x = 3' });
    expect(one.status).toBe('succeeded');
    const all = await file({ op: 'edit', path: 'e.py', find: '= ', replace: '== ', all: true });
    expect(all.output.replacements).toBe(2);
    expect((await file({ op: 'read', path: 'e.py' })).output.content).toBe('x == 3\ny == 1\n');
  });

  it('list (recursive, paginated), find, grep, stat, mkdir, move, delete', async () => {
    await file({ op: 'mkdir', path: 'proj/src/deep' });
    for (const n of ['a', 'b', 'c']) {
      await file({ op: 'write', path: `proj/src/${n}.py`, content: `def ${n}():\n    return "${n}"\n` });
    }
    await file({ op: 'write', path: 'proj/README.md', content: 'hello\n' });

    const flat = await file({ op: 'list', path: 'proj' });
    expect(flat.output.entries.map((e: { path: string }) => e.path)).toEqual(['proj/README.md', 'proj/src']);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await file({
        op: 'list',
        path: 'proj',
        recursive: true,
        limit: 2,
        ...(cursor && { cursor }),
      });
      seen.push(...page.output.entries.map((e: { path: string }) => e.path));
      cursor = page.output.nextCursor;
    } while (cursor);
    expect(seen).toEqual([
      'proj/README.md',
      'proj/src',
      'proj/src/a.py',
      'proj/src/b.py',
      'proj/src/c.py',
      'proj/src/deep',
    ]);

    const found = await file({ op: 'find', path: 'proj', pattern: '**/*.py' });
    expect(found.output.paths).toEqual(['proj/src/a.py', 'proj/src/b.py', 'proj/src/c.py']);

    const grep = await file({ op: 'grep', path: 'proj', pattern: 'return "[ab]"', glob: '**/*.py' });
    expect(grep.output.matches).toEqual(['proj/src/a.py:2:    return "a"', 'proj/src/b.py:2:    return "b"']);

    const stat = await file({ op: 'stat', path: 'proj/README.md' });
    expect(stat.output).toMatchObject({ type: 'file', size: 6 });

    const mv = await file({ op: 'move', path: 'proj/README.md', to: 'proj/docs/README.md' });
    expect(mv.status).toBe('succeeded');
    expect((await file({ op: 'stat', path: 'proj/README.md' })).error.code).toBe('ENOENT');

    const notRecursive = await file({ op: 'delete', path: 'proj/src' });
    expect(notRecursive.status).toBe('failed');
    const rec = await file({ op: 'delete', path: 'proj/src', recursive: true });
    expect(rec.status).toBe('succeeded');
    expect((await file({ op: 'find', path: 'proj', pattern: '**/*.py' })).output.paths).toEqual([]);
  });

  it('reading a missing file is a failed action, not an HTTP error', async () => {
    const res = await fileRaw({ op: 'read', path: 'nope.txt' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('failed');
    expect(res.body.error).toMatchObject({ class: 'validation', code: 'ENOENT' });
  });

  it('per-file and per-workspace size caps fail with a clear limit error', async () => {
    const big = await file({ op: 'write', path: 'big.bin', content: 'x'.repeat(70_000) });
    expect(big.status).toBe('failed');
    expect(big.error.class).toBe('limit');
    expect(big.error.code).toBe('FILE_TOO_LARGE');
    for (let i = 0; i < 3; i++)
      await file({ op: 'write', path: `fill${i}.txt`, content: 'y'.repeat(60_000) });
    const full = await file({ op: 'write', path: 'fill9.txt', content: 'y'.repeat(60_000) });
    expect(full.status).toBe('failed');
    expect(full.error).toMatchObject({ class: 'limit', code: 'WORKSPACE_FULL' });
    for (let i = 0; i < 3; i++) await file({ op: 'delete', path: `fill${i}.txt` });
  });

  describe('path traversal (SECURITY item 9) → 400 naming the path', () => {
    const attempts: [string, Record<string, unknown>][] = [
      ['../x', { op: 'read', path: '../x' }],
      ['absolute', { op: 'read', path: '/etc/passwd' }],
      ['a/../../x', { op: 'write', path: 'a/../../x', content: 'pwn' }],
      ['./../x', { op: 'stat', path: './../x' }],
      ['NUL byte', { op: 'read', path: 'a\u0000b' }],
      ['over-long', { op: 'write', path: `${'d/'.repeat(3000)}f`, content: 'x' }],
      ['move target', { op: 'move', path: 'notes/a.txt', to: '../../escaped.txt' }],
      ['list outside', { op: 'list', path: '..' }],
      ['grep outside', { op: 'grep', pattern: 'root', path: '/etc' }],
    ];
    it.each(attempts)('%s', async (_name, body) => {
      const res = await fileRaw(body);
      expect(res.status).toBe(400);
      expect(fieldsOf(res.body)[0]).toMatch(/^(path|to)$/);
      expect(typeof res.body.error.message).toBe('string');
    });

    it('encoded traversal stays inside the workspace', async () => {
      const res = await fileRaw({ op: 'write', path: '%2e%2e/enc.txt', content: 'x' });
      if (res.status === 200) {
        expect(readFileSync(path.join(engine.workspaceOf(sid), '%2e%2e/enc.txt'), 'utf8')).toBe('x');
      } else {
        expect(res.status).toBe(400);
      }
    });
  });

  describe('symlink and hardlink escapes (SECURITY item 8)', () => {
    const outside = path.join(__dirname, '..', '..', 'package.json');
    beforeAll(() => {
      const ws = engine.workspaceOf(sid);
      symlinkSync('/etc/passwd', path.join(ws, 'passwd-link'));
      symlinkSync('..', path.join(ws, 'up'));
      symlinkSync('/nonexistent/target', path.join(ws, 'dangling'));
      symlinkSync('passwd-link', path.join(ws, 'link-to-link'));
      mkdirSync(path.join(ws, 'real'));
      symlinkSync('/etc', path.join(ws, 'real', 'etc'));
      writeFileSync(path.join(ws, 'safe.txt'), 'ok');
      try {
        linkSync(outside, path.join(ws, 'hard'));
      } catch {
        /* cross-device: the hardlink case is then impossible here anyway */
      }
    });

    it.each([
      ['read through a link to /etc/passwd', { op: 'read', path: 'passwd-link' }],
      ['write through a link to /etc/passwd', { op: 'write', path: 'passwd-link', content: 'pwn' }],
      ['read via ln -s .. up', { op: 'read', path: 'up/package.json' }],
      ['write via ln -s .. up', { op: 'write', path: 'up/pwned.txt', content: 'pwn' }],
      ['dangling link', { op: 'write', path: 'dangling', content: 'pwn' }],
      ['link to a link', { op: 'read', path: 'link-to-link' }],
      ['directory link in the middle', { op: 'read', path: 'real/etc/hostname' }],
      ['list through a directory link', { op: 'list', path: 'up' }],
      ['edit through a link', { op: 'edit', path: 'passwd-link', find: 'root', replace: 'toor' }],
      ['move onto a link', { op: 'move', path: 'safe.txt', to: 'up/moved.txt' }],
    ])('%s is refused and recorded as denied', async (_name, body) => {
      const res = await fileRaw(body);
      expect(res.status).toBe(400);
      expect(readFileSync('/etc/passwd', 'utf8')).not.toContain('pwn');
    });

    it('never reads a hardlinked file from outside', async () => {
      const res = await fileRaw({ op: 'read', path: 'hard' });
      expect(JSON.stringify(res.body)).not.toContain('"name": "switchyard"');
      expect(res.body.status ?? res.status).not.toBe('succeeded');
    });

    it('records a refusal found at execution time as a denied action', async () => {
      const res = await fileRaw({ op: 'read', path: 'passwd-link' });
      expect(res.status).toBe(400);
      const timeline = await engine.request('GET', `/v1/sessions/${sid}/actions?limit=1000`);
      const last = timeline.body.actions.at(-1);
      expect(last).toMatchObject({ status: 'denied', inputSummary: 'read passwd-link' });
      expect(last.error.class).toBe('policy');
    });
  });
});
