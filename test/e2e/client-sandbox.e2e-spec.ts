import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { createHash, randomBytes } from 'node:crypto';
import { Sandbox, SwitchyardClient, SwitchyardError } from '../../packages/client/src';
import { EngineHarness } from '../support/engine-harness';

/**
 * The TypeScript SDK's verbs (`Sandbox`) against a real engine (real bubblewrap, real Docker, the real data-science
 * template): kernel cells with rich results, foreground and background commands with their output as it comes, the
 * workspace's files streamed both ways (a directory as a tar), checkpoint, restore, fork and kill.
 */
describe('Sandbox (the TypeScript SDK verbs) against the engine', () => {
  let engine: EngineHarness;
  let client: SwitchyardClient;
  let local: string;

  beforeAll(async () => {
    engine = await EngineHarness.start();
    client = new SwitchyardClient({ baseUrl: engine.baseUrl });
    local = mkdtempSync(path.join(os.tmpdir(), 'sdk-e2e-'));
  });
  afterAll(async () => {
    rmSync(local, { recursive: true, force: true });
    await engine?.stop();
  });

  it('runCode: state survives between cells; a data-science chart is a PNG; a failing cell is an answer', async () => {
    await using sbx = await Sandbox.create({
      client,
      template: 'data-science',
      metadata: { agent: 'sdk-e2e' },
    });
    expect(sbx.id).toMatch(/^ses_/);
    expect((await sbx.runCode('x = 41')).error).toBeUndefined();
    const value = await sbx.runCode('x + 1');
    expect(value.text).toBe('42');
    expect(value.kernel?.language).toBe('python');

    // The cell: the plot is the final expression, so the cell has a value (`<Axes: >`) and a chart.
    const chart = await sbx.runCode(
      "import pandas as pd; df = pd.DataFrame({'x':[1,2]}); print('drawn'); df.plot()",
    );
    expect(chart.error).toBeUndefined();
    expect(chart.logs.stdout).toBe('drawn\n');
    expect(chart.results).toHaveLength(2);
    expect(chart.results[1].isMainResult).toBe(true);
    expect(chart.results[1].text).toMatch(/^<Axes/);
    const png = Buffer.from(chart.results[0].png ?? '', 'base64');
    expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(chart.results[0].formats()).toEqual(expect.arrayContaining(['image/png', 'text/plain']));

    const table = await sbx.runCode('df');
    expect(table.results[0].isMainResult).toBe(true);
    expect(table.results[0].html).toContain('<table');
    expect(table.text).toContain('x');

    const failed = await sbx.runCode('1 / 0');
    expect(failed.action.status).toBe('failed');
    expect(failed.error?.traceback).toContain('ZeroDivisionError');

    const node = await sbx.runCode('console.log(6 * 7)', { language: 'node', state: 'fresh' });
    expect(node.logs.stdout).toBe('42\n');
    expect(node.kernel).toBeUndefined();
  });

  it('commands: foreground with cwd, env and onStdout; background with output as it comes, wait, kill', async () => {
    await using sbx = await Sandbox.create({ client });
    const chunks: string[] = [];
    await sbx.commands.run("mkdir sub && echo 'in sub' > sub/note.txt && mkfifo ready.fifo");
    const fg = await sbx.commands.run('cat note.txt; echo "$GREETING"; echo oops >&2; exit 3', {
      cwd: 'sub',
      env: { GREETING: 'hello' },
      onStdout: (t) => chunks.push(t),
    });
    expect(fg).toEqual({ exitCode: 3, stdout: 'in sub\nhello\n', stderr: 'oops\n' });
    expect(chunks.join('')).toBe('in sub\nhello\n');

    const quick = await sbx.commands.run('echo plain');
    expect(quick).toEqual({ exitCode: 0, stdout: 'plain\n', stderr: '' });

    const out: string[] = [];
    const err: string[] = [];
    let first: (line: string) => void = () => undefined;
    const firstLine = new Promise<string>((resolve) => (first = resolve));
    const counter = await sbx.commands.run(
      'echo line1; read -t 20 go < ready.fifo; echo line2; echo line3; echo done >&2',
      {
        background: true,
        onStdout: (t) => {
          out.push(t);
          first(t);
        },
        onStderr: (t) => err.push(t),
      },
    );
    expect(counter.processId).toMatch(/^prc_/);
    // The first line arrives from the event stream while the process still waits on the fifo.
    expect(await firstLine).toBe('line1\n');
    await sbx.commands.run('echo go > ready.fifo');
    const result = await counter.wait({ timeoutMs: 30_000 });
    expect(result).toEqual({ exitCode: 0, stdout: 'line1\nline2\nline3\n', stderr: 'done\n' });
    expect(out.join('')).toBe('line1\nline2\nline3\n');
    expect(err.join('')).toBe('done\n');

    const server = await sbx.commands.run('echo up; exec sleep 600', { background: true, name: 'sleeper' });
    const seen = await server.logs();
    expect(seen.process.running).toBe(true);
    expect(await server.kill()).toBe(true);
    const killed = await server.wait({ timeoutMs: 30_000 });
    expect(killed.signal).toBe('SIGTERM');
    expect(killed.exitCode).toBe(143);
    expect(killed.stdout).toBe('up\n');
  });

  it('files: write and read text, bytes and streams; list; upload and download a directory as a tar', async () => {
    await using sbx = await Sandbox.create({ client });
    const written = await sbx.files.write('data/hello.txt', 'héllo\n');
    expect(written).toMatchObject({ path: 'data/hello.txt', size: 7 });
    expect(written.sha256).toBe(createHash('sha256').update('héllo\n').digest('hex'));
    expect(await sbx.files.read('data/hello.txt')).toBe('héllo\n');

    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    await sbx.files.write('data/blob.bin', Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]));
    expect(Buffer.from(await sbx.files.read('data/blob.bin', { format: 'bytes' })).equals(bytes)).toBe(true);
    await sbx.files.write('data/copy.bin', new Blob([bytes]));
    await sbx.files.write('data/web.bin', new Blob([bytes.subarray(0, 4096)]).stream());
    expect(
      Buffer.from(await sbx.files.read('data/web.bin', { format: 'bytes' })).equals(bytes.subarray(0, 4096)),
    ).toBe(true);
    await sbx.files.write('data/view.bin', bytes.subarray(10, 20));
    expect(
      Buffer.from(await sbx.files.read('data/view.bin', { format: 'bytes' })).equals(bytes.subarray(10, 20)),
    ).toBe(true);
    const stream = await sbx.files.read('data/copy.bin', { format: 'stream' });
    const streamed: Buffer[] = [];
    for await (const chunk of stream) streamed.push(Buffer.from(chunk));
    expect(createHash('sha256').update(Buffer.concat(streamed)).digest('hex')).toBe(
      createHash('sha256').update(bytes).digest('hex'),
    );
    await expect(sbx.files.write('data/hello.txt', 'again', { overwrite: false })).rejects.toMatchObject({
      status: 409,
      code: 'FILE_EXISTS',
    });
    await expect(sbx.files.read('nope.txt')).rejects.toMatchObject({ status: 404 });

    const names = (await sbx.files.list('data')).map((e) => `${e.type}:${e.path}`).sort();
    expect(names).toEqual([
      'file:data/blob.bin',
      'file:data/copy.bin',
      'file:data/hello.txt',
      'file:data/view.bin',
      'file:data/web.bin',
    ]);

    const tree = path.join(local, 'tree');
    mkdirSync(path.join(tree, 'src', 'deep'), { recursive: true });
    mkdirSync(path.join(tree, 'empty'));
    writeFileSync(path.join(tree, 'README.md'), '# tree\n');
    writeFileSync(path.join(tree, 'src', 'deep', 'x.bin'), bytes.subarray(0, 5000));
    const up = await sbx.files.upload(tree, 'project');
    expect(up).toMatchObject({ kind: 'directory', files: 2, bytes: 5007 });
    expect((await sbx.commands.run('cd project && find . | sort')).stdout).toBe(
      '.\n./README.md\n./empty\n./src\n./src/deep\n./src/deep/x.bin\n',
    );

    const back = path.join(local, 'back');
    const down = await sbx.files.download('project', back);
    expect(down).toMatchObject({ kind: 'directory', files: 2 });
    expect(readFileSync(path.join(back, 'README.md'), 'utf8')).toBe('# tree\n');
    expect(readFileSync(path.join(back, 'src', 'deep', 'x.bin')).equals(bytes.subarray(0, 5000))).toBe(true);

    const single = await sbx.files.download('data/hello.txt', local);
    expect(single).toMatchObject({ kind: 'file', size: 7 });
    expect(readFileSync(path.join(local, 'hello.txt'), 'utf8')).toBe('héllo\n');
    const file = path.join(local, 'one.txt');
    writeFileSync(file, 'one\n');
    expect(await sbx.files.upload(file, 'up/one.txt')).toMatchObject({ kind: 'file', size: 4 });
    expect(await sbx.files.read('up/one.txt')).toBe('one\n');
  });

  it('checkpoint, restore, fork, connect and kill', async () => {
    const sbx = await Sandbox.create({ client });
    try {
      await sbx.files.write('state.txt', 'before\n');
      const cp = await sbx.checkpoint('before');
      expect(cp.label).toBe('before');
      await sbx.files.write('state.txt', 'after\n');
      await sbx.restore(cp);
      expect(await sbx.files.read('state.txt')).toBe('before\n');

      await using child = await sbx.fork();
      expect(child.id).not.toBe(sbx.id);
      expect(await child.files.read('state.txt')).toBe('before\n');
      await child.files.write('state.txt', 'child\n');
      expect(await sbx.files.read('state.txt')).toBe('before\n');

      const again = await Sandbox.connect(sbx.id, { baseUrl: engine.baseUrl });
      expect(await again.files.read('state.txt')).toBe('before\n');
    } finally {
      await sbx.kill();
    }
    await sbx.kill(); // already gone: not an error
    await expect(Sandbox.connect(sbx.id, { client })).rejects.toBeInstanceOf(SwitchyardError);
  });
});
