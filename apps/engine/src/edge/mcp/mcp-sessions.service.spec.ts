import { Logger } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '@switchyard/common';
import { NotFoundError } from '@switchyard/common';
import express from 'express';
import type * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Session } from '../../state/sessions/session.model';
import type { SessionEndHook, SessionsService } from '../../session/sessions/sessions.service';
import type { McpServerFactory } from './mcp-server.factory';
import { McpSessions } from './mcp-sessions.service';

/** Engine sessions in memory: records what was created, touched and ended, and runs end hooks as the real one. */
class FakeSessions {
  readonly live = new Map<string, Session>();
  readonly ended: string[] = [];
  readonly touched: string[] = [];
  private readonly hooks: SessionEndHook[] = [];
  private next = 0;

  create(tenant: string): Promise<Session> {
    const s = { id: `ses_${++this.next}`, tenant } as Session;
    this.live.set(s.id, s);
    return Promise.resolve(s);
  }
  get(tenant: string, id: string): Session {
    const s = this.live.get(id);
    if (!s || s.tenant !== tenant) throw new NotFoundError(`session ${id} not found`);
    return s;
  }
  isLive(id: string): boolean {
    return this.live.has(id);
  }
  touch(s: Session): void {
    this.touched.push(s.id);
  }
  onSessionEnd(hook: SessionEndHook): void {
    this.hooks.push(hook);
  }
  async end(id: string): Promise<void> {
    this.live.delete(id);
    this.ended.push(id);
    for (const hook of this.hooks) await hook(id, 'deleted');
  }
}

class FakeClock implements Clock {
  ms = 0;
  now = (): Date => new Date(this.ms);
  monotonic = (): number => this.ms;
}

/** Servers with one tool each, so a listing proves which engine session answered. */
const servers = {
  create: (_tenant: string, engineSessionId: string) => {
    const server = new Server({ name: 'test', version: '1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [{ name: engineSessionId, inputSchema: { type: 'object' as const } }],
    }));
    return server;
  },
} as unknown as McpServerFactory;

const config = { sessions: { defaultTtlSeconds: 60, sweepIntervalMs: 3_600_000 } } as EngineConfig;
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'spec', version: '1' } },
};

// Logs of opened, closed and failed sessions are the code's business, not the test output's.
beforeAll(() => Logger.overrideLogger(false));

describe('McpSessions', () => {
  let sessions: FakeSessions;
  let clock: FakeClock;
  let mcp: McpSessions;
  let server: http.Server;
  let url: string;

  beforeEach(async () => {
    sessions = new FakeSessions();
    clock = new FakeClock();
    mcp = new McpSessions(config, clock, sessions as unknown as SessionsService, servers);
    mcp.onModuleInit();
    const app = express();
    app.use(express.json());
    // The tenant comes from a header here; in the engine, from ApiKeyGuard.
    app.all('/mcp', (req, res) => void mcp.handle(String(req.headers['x-tenant'] ?? 'a'), req, res));
    await new Promise<void>((resolve) => {
      server = app.listen(0, '127.0.0.1', () => resolve());
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterEach(async () => {
    await mcp.beforeApplicationShutdown();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        ...headers,
      },
      body: JSON.stringify(body),
    });

  /** Initializes an MCP session as `tenant`; answers its id. */
  async function open(tenant = 'a'): Promise<string> {
    const res = await post(INITIALIZE, { 'x-tenant': tenant });
    expect(res.status).toBe(200);
    await res.text();
    const id = res.headers.get('mcp-session-id');
    if (!id) throw new Error('no session id');
    await post(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'mcp-session-id': id, 'x-tenant': tenant },
    );
    return id;
  }

  /** `tools/list` in an MCP session: its status and the one tool's name (the engine session). */
  async function list(id: string, tenant = 'a'): Promise<{ status: number; engineSession?: string }> {
    const res = await post(
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { 'mcp-session-id': id, 'x-tenant': tenant },
    );
    const text = await res.text();
    const engineSession = /"name":"(ses_\d+)"/.exec(text)?.[1];
    return { status: res.status, engineSession };
  }

  it('opens one engine session per MCP session, for the tenant that initialized it', async () => {
    const first = await open('a');
    const second = await open('b');
    expect([...sessions.live.values()].map((s) => [s.id, s.tenant])).toEqual([
      ['ses_1', 'a'],
      ['ses_2', 'b'],
    ]);
    expect(mcp.engineSessionOf('a', first)).toBe('ses_1');
    expect(mcp.engineSessionOf('b', second)).toBe('ses_2');
    expect(await list(first, 'a')).toEqual({ status: 200, engineSession: 'ses_1' });
    expect(sessions.touched).toContain('ses_1');
  });

  it("answers another tenant's MCP session as unknown (404), and a request without a session id 400", async () => {
    const id = await open('a');
    expect((await list(id, 'b')).status).toBe(404);
    expect(mcp.engineSessionOf('b', id)).toBeUndefined();
    expect((await list('no-such-session')).status).toBe(404);
    const noId = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
    expect(noId.status).toBe(400);
    expect(await noId.json()).toMatchObject({
      jsonrpc: '2.0',
      error: { message: expect.stringContaining('Mcp-Session-Id') },
    });
    expect(sessions.ended).toEqual([]);
  });

  it('a DELETE closes the MCP session and ends its engine session', async () => {
    const id = await open();
    const res = await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': id } });
    expect(res.status).toBe(200);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sessions.ended).toEqual(['ses_1']);
    expect(mcp.size).toBe(0);
    expect((await list(id)).status).toBe(404);
  });

  it('an engine session that ends first closes its MCP session, without ending it twice', async () => {
    const id = await open();
    await sessions.end('ses_1');
    expect(mcp.size).toBe(0);
    expect((await list(id)).status).toBe(404);
    expect(sessions.ended).toEqual(['ses_1']);
  });

  it('closes MCP sessions idle for the session TTL, and only those', async () => {
    const idle = await open();
    clock.ms += 30_000;
    const busy = await open();
    clock.ms += 30_000;
    await mcp.sweep();
    expect(sessions.ended).toEqual(['ses_1']);
    expect((await list(idle)).status).toBe(404);
    expect((await list(busy)).status).toBe(200);
    clock.ms += 59_999;
    await mcp.sweep();
    expect(sessions.ended).toEqual(['ses_1']);
  });

  it('a refused initialize leaves no engine session', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify(INITIALIZE),
    });
    expect(res.status).toBe(406);
    expect(sessions.ended).toEqual(['ses_1']);
    expect(sessions.live.size).toBe(0);
    expect(mcp.size).toBe(0);
  });

  it('ends every open session at shutdown', async () => {
    await open('a');
    await open('b');
    await mcp.beforeApplicationShutdown();
    expect(sessions.ended.sort()).toEqual(['ses_1', 'ses_2']);
    expect(mcp.size).toBe(0);
  });
});
