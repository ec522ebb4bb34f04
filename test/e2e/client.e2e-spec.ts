import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { SwitchyardClient } from '../../packages/client/src';
import type { SessionEvent } from '../../packages/client/src';
import { EngineHarness } from '../support/engine-harness';
import { freePort } from '../support/engine-process';

/** The built CLI (`node scripts/build.mjs`). */
const CLI = path.join(__dirname, '..', '..', 'packages', 'client', 'bin', 'switchyard.js');

function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('@switchyard/client against the engine', () => {
  let engine: EngineHarness;
  let client: SwitchyardClient;
  const env = () => ({ SWITCHYARD_URL: engine.baseUrl, SWITCHYARD_API_KEY: '' });

  beforeAll(async () => {
    engine = await EngineHarness.start();
    client = new SwitchyardClient({ baseUrl: engine.baseUrl });
  });
  afterAll(() => engine?.stop());

  it('drives a whole agent workflow: fail, reflect, undo and retry, plan, checkpoint, fork, tools', async () => {
    const session = await client.sessions.create({ metadata: { agent: 'client-e2e' } });
    const sid = session.id;
    const abort = new AbortController();
    const events: SessionEvent[] = [];
    const tail = (async () => {
      for await (const event of client.events(sid, { signal: abort.signal })) events.push(event);
    })();
    let forkId: string | undefined;
    let fixedId: string | undefined;
    try {
      const write = await client.actions.run(sid, {
        type: 'file',
        op: 'write',
        path: 'app.py',
        content: 'import missing_module\n',
      });
      expect(write.status).toBe('succeeded');

      const failed = await client.actions.run(
        sid,
        { type: 'code', language: 'bash', code: 'echo broken >> app.py; python3 app.py' },
        { checkpoint: 'before' },
      );
      expect(failed.status).toBe('failed');
      expect(failed.checkpoint?.id).toMatch(/^chk_/);

      const context = await client.actions.context(sid, failed.id);
      expect(context.checkpoint?.id).toBe(failed.checkpoint?.id);
      expect(JSON.stringify(context)).toContain('missing_module');

      const fixed = await client.actions.retry(sid, failed.id, {
        restore: true,
        reason: 'drop the import',
        action: { type: 'code', language: 'python', code: 'print(open("app.py").read().strip())' },
      });
      fixedId = fixed.id;
      expect(fixed.status).toBe('succeeded');
      expect((await client.actions.get(sid, fixed.id)).retryOf).toBe(failed.id);
      expect(fixed.restored?.checkpointId).toBe(failed.checkpoint?.id);
      expect(fixed.stdout).toBe('import missing_module\n');

      const started = await client.actions.start(sid, { type: 'code', language: 'bash', code: 'echo async' });
      const finished = await client.actions.waitFor(sid, started.id);
      expect(finished).toMatchObject({ status: 'succeeded', stdout: 'async\n' });

      const lineage = await client.files.lineage(sid, 'app.py');
      expect(JSON.stringify(lineage)).toContain(write.id);

      const plan = await client.plans.create(sid, {
        goal: 'two steps',
        steps: [
          { id: 'a', action: { type: 'code', language: 'bash', code: 'echo a > a.txt' } },
          { id: 'b', action: { type: 'code', language: 'bash', code: 'cat a.txt' }, dependsOn: ['a'] },
        ],
      });
      const done = await client.plans.waitFor(sid, plan.id);
      expect(done.status).toBe('succeeded');
      expect(done.steps.map((s) => s.status)).toEqual(['succeeded', 'succeeded']);

      const checkpoint = await client.checkpoints.create(sid, { label: 'after plan' });
      expect((await client.checkpoints.list(sid)).map((c) => c.id)).toContain(checkpoint.id);
      await client.actions.run(sid, { type: 'file', op: 'write', path: 'later.txt', content: 'x' });
      const diff = await client.checkpoints.diff(sid, checkpoint.id);
      expect(JSON.stringify(diff.added)).toContain('later.txt');
      const fork = await client.checkpoints.fork(sid, checkpoint.id);
      forkId = fork.id;
      expect(fork.forkedFrom).toEqual({ sessionId: sid, checkpointId: checkpoint.id });
      const inFork = await client.actions.run(fork.id, {
        type: 'code',
        language: 'bash',
        code: 'cat a.txt; ls',
      });
      expect(inFork.stdout).toBe('a\na.txt\napp.py\n');

      const tools = await client.tools.list({ format: 'openai', strict: true });
      expect(tools.map((t) => (t.function as { name: string }).name)).toContain('bash');
      const answer = await client.tools.call(sid, {
        id: 'call_1',
        type: 'function',
        function: { name: 'bash', arguments: '{"command":"echo hi","timeoutMs":null,"state":null}' },
      });
      expect(answer).toMatchObject({ tool_call_id: 'call_1', is_error: false });

      await expect(client.sessions.get('ses_nope')).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
    } finally {
      if (forkId) await client.sessions.delete(forkId);
      await client.sessions.delete(sid);
      abort.abort();
      await tail;
    }
    const types = events.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['action.started', 'action.completed', 'plan.completed']));
    expect(events.filter((e) => e.data.actionId === fixedId).map((e) => e.type)).toEqual(
      expect.arrayContaining(['action.started', 'action.completed']),
    );
    expect(types.at(-1)).toBe('session.ended');
    await expect(client.sessions.get(sid)).rejects.toMatchObject({ status: 404 });
  });

  it('CLI: exec passes the exit code and streams, lists sessions, renders the graph, prints tools', async () => {
    const run = await runCli(['exec', 'python', '-c', 'import sys; print(1); sys.exit(3)'], env());
    expect(run).toMatchObject({ code: 3, stdout: '1\n' });

    const toStderr = await runCli(['exec', 'bash', '-c', 'echo oops >&2; exit 0'], env());
    expect(toStderr).toMatchObject({ code: 0, stderr: 'oops\n' });

    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-cli-'));
    writeFileSync(path.join(dir, 'hello.py'), 'print("from a file")\n');
    expect(await runCli(['exec', 'python', path.join(dir, 'hello.py')], env())).toMatchObject({
      code: 0,
      stdout: 'from a file\n',
    });

    const sid = (await client.sessions.create({ metadata: { agent: 'cli-e2e' } })).id;
    try {
      expect(
        await runCli(['exec', 'bash', '--session', sid, '-c', 'echo kept > k.txt'], env()),
      ).toMatchObject({
        code: 0,
      });
      const ls = await runCli(['sessions', 'ls', '--json'], env());
      expect(ls.code).toBe(0);
      // The sessions `exec` created for itself are gone; the one given with --session stays.
      expect((JSON.parse(ls.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual([sid]);

      const actions = await runCli(['actions', 'ls', sid], env());
      expect(actions.stdout).toMatch(/^SEQ\s+ID\s+TYPE\s+STATUS/);
      expect(actions.stdout).toContain('succeeded');

      const dot = await runCli(['graph', sid, '--dot'], env());
      expect(dot.code).toBe(0);
      expect(dot.stdout.startsWith('digraph')).toBe(true);
      expect(dot.stdout).toContain(`"${sid}"`);

      const planFile = path.join(dir, 'plan.json');
      writeFileSync(
        planFile,
        JSON.stringify({
          steps: [{ id: 'one', action: { type: 'code', language: 'bash', code: 'exit 4' } }],
        }),
      );
      const planRun = await runCli(['plan', 'run', planFile, '--session', sid], env());
      expect(planRun.code).toBe(1);
      expect(planRun.stdout).toContain('step one: failed');
      expect(planRun.stdout).toContain('needs_replan');
    } finally {
      await client.sessions.delete(sid);
    }

    const tools = await runCli(['tools', '--format', 'openai', '--strict'], env());
    expect(tools.code).toBe(0);
    const catalog = JSON.parse(tools.stdout) as Array<{ function: { name: string; strict: boolean } }>;
    expect(catalog.find((t) => t.function.name === 'bash')?.function.strict).toBe(true);
  });

  it('CLI: exec of denied code exits 1 with the reasons, nothing run; events tails a session live', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-cli-'));
    const marker = path.join(dir, 'should-not-exist');
    const denied = await runCli(
      ['exec', 'bash', '-c', `touch ${marker}; rm -rf / --no-preserve-root`],
      env(),
    );
    expect(denied.code).toBe(1);
    expect(denied.stdout).toBe('');
    expect(denied.stderr).toMatch(/^switchyard: action denied: .+/);
    expect(existsSync(marker)).toBe(false);

    const sid = (await client.sessions.create({ metadata: { agent: 'cli-events' } })).id;
    const child = spawn(process.execPath, [CLI, 'events', sid], {
      env: { ...process.env, ...env() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let lines = '';
    child.stdout.on('data', (d: Buffer) => (lines += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      // Live: the stream is open before the action, and the action's events arrive while the CLI runs.
      const deadline = Date.now() + 15_000;
      while (!lines.includes('action.completed') && Date.now() < deadline) {
        await client.actions.run(sid, { type: 'code', language: 'bash', code: 'echo tail-me' });
        await new Promise((r) => setTimeout(r, 300));
      }
      const completed = lines.split('\n').find((l) => l.includes('action.completed'));
      expect(completed).toMatch(/^\d+ action\.completed .*act_\w+.*succeeded/);
    } finally {
      await client.sessions.delete(sid);
    }
    // The session's end ends the stream, and the CLI exits 0 by itself.
    expect(await exited).toBe(0);
    expect(lines).toContain('session.ended');
  });

  it('CLI: usage errors exit 2, an engine that is not there is named', async () => {
    const unknown = await runCli(['frobnicate'], env());
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command: frobnicate');
    expect((await runCli(['sessions', 'ls', '--bogus'], env())).code).toBe(2);
    const help = await runCli(['exec', '--help'], env());
    expect(help).toMatchObject({ code: 0 });
    expect(help.stdout).toContain('usage: switchyard exec');

    const closed = `http://127.0.0.1:${await freePort()}`;
    const refused = await runCli(['exec', 'python', '-c', 'print(1)'], { SWITCHYARD_URL: closed });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toEqual([
      `switchyard: cannot reach the Switchyard engine at ${closed} (ECONNREFUSED); is it running? Set SWITCHYARD_URL to its address`,
    ]);
  });

  it('CLI: mcp relays stdio to the engine /mcp (list tools, call bash)', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, 'mcp'],
      env: { ...(process.env as Record<string, string>), ...env() },
      stderr: 'pipe',
    });
    const mcp = new Client({ name: 'client-e2e', version: '1.0.0' });
    await mcp.connect(transport);
    try {
      const { tools } = await mcp.listTools();
      expect(tools.map((t) => t.name)).toContain('bash');
      const result = await mcp.callTool({ name: 'bash', arguments: { command: 'echo via-mcp' } });
      expect(JSON.stringify(result.content)).toContain('via-mcp');
    } finally {
      await mcp.close();
    }
  });
});
