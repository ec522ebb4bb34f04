import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SwitchyardClient } from '../../packages/client/src';
import { EngineHarness } from '../support/engine-harness';
import { freePort } from '../support/engine-process';

/** The built CLI (`node scripts/build.mjs`). */
const CLI = path.join(__dirname, '..', '..', 'packages', 'client', 'bin', 'switchyard.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a shell line (so `echo hi | switchyard …` is a real pipe), `switchyard` being the built CLI. */
function sh(line: string, env: Record<string, string>, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', line], {
      cwd,
      env: { ...process.env, ...env, CLI: `${process.execPath} ${CLI}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `switchyard mcp` fed raw JSON-RPC lines; answers the first line it writes back. */
function mcpAnswer(lines: object[], env: Record<string, string>): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'mcp'], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let buffer = '';
    child.stdout.on('data', (d: Buffer) => {
      buffer += d.toString();
      const newline = buffer.indexOf('\n');
      if (newline === -1) return;
      resolve(JSON.parse(buffer.slice(0, newline)) as Record<string, any>);
      child.stdin.end();
    });
    child.on('error', reject);
    child.on('close', () => reject(new Error(`mcp relay ended without an answer: ${buffer}`)));
    for (const line of lines) child.stdin.write(`${JSON.stringify(line)}\n`);
  });
}

/**
 * The CLI's sandbox commands as a real child process against a real engine: stdin piped to `exec`, `exec --state
 * session`, `files cp` both ways (a directory as a tar), `files ls`/`cat`, `kernels`, `checkpoints`, and `mcp`
 * naming a refused message apart from an unreachable engine.
 */
describe('switchyard CLI: files, kernels, checkpoints, exec stdin and state, mcp errors', () => {
  let engine: EngineHarness;
  let client: SwitchyardClient;
  let sid: string;
  let dir: string;
  const env = () => ({ SWITCHYARD_URL: engine.baseUrl, SWITCHYARD_API_KEY: '' });
  const cli = (line: string) => sh(line, env(), dir);

  beforeAll(async () => {
    engine = await EngineHarness.start();
    client = new SwitchyardClient({ baseUrl: engine.baseUrl });
    sid = (await client.sessions.create({ metadata: { agent: 'cli-sandbox-e2e' } })).id;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cli-sandbox-e2e-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await engine?.stop();
  });

  it('exec forwards piped stdin to the program, and a file given as stdin', async () => {
    writeFileSync(path.join(dir, 'in.py'), 'print(input().upper())\n');
    const piped = await cli('echo hi | $CLI exec python in.py');
    expect(piped).toMatchObject({ code: 0, stdout: 'HI\n' });
    writeFileSync(path.join(dir, 'lines.txt'), 'a\nb\n');
    const redirected = await cli(`$CLI exec bash --session ${sid} -c 'wc -l' < lines.txt`);
    expect(redirected).toMatchObject({ code: 0, stdout: '2\n' });
    // Nothing piped (stdin is /dev/null): the program reads end-of-file at once.
    const none = await cli(`$CLI exec python -c 'import sys; print(repr(sys.stdin.read()))' < /dev/null`);
    expect(none).toMatchObject({ code: 0, stdout: "''\n" });
  });

  it('exec --state session keeps the kernel between runs; kernels ls, restart', async () => {
    expect(await cli(`$CLI exec python --session ${sid} --state session -c 'x = 20'`)).toMatchObject({
      code: 0,
    });
    const value = await cli(`$CLI exec python --session ${sid} --state session -c 'print("sum"); x * 2 + 2'`);
    expect(value).toMatchObject({ code: 0, stdout: 'sum\n42\n' });
    const refused = await cli(`echo x | $CLI exec python --session ${sid} --state session -c 'x'`);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('a kernel reads no stdin');

    const listed = await cli(`$CLI kernels ls ${sid} --json`);
    const kernels = JSON.parse(listed.stdout) as Array<{
      id: string;
      language: string;
      executionCount: number;
    }>;
    const python = kernels.find((k) => k.language === 'python');
    expect(python?.executionCount).toBe(2);
    expect((await cli(`$CLI kernels ls ${sid}`)).stdout).toMatch(
      new RegExp(`^ID .*\\n${python?.id} +python`),
    );
    expect(await cli(`$CLI kernels restart ${sid} ${python?.id}`)).toMatchObject({ code: 0 });
    const gone = await cli(`$CLI exec python --session ${sid} --state session -c 'x'`);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("NameError: name 'x' is not defined");
  });

  it('files cp up and down (a file, a directory as a tar, stdin and stdout), ls and cat', async () => {
    mkdirSync(path.join(dir, 'site', 'css'), { recursive: true });
    writeFileSync(path.join(dir, 'site', 'index.html'), '<h1>hi</h1>\n');
    writeFileSync(path.join(dir, 'site', 'css', 'a.css'), 'h1{}\n');
    const up = await cli(`$CLI files cp ./site ${sid}:web`);
    expect(up.code).toBe(0);
    expect(up.stderr).toContain('2 files');
    expect((await cli(`$CLI files cat ${sid} web/index.html`)).stdout).toBe('<h1>hi</h1>\n');
    const ls = await cli(`$CLI files ls ${sid} web -r`);
    expect(ls.stdout.split('\n')[0]).toMatch(/^TYPE +SIZE +PATH$/);
    expect(ls.stdout).toMatch(/file +5 +web\/css\/a\.css/);

    const down = await cli(`$CLI files cp ${sid}:web ./copy`);
    expect(down.code).toBe(0);
    expect(readFileSync(path.join(dir, 'copy', 'css', 'a.css'), 'utf8')).toBe('h1{}\n');
    expect(await cli(`$CLI files cp ${sid}:web/index.html ./one.html`)).toMatchObject({ code: 0 });
    expect(readFileSync(path.join(dir, 'one.html'), 'utf8')).toBe('<h1>hi</h1>\n');

    expect(await cli(`printf 'from stdin' | $CLI files cp - ${sid}:piped.txt`)).toMatchObject({ code: 0 });
    expect(await cli(`$CLI files cp ${sid}:piped.txt -`)).toMatchObject({ code: 0, stdout: 'from stdin' });

    const missing = await cli(`$CLI files cat ${sid} nope.txt`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^switchyard: 404 /);
    const bad = await cli(`$CLI files cp ./site ./elsewhere`);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('exactly one side is remote');
  });

  it('checkpoints create, list, diff and restore', async () => {
    await client.actions.run(sid, { type: 'file', op: 'write', path: 'notes.txt', content: 'one\n' });
    const created = await cli(`$CLI checkpoints create ${sid} --label first`);
    expect(created.code).toBe(0);
    const checkpointId = created.stdout.trim();
    expect(checkpointId).toMatch(/^chk_/);
    expect((await cli(`$CLI checkpoints list ${sid}`)).stdout).toMatch(
      new RegExp(`${checkpointId} .* first\\n`),
    );
    await client.actions.run(sid, { type: 'file', op: 'write', path: 'notes.txt', content: 'two\n' });
    await client.actions.run(sid, { type: 'file', op: 'write', path: 'new.txt', content: 'n\n' });
    const diff = await cli(`$CLI checkpoints diff ${sid} ${checkpointId}`);
    expect(diff.stdout).toContain('A new.txt\n');
    expect(diff.stdout).toContain('M notes.txt\n');
    expect(diff.stdout).toContain('+two');
    const restored = await cli(`$CLI checkpoints restore ${sid} ${checkpointId}`);
    expect(restored).toMatchObject({ code: 0 });
    expect(restored.stdout).toMatch(new RegExp(`^restored ${checkpointId}: `));
    expect((await cli(`$CLI files cat ${sid} notes.txt`)).stdout).toBe('one\n');
  });

  it('mcp: a message out of protocol state is named as the engine refusing it, not as unreachable', async () => {
    const refused = await mcpAnswer([{ jsonrpc: '2.0', id: 7, method: 'tools/list' }], env());
    expect(refused.id).toBe(7);
    expect(refused.error.message).toMatch(/^switchyard engine refused tools\/list \(HTTP 4\d\d\): /);
    expect(refused.error.message).not.toContain('unreachable');

    const port = await freePort();
    const down = await mcpAnswer([{ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }], {
      SWITCHYARD_URL: `http://127.0.0.1:${port}`,
      SWITCHYARD_API_KEY: '',
    });
    expect(down.error.message).toContain('switchyard engine unreachable');
    expect(down.error.message).toContain(`127.0.0.1:${port}`);
  });
});
