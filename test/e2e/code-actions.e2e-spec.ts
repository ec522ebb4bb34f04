import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

describe('code actions (subprocess tier, real bubblewrap)', () => {
  let engine: EngineHarness;
  let sid: string;
  const code = (body: Record<string, unknown>): Promise<any> => engine.action(sid, { type: 'code', ...body });

  beforeAll(async () => {
    engine = await EngineHarness.start();
    sid = await engine.createSession();
  });
  afterAll(() => engine.stop());

  it.each([
    ['python', 'import sys; print("py", sys.version_info[0])', 'py 3\n'],
    ['node', 'console.log("js", typeof process.versions.node)', 'js string\n'],
    ['bash', 'echo "sh $((6*7))"', 'sh 42\n'],
  ])('runs %s and returns the envelope', async (language, src, stdout) => {
    const r = await code({ language, code: src });
    expect(r).toMatchObject({ type: 'code', status: 'succeeded', exitCode: 0, stdout, tier: 'subprocess' });
    expect(r.risk.level).toBe('low');
    expect(r.truncated).toEqual({ stdout: false, stderr: false });
  });

  it('passes stdin and validated env, reports a non-zero exit as failed', async () => {
    const r = await code({
      language: 'bash',
      code: 'read x; echo "$x-$GREETING"; exit 3',
      stdin: 'hi\n',
      env: { GREETING: 'yo' },
    });
    expect(r).toMatchObject({ status: 'failed', exitCode: 3, stdout: 'hi-yo\n' });
    expect(r.error).toBeUndefined();
  });

  it('shares the workspace with the file API in both directions', async () => {
    await engine.action(sid, { type: 'file', op: 'write', path: 'in.txt', content: 'from-api' });
    const r = await code({
      language: 'python',
      code: "print(open('in.txt').read()); open('out.txt','w').write('from-code')",
    });
    expect(r.stdout).toBe('from-api\n');
    const read = await engine.action(sid, { type: 'file', op: 'read', path: 'out.txt' });
    expect(read.output.content).toBe('from-code');
    expect(readFileSync(path.join(engine.workspaceOf(sid), 'out.txt'), 'utf8')).toBe('from-code');
  });

  it('times out with status timed_out and error class timeout', async () => {
    const t0 = Date.now();
    const r = await code({ language: 'bash', code: 'sleep 30', timeoutMs: 1000 });
    expect(r).toMatchObject({ status: 'timed_out', error: { class: 'timeout' } });
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  describe('routing by risk', () => {
    it('denies critical code with its reasons, without running it', async () => {
      const marker = path.join(engine.workspaceOf(sid), 'should-not-exist');
      const r = await code({ language: 'bash', code: `touch should-not-exist; rm -rf / --no-preserve-root` });
      expect(r).toMatchObject({ status: 'denied', error: { class: 'policy' } });
      expect(r.risk.level).toBe('critical');
      expect(r.risk.reasons.join(' ')).toMatch(/destructive/);
      expect(() => readFileSync(marker)).toThrow();
    });

    it('routes medium risk to the session pooled container', async () => {
      const r = await code({ language: 'python', code: 'import os\nprint(os.environ.get("HOME"))' });
      expect(r.risk.level).toBe('medium');
      expect(r).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: '/workspace/.home\n' });
    });

    it('routes high risk to a one-off container, where the network is absent', async () => {
      const r = await code({
        language: 'python',
        code: 'import socket, subprocess\nsocket.create_connection(("example.org", 80))\nsubprocess.run(["ls"])',
      });
      expect(r.risk.level).toBe('high');
      expect(r).toMatchObject({ status: 'failed', tier: 'container' });
      expect(r.stderr).toMatch(/Error|gaierror|unreachable/);
    });

    it('honours a stronger requested tier and refuses a weaker one', async () => {
      const stronger = await code({ language: 'python', code: 'print(1)', tier: 'container' });
      expect(stronger).toMatchObject({ status: 'succeeded', tier: 'container', stdout: '1\n' });
      const weaker = await code({
        language: 'python',
        code: 'import os\nprint(os.environ)',
        tier: 'subprocess',
      });
      expect(weaker).toMatchObject({ status: 'denied', error: { class: 'policy' } });
      expect(weaker.error.message).toMatch(/weaker|stronger|subprocess/);
      expect(weaker.stdout ?? '').toBe('');
    });
  });

  describe('env injection (SECURITY item 11) → 400', () => {
    it.each([
      ['LD_PRELOAD', { LD_PRELOAD: '/tmp/x.so' }],
      ['NODE_OPTIONS', { NODE_OPTIONS: '--require /tmp/x.js' }],
      ['BASH_ENV', { BASH_ENV: '/tmp/x.sh' }],
      ['PATH', { PATH: '/tmp/evil:/usr/bin' }],
      ['key with whitespace', { 'A B': '1' }],
      ['key with NUL', { 'A\u0000B': '1' }],
      ['value with NUL', { A: 'x\u0000y' }],
    ])('%s', async (_name, env) => {
      const res = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'true',
        env,
      });
      expect(res.status).toBe(400);
      expect(fieldsOf(res.body)[0]).toMatch(/^env/);
    });
  });

  it('records the files code changed as WROTE edges', async () => {
    writeFileSync(path.join(engine.workspaceOf(sid), 'seed.txt'), 'x');
    const r = await code({ language: 'bash', code: 'echo new > made.txt; echo more >> in.txt' });
    const g = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const wrote = g.edges
      .filter((e: { from: string; type: string }) => e.from === r.id && e.type === 'WROTE')
      .map((e: { to: string }) => e.to)
      .sort();
    expect(wrote).toEqual([`file:${sid}:in.txt`, `file:${sid}:made.txt`]);
  });
});
