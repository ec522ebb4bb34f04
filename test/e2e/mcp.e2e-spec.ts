import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BrowserSite } from '../support/browser-site';
import { removeDataDir } from '../support/data-dir';
import { EngineHarness } from '../support/engine-harness';

/**
 * `/mcp` driven by the MCP SDK's own client over Streamable HTTP: the engine's tools, run in one engine session per
 * MCP session, with the REST API's bearer keys. Browser pages come from a server on 127.0.0.2, allowlisted.
 */
jest.setTimeout(60_000);

const ACCEPT = 'application/json, text/event-stream';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The engine session named in the server's instructions. */
  engineSession: string;
}

async function connect(engine: EngineHarness, token?: string): Promise<Connected> {
  const transport = new StreamableHTTPClientTransport(new URL(`${engine.baseUrl}/mcp`), {
    requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : undefined,
  });
  const client = new Client({ name: 'switchyard-e2e', version: '1.0.0' });
  await client.connect(transport);
  const engineSession = /engine session (ses_[0-9a-f]+)/.exec(client.getInstructions() ?? '')?.[1];
  if (!engineSession) throw new Error(`no engine session in instructions: ${client.getInstructions()}`);
  return { client, transport, engineSession };
}

const text = (r: CallToolResult): string =>
  r.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

const call = async (c: Connected, name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
  (await c.client.callTool({ name, arguments: args })) as CallToolResult;

/** A raw request to /mcp, for what the SDK client never sends. */
async function raw(
  engine: EngineHarness,
  method: string,
  init: { body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${engine.baseUrl}/mcp`, {
    method,
    headers: { accept: ACCEPT, 'content-type': 'application/json', ...init.headers },
    body: init.body,
  });
  const body = await res.text();
  try {
    return { status: res.status, body: JSON.parse(body), headers: res.headers };
  } catch {
    return { status: res.status, body, headers: res.headers };
  }
}

describe('MCP over Streamable HTTP (open engine)', () => {
  let engine: EngineHarness;
  let site: BrowserSite;
  let mcp: Connected;

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start({
      SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
      SWITCHYARD_BROWSER_TIMEOUT_MS: '15000',
    });
    mcp = await connect(engine);
  });
  afterAll(async () => {
    await mcp?.client.close();
    await engine?.stop();
    await site?.stop();
  });

  it('initializes: server info, tools capability, and an engine session named in the instructions', async () => {
    expect(mcp.client.getServerVersion()).toMatchObject({ name: 'switchyard' });
    expect(mcp.client.getServerCapabilities()).toMatchObject({ tools: {} });
    expect(mcp.transport.sessionId).toEqual(expect.any(String));
    const session = await engine.request('GET', `/v1/sessions/${mcp.engineSession}`);
    expect(session.status).toBe(200);
    expect(session.body.metadata).toEqual({ createdBy: 'mcp' });
    // JSON-RPC methods, not REST operations: documented in docs/tools-and-mcp.md, not in OpenAPI.
    const doc = (await engine.request('GET', '/docs-json')).body;
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/mcp'))).toEqual([]);
  });

  it("lists the engine's tool catalog with each tool's JSON schema as inputSchema", async () => {
    const { tools } = await mcp.client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ['bash', 'python', 'read', 'write', 'browser_navigate', 'browser_screenshot']) {
      expect(byName.get(name)).toBeDefined();
    }
    const rest = await engine.request('GET', '/v1/tools?format=anthropic');
    expect(tools.map((t) => t.name)).toEqual(rest.body.tools.map((t: { name: string }) => t.name));
    const bash = byName.get('bash')!;
    expect(bash.description).toContain('bash');
    expect(bash.inputSchema).toMatchObject({
      type: 'object',
      properties: { command: { type: 'string' } },
      required: ['command'],
    });
    expect(byName.get('browser_navigate')!.inputSchema.required).toEqual(['url']);
  });

  it('runs bash and python in the engine session, with the same text as the tool-calls API', async () => {
    const bash = await call(mcp, 'bash', { command: 'echo hi-from-mcp' });
    expect(bash.isError).toBe(false);
    expect(text(bash)).toBe('[stdout]\nhi-from-mcp\n\n[exit_code]\n0');
    expect(bash._meta).toEqual({ 'switchyard/sessionId': mcp.engineSession });

    const python = await call(mcp, 'python', { code: 'print(6 * 7)' });
    expect(python.isError).toBe(false);
    expect(text(python)).toContain('[stdout]\n42\n');

    const rest = await engine.request('POST', `/v1/sessions/${mcp.engineSession}/tool-calls`, {
      id: 'c1',
      name: 'bash',
      input: { command: 'echo hi-from-mcp' },
    });
    expect(rest.body.content).toBe(text(bash));
  });

  it('writes a file, reads it back, and sees it from bash in the same workspace', async () => {
    const write = await call(mcp, 'write', { path: 'notes/mcp.txt', content: 'written over MCP\n' });
    expect(write.isError).toBe(false);
    const read = await call(mcp, 'read', { path: 'notes/mcp.txt' });
    expect(read.isError).toBe(false);
    expect(text(read)).toBe('written over MCP\n');
    const cat = await call(mcp, 'bash', { command: 'cat notes/mcp.txt' });
    expect(text(cat)).toContain('written over MCP');
  });

  it('drives the browser and returns a screenshot as an image block', async () => {
    const nav = await call(mcp, 'browser_navigate', { url: site.url('/') });
    expect(nav.isError).toBe(false);
    expect(text(nav)).toContain('Switchyard test home');

    const shot = await call(mcp, 'browser_screenshot', { path: 'shots/mcp.png' });
    expect(shot.isError).toBe(false);
    expect(text(shot)).toContain('shots/mcp.png');
    const images = shot.content.filter((c) => c.type === 'image');
    expect(images).toHaveLength(1);
    const image = images[0] as { data: string; mimeType: string };
    expect(image.mimeType).toBe('image/png');
    const png = Buffer.from(image.data, 'base64');
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect(png.length).toBeGreaterThan(100);
  });

  it('answers failures as isError results, not protocol errors', async () => {
    const exit = await call(mcp, 'bash', { command: 'echo failing >&2; exit 3' });
    expect(exit.isError).toBe(true);
    expect(text(exit)).toContain('[exit_code]\n3');

    const unknown = await call(mcp, 'no_such_tool', {});
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain('unknown tool "no_such_tool"');

    const bad = await call(mcp, 'bash', { command: 42 });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toContain('command');
  });

  it('refuses bad requests with 4xx: no session id, unknown session id, malformed JSON, not JSON-RPC', async () => {
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const noId = await raw(engine, 'POST', { body: list });
    expect(noId.status).toBe(400);
    expect(noId.body.error.message).toContain('Mcp-Session-Id');

    const unknown = await raw(engine, 'POST', { body: list, headers: { 'mcp-session-id': 'nope' } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain('Session not found');

    const malformed = await raw(engine, 'POST', { body: '{"jsonrpc":' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('MALFORMED_JSON');

    const notRpc = await raw(engine, 'POST', {
      body: JSON.stringify({ hello: 'world' }),
      headers: { 'mcp-session-id': mcp.transport.sessionId! },
    });
    expect(notRpc.status).toBe(400);

    const getNoId = await raw(engine, 'GET');
    expect(getNoId.status).toBe(400);
    const deleteUnknown = await raw(engine, 'DELETE', { headers: { 'mcp-session-id': 'nope' } });
    expect(deleteUnknown.status).toBe(404);

    // The session still works after all that.
    expect((await call(mcp, 'bash', { command: 'echo still-here' })).isError).toBe(false);
  });

  it('a refused initialize leaves no engine session behind', async () => {
    const before = (await engine.request('GET', '/v1/sessions')).body;
    const res = await raw(engine, 'POST', {
      body: JSON.stringify(INITIALIZE),
      headers: { accept: 'application/json' },
    });
    expect(res.status).toBe(406);
    expect((await engine.request('GET', '/v1/sessions')).body).toEqual(before);
  });

  it('closing the MCP session (DELETE) deletes its engine session', async () => {
    const other = await connect(engine);
    expect((await call(other, 'bash', { command: 'echo x' })).isError).toBe(false);
    expect((await engine.request('GET', `/v1/sessions/${other.engineSession}`)).status).toBe(200);
    const mcpId = other.transport.sessionId!;
    await other.transport.terminateSession();
    await other.client.close();
    expect((await engine.request('GET', `/v1/sessions/${other.engineSession}`)).status).toBe(404);
    const after = await raw(engine, 'POST', {
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
      headers: { 'mcp-session-id': mcpId },
    });
    expect(after.status).toBe(404);
  });

  it('deleting the engine session through REST closes the MCP session', async () => {
    const other = await connect(engine);
    const mcpId = other.transport.sessionId!;
    expect((await engine.request('DELETE', `/v1/sessions/${other.engineSession}`)).status).toBe(204);
    const after = await raw(engine, 'POST', {
      body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list' }),
      headers: { 'mcp-session-id': mcpId },
    });
    expect(after.status).toBe(404);
    await other.client.close();
  });
});

describe('MCP with API keys', () => {
  const keyA = 'mcp-key-aaaaaaaaaaaaaaaa';
  const keyB = 'mcp-key-bbbbbbbbbbbbbbbb';
  let engine: EngineHarness;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-mcp-'));
    engine = await EngineHarness.start({ SWITCHYARD_API_KEYS: `${keyA},${keyB}` }, { dataDir });
  });
  afterAll(async () => {
    await engine?.stop();
    if (dataDir) removeDataDir(dataDir);
  });

  it("refuses a client without a valid key with 401 and the engine's error body", async () => {
    await expect(connect(engine)).rejects.toMatchObject({ code: 401, message: /UNAUTHENTICATED/ });
    await expect(connect(engine, 'mcp-key-not-configured-000')).rejects.toMatchObject({
      code: 401,
      message: /invalid bearer token/,
    });
    const res = await raw(engine, 'POST', { body: JSON.stringify(INITIALIZE) });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: 'UNAUTHENTICATED', message: 'missing bearer token' } });
  });

  it('says how to authenticate on every 401 of /mcp: WWW-Authenticate: Bearer', async () => {
    for (const method of ['POST', 'GET', 'DELETE']) {
      const missing = await raw(
        engine,
        method,
        method === 'POST' ? { body: JSON.stringify(INITIALIZE) } : {},
      );
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="switchyard"');
    }
    const invalid = await raw(engine, 'POST', {
      body: JSON.stringify(INITIALIZE),
      headers: { authorization: 'Bearer mcp-key-not-configured-000' },
    });
    expect(invalid.status).toBe(401);
    expect(invalid.headers.get('www-authenticate')).toMatch(
      /^Bearer realm="switchyard", error="invalid_token"/,
    );
  });

  it("runs as the key's tenant; another key cannot use the MCP session", async () => {
    const a = await connect(engine, keyA);
    expect((await call(a, 'bash', { command: 'echo tenant-a' })).isError).toBe(false);
    // The engine session belongs to key A's tenant.
    expect((await engine.as(keyA).request('GET', `/v1/sessions/${a.engineSession}`)).status).toBe(200);
    expect((await engine.as(keyB).request('GET', `/v1/sessions/${a.engineSession}`)).status).toBe(404);

    const list = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
    const asB = await raw(engine, 'POST', {
      body: list,
      headers: { authorization: `Bearer ${keyB}`, 'mcp-session-id': a.transport.sessionId! },
    });
    expect(asB.status).toBe(404);
    const deleteAsB = await raw(engine, 'DELETE', {
      headers: { authorization: `Bearer ${keyB}`, 'mcp-session-id': a.transport.sessionId! },
    });
    expect(deleteAsB.status).toBe(404);
    const noKey = await raw(engine, 'POST', {
      body: list,
      headers: { 'mcp-session-id': a.transport.sessionId! },
    });
    expect(noKey.status).toBe(401);
    // Still A's, and still open.
    expect((await call(a, 'bash', { command: 'echo still-a' })).isError).toBe(false);
    engine.as(undefined);
    await a.client.close();
  });

  it('ends the engine sessions of open MCP sessions when the engine shuts down', async () => {
    const a = await connect(engine, keyA);
    expect((await call(a, 'write', { path: 'f.txt', content: 'x' })).isError).toBe(false);
    expect(existsSync(engine.workspaceOf(a.engineSession))).toBe(true);
    await engine.stop();
    expect(existsSync(engine.workspaceOf(a.engineSession))).toBe(false);
    await a.client.close();
  });
});

describe('MCP: skills and policies', () => {
  let engine: EngineHarness;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-mcp-policy-'));
    const policy = path.join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ rules: [{ effect: 'deny', match: { type: 'browser' } }] }));
    engine = await EngineHarness.start({
      SWITCHYARD_POLICY_FILE: policy,
      SWITCHYARD_SKILLS_DIR: path.join(__dirname, '..', '..', 'examples', 'skills'),
    });
  });
  afterAll(async () => {
    await engine.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the skills beside the built-in tools, leaves out what the policy denies, and calls a skill', async () => {
    const c = await connect(engine);
    const names = (await c.client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['bash', 'read', 'word-count', 'file-report']));
    expect(names.filter((n) => n.startsWith('browser_'))).toEqual([]);
    expect((await call(c, 'write', { path: 'n.txt', content: 'a b c\n' })).isError).toBe(false);
    const counted = await call(c, 'word-count', { path: 'n.txt' });
    expect(counted.isError).toBe(false);
    expect(JSON.parse(text(counted))).toEqual({ skill: 'word-count', value: { lines: 1, words: 3 } });
    const refused = await call(c, 'browser_navigate', { url: 'https://example.org/' });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('browser_navigate is blocked by the engine policy');
    await c.client.close();
  });
});
