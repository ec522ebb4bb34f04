import { SwitchyardClient, type SwitchyardClientOptions } from './client';
import { SwitchyardError } from './errors';
import { Execution } from './execution';
import { Commands } from './sandbox-commands';
import { SandboxEvents } from './sandbox-events';
import { Files } from './sandbox-files';
import type { Checkpoint, CheckpointRestore, CreateSessionRequest, Session } from './types';

/**
 * What `Sandbox.create` takes: the session's settings (`template`, `metadata`, `ttlSeconds`, `policy`, `network`…)
 * and the client's (`baseUrl`, `apiKey`, `fetch`; by precedence, these > `SWITCHYARD_URL`/`SWITCHYARD_API_KEY` >
 * `http://127.0.0.1:8080`), or a `client` to share.
 */
export type SandboxOptions = CreateSessionRequest & SwitchyardClientOptions & { client?: SwitchyardClient };

export interface RunCodeOptions {
  /** Default `python`. */
  language?: 'python' | 'node' | 'bash';
  /**
   * `session` (default): the session's kernel for the language, which keeps variables, imports and functions between
   * cells and answers rich results; `fresh`: a new interpreter for this run.
   */
  state?: 'session' | 'fresh';
  /** Wall-clock limit (engine default 30 s). */
  timeoutMs?: number;
  /** Extra environment variables. */
  env?: Record<string, string>;
}

const clientOf = (options: SwitchyardClientOptions & { client?: SwitchyardClient }): SwitchyardClient =>
  options.client ?? new SwitchyardClient(options);

/**
 * A session of the engine as a sandbox: `runCode` for kernel cells with rich results, `commands` for the shell,
 * `files` for the workspace, `checkpoint`/`restore`/`fork`, `kill`. `await using sbx = await Sandbox.create()` kills
 * it at the end of the block.
 */
export class Sandbox implements AsyncDisposable {
  readonly files: Files;
  readonly commands: Commands;
  private readonly events: SandboxEvents;

  private constructor(
    readonly client: SwitchyardClient,
    readonly session: Session,
  ) {
    this.events = new SandboxEvents(client, session.id);
    this.files = new Files(client, session.id);
    this.commands = new Commands(client, session.id, this.events);
  }

  /** The session id (`ses_…`): `Sandbox.connect(id)` attaches to it again. */
  get id(): string {
    return this.session.id;
  }

  /** Creates a session (`POST /v1/sessions`). */
  static async create(options: SandboxOptions = {}): Promise<Sandbox> {
    const { baseUrl, apiKey, fetch, client: given, ...session } = options;
    const client = clientOf({ baseUrl, apiKey, fetch, client: given });
    return new Sandbox(client, await client.sessions.create(session));
  }

  /** Attaches to an existing session; 404 `SwitchyardError` when there is none. */
  static async connect(
    sessionId: string,
    options: SwitchyardClientOptions & { client?: SwitchyardClient } = {},
  ): Promise<Sandbox> {
    const client = clientOf(options);
    return new Sandbox(client, await client.sessions.get(sessionId));
  }

  /** Runs a cell (`state: 'session'` by default: variables survive between calls). A failing cell is an answer. */
  async runCode(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    const action = await this.client.actions.run(this.id, {
      type: 'code',
      language: options.language ?? 'python',
      code,
      state: options.state ?? 'session',
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      ...(options.env !== undefined && { env: options.env }),
    });
    return new Execution(action);
  }

  /** A checkpoint of the workspace as it is now, `name` as its label. */
  checkpoint(name?: string): Promise<Checkpoint> {
    return this.client.checkpoints.create(this.id, name === undefined ? {} : { label: name });
  }

  /** Puts the workspace back as it was at the checkpoint. */
  restore(checkpoint: Checkpoint | string): Promise<CheckpointRestore> {
    return this.client.checkpoints.restore(
      this.id,
      typeof checkpoint === 'string' ? checkpoint : checkpoint.id,
    );
  }

  /** A new sandbox whose workspace is a copy of this one: now, or at a checkpoint. */
  async fork(checkpoint?: Checkpoint | string): Promise<Sandbox> {
    const checkpointId = typeof checkpoint === 'string' ? checkpoint : checkpoint?.id;
    const session = await this.client.sessions.fork(
      this.id,
      checkpointId === undefined ? {} : { checkpointId },
    );
    return new Sandbox(this.client, session);
  }

  /** Deletes the session, its workspace and its processes; a session already gone is not an error. */
  async kill(): Promise<void> {
    this.events.close();
    try {
      await this.client.sessions.delete(this.id);
    } catch (error) {
      if (!(error instanceof SwitchyardError && error.status === 404)) throw error;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }
}
