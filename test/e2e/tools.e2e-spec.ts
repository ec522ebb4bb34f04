import Ajv from 'ajv';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BrowserSite } from '../support/browser-site';
import { EngineHarness } from '../support/engine-harness';
import { MINIMAL_INPUTS, TOOL_ORDER } from '../support/tool-inputs';

/** A minimal valid input per tool; every tool in the list must have one (the test fails on a new tool without). */
const MINIMAL = MINIMAL_INPUTS;
const ORDER = TOOL_ORDER;

/** Browser tools in an order where each finds the page it needs; inputs may use earlier results. */
function browserSteps(
  site: BrowserSite,
): Array<[string, (previous: Map<string, any>) => Record<string, unknown>]> {
  return [
    ['browser_navigate', () => ({ url: site.url('/form') })],
    ['browser_fill', () => ({ selector: '#name', value: 'Ada' })],
    ['browser_type', () => ({ selector: '#name', text: '!' })],
    ['browser_select', () => ({ selector: '#color', values: ['blue'] })],
    ['browser_check', () => ({ selector: '#agree' })],
    ['browser_hover', () => ({ selector: '#go' })],
    ['browser_press', () => ({ key: 'Tab' })],
    ['browser_wait_for', () => ({ selector: '#go' })],
    ['browser_extract', () => ({ mode: 'text' })],
    ['browser_evaluate', () => ({ script: 'document.title' })],
    ['browser_screenshot', () => ({ path: 'shot.png' })],
    ['browser_pdf', () => ({ path: 'page.pdf' })],
    ['browser_click', () => ({ selector: '#go' })],
    ['browser_back', () => ({})],
    ['browser_forward', () => ({})],
    ['browser_reload', () => ({})],
    ['browser_new_tab', () => ({ url: site.url('/download') })],
    ['browser_switch_tab', (prev) => ({ tabId: JSON.parse(prev.get('browser_navigate').content).tabId })],
    ['browser_close_tab', (prev) => ({ tabId: JSON.parse(prev.get('browser_new_tab').content).tabId })],
    // Files move the session to its dedicated browser (tabs and cookies come along).
    ['browser_navigate', () => ({ url: site.url('/download') })],
    ['browser_download', () => ({ selector: '#get', path: 'downloads/' })],
    ['browser_navigate', () => ({ url: site.url('/upload') })],
    ['browser_upload', () => ({ selector: '#file', path: 'shot.png' })],
  ];
}

describe('tools for model loops', () => {
  let engine: EngineHarness;
  let dir: string;
  let toolsFile: string;
  let site: BrowserSite;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-tools-'));
    toolsFile = path.join(dir, 'tools.toml');
    site = await BrowserSite.start();
    engine = await EngineHarness.start({
      SWITCHYARD_TOOLS_FILE: toolsFile,
      SWITCHYARD_POOL_MIN: '0',
      SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
      SWITCHYARD_BROWSER_EVALUATE: 'true',
    });
  });
  afterAll(async () => {
    await engine.stop();
    await site.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (sid: string, body: unknown) => engine.request('POST', `/v1/sessions/${sid}/tool-calls`, body);

  it.each(['anthropic', 'openai'])(
    'lists tools in %s format with valid JSON Schemas, and each one runs with a minimal input',
    async (format) => {
      const res = await engine.request('GET', `/v1/tools?format=${format}`);
      expect(res.status).toBe(200);
      const tools = res.body.tools.map((t: any) =>
        format === 'anthropic'
          ? { name: t.name, description: t.description, schema: t.input_schema }
          : (expect(t.type).toBe('function'),
            { name: t.function.name, description: t.function.description, schema: t.function.parameters }),
      );
      const ajv = new Ajv({ strict: false });
      const browser = browserSteps(site);
      for (const t of tools) {
        expect(typeof t.description).toBe('string');
        expect(t.schema.type).toBe('object');
        expect(ajv.validateSchema(t.schema)).toBe(true);
        const hasInput = MINIMAL[t.name] !== undefined || browser.some(([name]) => name === t.name);
        if (!hasInput) throw new Error(`no minimal input for tool ${t.name}`);
        if (MINIMAL[t.name]) expect(ajv.validate(t.schema, MINIMAL[t.name])).toBe(true);
      }
      const schemaOf = new Map<string, object>(tools.map((t: any) => [t.name, t.schema]));
      const sid = await engine.createSession();
      for (const name of ORDER) {
        const r = await call(sid, { id: `toolu_${name}`, name, input: MINIMAL[name] });
        expect(r.status).toBe(200);
        expect(r.body).toMatchObject({ tool_use_id: `toolu_${name}`, is_error: false });
      }
      const results = new Map<string, any>();
      for (const [name, input] of browser) {
        const args = input(results);
        expect(ajv.validate(schemaOf.get(name)!, args)).toBe(true);
        const r = await call(sid, { id: `toolu_${name}`, name, input: args });
        if (r.body.is_error) throw new Error(`${name} failed: ${r.body.content}`);
        results.set(name, r.body);
      }
      expect(tools.length).toBe(ORDER.length + 21);
    },
  );

  it('code tools run in the session kernel unless told otherwise, and answer its result', async () => {
    const sid = await engine.createSession();
    await call(sid, { id: 'k1', name: 'python', input: { code: 'total = 40' } });
    const r = await call(sid, { id: 'k2', name: 'python', input: { code: 'total + 2' } });
    expect(r.body).toEqual({ tool_use_id: 'k2', content: '[result]\n42\n[exit_code]\n0', is_error: false });
    await call(sid, { id: 'k3', name: 'bash', input: { command: 'cd /tmp' } });
    expect((await call(sid, { id: 'k4', name: 'bash', input: { command: 'pwd' } })).body.content).toContain(
      '/tmp',
    );
    const fresh = await call(sid, { id: 'k5', name: 'bash', input: { command: 'pwd', state: 'fresh' } });
    expect(fresh.body.content).toContain('/workspace');
    await call(sid, { id: 'k6', name: 'kernel_restart', input: { language: 'python' } });
    const gone = await call(sid, { id: 'k7', name: 'python', input: { code: 'total' } });
    expect(gone.body).toMatchObject({ is_error: true });
    expect(gone.body.content).toContain("NameError: name 'total' is not defined");
  });

  it('answers code tools as [stdout]/[stderr]/[exit_code] sections, a non-zero exit as is_error', async () => {
    const sid = await engine.createSession();
    const ok = await call(sid, { id: 't1', name: 'bash', input: { command: 'echo out' } });
    expect(ok.body).toEqual({
      tool_use_id: 't1',
      content: '[stdout]\nout\n\n[exit_code]\n0',
      is_error: false,
    });
    const bad = await call(sid, {
      id: 't2',
      name: 'python',
      input: { code: 'import sys; print("x", file=sys.stderr); sys.exit(3)' },
    });
    expect(bad.body).toEqual({ tool_use_id: 't2', content: '[stderr]\nx\n\n[exit_code]\n3', is_error: true });
    const timeout = await call(sid, {
      id: 't3',
      name: 'bash',
      input: { command: 'sleep 5', timeoutMs: 200 },
    });
    expect(timeout.body.is_error).toBe(true);
    expect(timeout.body.content).toMatch(/^\[error\]\ntimed_out: timed out after 200 ms/);
    const flood = await call(sid, { id: 't4', name: 'python', input: { code: 'print("y" * 3000000)' } });
    expect(flood.body.content).toContain('...(truncated)');
  });

  it('turns unknown tools and invalid inputs into is_error results naming the field; batches run in order', async () => {
    const sid = await engine.createSession();
    const res = await call(sid, [
      { id: 'a', name: 'rm_rf', input: {} },
      { id: 'b', name: 'bash', input: {} },
      { id: 'c', name: 'bash', input: { command: 'true', verbose: true } },
      { id: 'd', name: 'read', input: { path: '../../etc/passwd' } },
      { id: 'e', name: 'write', input: { path: 'order.txt', content: '1' } },
      { id: 'f', name: 'read', input: { path: 'order.txt' } },
    ]);
    expect(res.status).toBe(200);
    const [a, b, c, d, e, f] = res.body;
    expect(a).toMatchObject({ tool_use_id: 'a', is_error: true });
    expect(a.content).toContain('unknown tool "rm_rf"');
    expect(b.content).toMatch(/^invalid input for bash: command:/);
    expect(c.content).toContain('unknown field verbose');
    expect(d).toMatchObject({ is_error: true });
    expect(d.content).toMatch(/^path: /);
    expect(e.is_error).toBe(false);
    expect(f).toMatchObject({ tool_use_id: 'f', content: '1', is_error: false });
    // Without an id there is nothing to answer a model with.
    const noId = await call(sid, { name: 'bash', input: { command: 'true' } });
    expect(noId.status).toBe(400);
  });

  it('reads descriptions from the TOML file on each request and falls back when it is invalid', async () => {
    const describe = async (): Promise<string> =>
      (await engine.request('GET', '/v1/tools')).body.tools.find((t: any) => t.name === 'bash').description;
    const builtin = await describe();
    writeFileSync(toolsFile, '[bash]\ndescription = "Shell for the build agent."\n');
    expect(await describe()).toBe('Shell for the build agent.');
    writeFileSync(toolsFile, '[bash\ndescription = ');
    expect(await describe()).toBe(builtin);
    expect((await engine.request('GET', '/v1/tools?format=xml')).status).toBe(400);
  });
});
