import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import WebSocket from 'ws';
import { freePort } from './engine-process';
import { eventually } from './host-probes';
import { venvBin } from './runtime-dir';

/**
 * The pinned Jupyter clients of the client venv (`bash scripts/client-tools.sh`: jupyter_server, nbclient,
 * nbformat, jupyter_client) as test/e2e/jupyter-gateway.e2e-spec.ts drives them: the scripts of test/jupyter run
 * with the venv's python, a `jupyter server --gateway-url=…` process, and a WebSocket upgrade's answer.
 */
const REPO = path.join(__dirname, '..', '..');
const VENV_BIN = venvBin('client-venv');
const PYTHON = path.join(VENV_BIN, 'python');
const JUPYTER_SERVER = path.join(VENV_BIN, 'jupyter-server');
export const JUPYTER_SCRIPTS = path.join(REPO, 'test', 'jupyter');

/** Fails naming the script that installs the clients when they are missing (with `extra` scripts of the venv's bin). */
export function requireJupyterClients(extra: string[] = []): void {
  const missing = [PYTHON, JUPYTER_SERVER, ...extra.map((name) => path.join(VENV_BIN, name))].filter(
    (f) => !existsSync(f),
  );
  if (missing.length > 0) {
    throw new Error(
      `The pinned Jupyter clients are not installed (${missing.join(', ')}): run \`bash scripts/client-tools.sh\``,
    );
  }
}

/** The environment of the Python clients: no proxy (all they reach is on loopback), Jupyter's dirs of their own. */
function clientEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: home,
    JUPYTER_CONFIG_DIR: path.join(home, 'config'),
    JUPYTER_DATA_DIR: path.join(home, 'data'),
    JUPYTER_RUNTIME_DIR: path.join(home, 'runtime'),
    JUPYTER_PLATFORM_DIRS: '1',
    PYTHONUNBUFFERED: '1',
  };
  for (const name of Object.keys(env)) if (/^(https?|all|no)_proxy$/i.test(name)) delete env[name];
  return env;
}

/** Runs a script of test/jupyter with the venv's python; resolves with the JSON object it prints last. */
export function jupyterScript<T = any>(
  home: string,
  script: string,
  args: string[],
  timeoutMs: number,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [path.join(JUPYTER_SCRIPTS, script), ...args], {
      env: clientEnv(home),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').at(-1) ?? '';
      if (code !== 0) return reject(new Error(`${script} ended ${signal ?? code}:\n${stderr}\n${stdout}`));
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        reject(new Error(`${script} printed no JSON:\n${stdout}\n${stderr}`));
      }
    });
  });
}

/**
 * `jupyter server --gateway-url=<session's Jupyter URL>` on loopback, with a token of its own; `app: 'lab'` starts
 * `jupyter lab` (JupyterLab, a jupyter_server application) with the same options instead.
 */
export class JupyterServer {
  private log = '';

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.stderr?.on('data', (d: Buffer) => (this.log = (this.log + d.toString()).slice(-20_000)));
  }

  static async start(
    home: string,
    gatewayUrl: string,
    auth: { key: string; token: string },
    options: { app?: 'server' | 'lab'; args?: string[] } = {},
  ): Promise<JupyterServer> {
    const port = await freePort();
    const app = options.app ?? 'server';
    const child = spawn(
      app === 'lab' ? path.join(VENV_BIN, 'jupyter-lab') : JUPYTER_SERVER,
      [
        `--gateway-url=${gatewayUrl}`,
        `--GatewayClient.auth_token=${auth.key}`,
        '--ServerApp.ip=127.0.0.1',
        `--ServerApp.port=${port}`,
        '--ServerApp.port_retries=0',
        '--ServerApp.open_browser=False',
        `--IdentityProvider.token=${auth.token}`,
        `--ServerApp.root_dir=${home}`,
        // CI runs the tests as root, where Jupyter refuses to start unless told.
        ...(process.getuid?.() === 0 ? ['--ServerApp.allow_root=True'] : []),
        ...(options.args ?? []),
      ],
      { env: clientEnv(home), stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const server = new JupyterServer(child, `http://127.0.0.1:${port}`);
    const up = await eventually(
      async () => {
        if (child.exitCode !== null) return true;
        const res = await fetch(`${server.url}/api/status`, {
          headers: { authorization: `token ${auth.token}` },
        }).catch(() => undefined);
        return res?.status === 200;
      },
      30_000,
      200,
    );
    if (!up || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`jupyter ${app} did not start:\n${server.log}`);
    }
    return server;
  }

  /** The end of what it logged (stderr), for a failure's message. */
  logTail(): string {
    return this.log;
  }

  /** Stops it (its kernels are deleted through the gateway as it shuts down). */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    const killer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  }
}

/** What server_kernel.py prints. */
export interface ExecuteStep {
  reply: { channel: string; msg_type: string; content: any; metadata: any; before_idle: boolean; at: number };
  /** Each IOPub message: its type, its content, and the seconds after the request it arrived. */
  iopub: Array<[string, any, number]>;
}
export interface ServerRun {
  kernel_id: string;
  steps: Array<ExecuteStep & { status?: number; body?: any }>;
}

export const typesOf = (step: ExecuteStep): string[] =>
  step.iopub.map(([type, content]) => (type === 'status' ? `status:${content.execution_state}` : type));
export const streamOf = (step: ExecuteStep): string =>
  step.iopub
    .filter(([type]) => type === 'stream')
    .map(([, c]) => c.text as string)
    .join('');

/** How a WebSocket upgrade to the engine is answered: opened, or refused with a status and the error body. */
export function upgrade(
  url: string,
  headers: Record<string, string>,
): Promise<{ opened: true } | { opened: false; status: number; body: any; challenge?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => {
      ws.close();
      resolve({ opened: true });
    });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () =>
        resolve({
          opened: false,
          status: res.statusCode ?? 0,
          body: JSON.parse(text),
          ...(res.headers['www-authenticate'] && { challenge: String(res.headers['www-authenticate']) }),
        }),
      );
    });
    ws.on('error', (err) => {
      if (!/Unexpected server response/.test(err.message)) reject(err);
    });
  });
}

/** An open channels WebSocket: what it received (parsed), a wait for a message, and its close code. */
export interface Channels {
  received: any[];
  send(data: string | Buffer, options?: { binary: boolean }): void;
  /** Resolves true once a received message matches (false after 10 s). */
  until(match: (message: any) => boolean): Promise<boolean>;
  closed: Promise<number>;
}

/** Opens a kernel's channels WebSocket on the engine directly (rejects when the upgrade is refused). */
export function channels(url: string, headers: Record<string, string>): Promise<Channels> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const received: any[] = [];
    ws.on('message', (data: Buffer) => received.push(JSON.parse(data.toString())));
    const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
    ws.on('error', reject);
    ws.on('open', () =>
      resolve({
        received,
        send: (data, options) => ws.send(data, options ?? {}),
        until: (match) => eventually(() => received.some(match), 10_000),
        closed,
      }),
    );
  });
}
