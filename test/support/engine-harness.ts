import type { INestApplication } from '@nestjs/common';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import * as os from 'node:os';
import * as path from 'node:path';
import { createEngineApp } from '../../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../../apps/engine/src/platform/config/engine-config';
import { SessionsService } from '../../apps/engine/src/session/sessions/sessions.service';
import { removeDataDir } from './data-dir';

/** Collects the engine's JSON log lines, parsed. */
export class LogCapture {
  readonly lines: Array<Record<string, unknown>> = [];
  readonly raw: string[] = [];
  readonly stream = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        this.raw.push(line);
        try {
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          /* not JSON: kept in raw only */
        }
      }
      done();
    },
  });
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A real engine (real bubblewrap, real SQLite files) listening on 127.0.0.1, driven over HTTP. */
export class EngineHarness {
  private constructor(
    readonly app: INestApplication,
    readonly baseUrl: string,
    readonly dataDir: string,
    private readonly ownsDataDir: boolean,
    private token?: string,
  ) {}

  static async start(
    env: Record<string, string> = {},
    options: { dataDir?: string; logs?: LogCapture } = {},
  ): Promise<EngineHarness> {
    const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-'));
    const config = loadEngineConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'error', ...env });
    const app = await createEngineApp(config, { logStream: options.logs?.stream });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    return new EngineHarness(app, `http://127.0.0.1:${port}`, dataDir, !options.dataDir);
  }

  /** Sends requests with this bearer token from now on (undefined: none). */
  as(token: string | undefined): this {
    this.token = token;
    return this;
  }

  async request<T = any>(
    method: string,
    urlPath: string,
    body?: unknown,
    init: { raw?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let payload: string | undefined = init.raw;
    if (body !== undefined) payload = JSON.stringify(body);
    if (payload !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(`${this.baseUrl}${urlPath}`, { method, headers, body: payload });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async createSession(body: Record<string, unknown> = {}): Promise<string> {
    const res = await this.request('POST', '/v1/sessions', body);
    if (res.status !== 201)
      throw new Error(`session create failed: ${res.status} ${JSON.stringify(res.body)}`);
    return (res.body as { id: string }).id;
  }

  /** POST an action and expect the request itself to succeed (200). */
  async action<T = any>(sessionId: string, body: Record<string, unknown>): Promise<T> {
    const res = await this.request('POST', `/v1/sessions/${sessionId}/actions`, body);
    if (res.status !== 200) throw new Error(`action failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as T;
  }

  /** Waits for the background teardowns of ended sessions (a DELETE answers before their containers go). */
  tornDown(): Promise<void> {
    return this.app.get(SessionsService).settled();
  }

  workspaceOf(sessionId: string): string {
    return path.join(this.dataDir, 'workspaces', sessionId);
  }

  /** Closes the engine once; later calls wait for that close. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.app.close();
      if (this.ownsDataDir) removeDataDir(this.dataDir);
    })();
    return this.stopped;
  }

  private stopped?: Promise<void>;
}
