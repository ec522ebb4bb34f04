import { type ChildProcess, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';

/**
 * The built engine (`npm run build`), run as a real process so a test can SIGKILL it. SWITCHYARD_TEST_ENGINE_MAIN
 * names another build (e.g. one of an earlier version, to see a new test fail on it).
 */
export const ENGINE_MAIN =
  process.env.SWITCHYARD_TEST_ENGINE_MAIN ??
  path.join(__dirname, '..', '..', 'dist', 'apps', 'engine', 'src', 'main.js');

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });

/** One engine process on 127.0.0.1:`port`, with a tiny JSON client. */
export class EngineProcess {
  private stderr = '';
  /** How the process ended: the signal's name, or `exit <code>`. */
  readonly exited: Promise<string>;
  /** Resolves once the process has exited and its stderr has been read to the end. */
  readonly closed: Promise<void>;

  private constructor(
    readonly child: ChildProcess,
    readonly baseUrl: string,
  ) {
    child.stderr?.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-8000);
    });
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)),
    );
    this.closed = new Promise((resolve) => child.once('close', () => resolve()));
  }

  /** Starts the engine and resolves once `/health` answers (rejects after 30 s, killing it). */
  static async start(
    dataDir: string,
    port: number,
    env: Record<string, string> = {},
  ): Promise<EngineProcess> {
    const engine = EngineProcess.spawn(dataDir, port, env);
    const child = engine.child;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && child.exitCode === null) {
      try {
        if ((await fetch(`${engine.baseUrl}/health`)).ok) return engine;
      } catch {
        /* not up yet */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
    throw new Error(`engine did not start: ${engine.stderr}`);
  }

  /** Starts the engine without waiting for it to answer: for a start-up that must fail. */
  static spawn(dataDir: string, port: number, env: Record<string, string> = {}): EngineProcess {
    const child = spawn(process.execPath, [ENGINE_MAIN], {
      env: {
        ...process.env,
        PORT: String(port),
        SWITCHYARD_DATA_DIR: dataDir,
        SWITCHYARD_LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    return new EngineProcess(child, `http://127.0.0.1:${port}`);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The engine's recent stderr, for failure messages. */
  get log(): string {
    return this.stderr;
  }

  async request<T = any>(
    method: string,
    urlPath: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.baseUrl}${urlPath}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  async createSession(body: Record<string, unknown> = {}): Promise<string> {
    const res = await this.request<{ id: string }>('POST', '/v1/sessions', body);
    if (res.status !== 201) throw new Error(`session create failed: ${res.status}`);
    return res.body.id;
  }

  /** Sends a signal and waits for the exit. */
  async stop(signal: NodeJS.Signals): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill(signal);
    await this.exited;
  }
}
