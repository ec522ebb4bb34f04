import { PassThrough, type Duplex, type Readable, type Writable } from 'node:stream';
import { Logger } from '@nestjs/common';
import type Dockerode from 'dockerode';
import type { ContainerCreateOptions } from 'dockerode';
import {
  DockerApiError,
  DockerError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
} from './docker.errors';

/**
 * Injection token of the engine's one `DockerClient`. The container tiers (one-off and pooled) share the instance
 * provided by `DockerModule`, so there is one connection setting and one place to swap in a fake.
 */
export const DOCKER_CLIENT = Symbol('switchyard:sandbox:docker-client');

export interface DockerCallOptions {
  /** Gives up on the call (it rejects with `DockerTimeoutError`). */
  signal?: AbortSignal;
  /** Overrides the client's default deadline for this call. */
  timeoutMs?: number;
}

/** A container's stdio over one attach connection, stdout and stderr already demultiplexed. */
export interface ContainerStreams {
  /** The container's stdin; `end()` closes it (the container needs `OpenStdin` and `StdinOnce`). */
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves once the connection is closed, i.e. all output has arrived or it was destroyed. Never rejects. */
  readonly closed: Promise<void>;
  /** Drops the connection; whatever the container writes afterwards is lost. Idempotent. */
  destroy(): void;
}

export interface ContainerExit {
  /** Exit status of the container's main process; 128 + n when it died of signal n. */
  statusCode: number;
}

export interface ContainerState {
  id: string;
  /** Docker's status: `created`, `running`, `exited`, … */
  status: string;
  running: boolean;
  exitCode: number;
  /** The kernel OOM killer acted inside the container's memory cgroup. */
  oomKilled: boolean;
  labels: Record<string, string>;
}

export interface ContainerSummary {
  id: string;
  /** Docker's state: `created`, `running`, `exited`, … */
  state: string;
  labels: Record<string, string>;
}

/** The OCI runtimes a Docker engine can start containers with (`GET /info`). */
export interface DockerRuntimes {
  /** Names of the registered runtimes: `runc`, and e.g. `runsc` (gVisor) when the daemon's config adds it. */
  names: string[];
  /** The runtime of a container that names none. */
  defaultRuntime: string;
}

/** `name=value` matches a label's value; `true` matches any container carrying the label. */
export type LabelFilter = Record<string, string | true>;

/**
 * Port for the Docker calls the container tiers make. Contract shared by every method:
 * - failures reject with a `DockerError`: `DockerUnavailableError` when the engine does not answer,
 *   `DockerTimeoutError` past the deadline or when `signal` fires, `DockerNotFoundError`/`DockerApiError` when
 *   the engine refuses;
 * - calls that end a container (`kill`, `remove`) are idempotent: "already gone" or "not running" is success.
 */
export abstract class DockerClient {
  /** Where the engine is reached (`unix:///var/run/docker.sock`, `tcp://host:2375`), for messages. */
  abstract readonly endpoint: string;
  /** Resolves when the engine answers `/_ping`. */
  abstract ping(options?: DockerCallOptions): Promise<void>;
  /** Whether the engine has the image locally (never pulls). */
  abstract imageExists(ref: string, options?: DockerCallOptions): Promise<boolean>;
  /** Creates (does not start) a container; resolves with its id. */
  abstract createContainer(spec: ContainerCreateOptions, options?: DockerCallOptions): Promise<string>;
  /** Attaches stdin, stdout and stderr; call before `start` to miss no output. */
  abstract attach(id: string, options?: DockerCallOptions): Promise<ContainerStreams>;
  abstract start(id: string, options?: DockerCallOptions): Promise<void>;
  /** Resolves when the container is not running (at once if it already exited). No deadline unless given one. */
  abstract wait(id: string, options?: DockerCallOptions): Promise<ContainerExit>;
  /** Sends a signal (default SIGKILL). A container that is gone or not running counts as killed. */
  abstract kill(id: string, signal?: string, options?: DockerCallOptions): Promise<void>;
  /** Removes the container, killing it first if needed, with its anonymous volumes. Gone already is success. */
  abstract remove(id: string, options?: DockerCallOptions): Promise<void>;
  abstract inspect(id: string, options?: DockerCallOptions): Promise<ContainerState>;
  /** Every container (running or not) matching all the labels. */
  abstract listByLabel(labels: LabelFilter, options?: DockerCallOptions): Promise<ContainerSummary[]>;
  /**
   * The engine's OCI runtimes. Not abstract: a client that cannot tell (a test fake) reports Docker's built-in
   * `runc` alone, which is what every engine has.
   */
  runtimes(_options?: DockerCallOptions): Promise<DockerRuntimes> {
    return Promise.resolve({ names: ['runc'], defaultRuntime: 'runc' });
  }
  /**
   * The image's content id (`sha256:…`), or `undefined` when the engine does not have it (never pulls). Not
   * abstract: only the subprocess tier's image roots need it, and a client that cannot tell has none.
   */
  imageId(_ref: string, _options?: DockerCallOptions): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }
  /** The filesystem of a (created) container as a tar stream (`docker export`). Not abstract, as `imageId`. */
  exportContainer(_id: string, _options?: DockerCallOptions): Promise<Readable> {
    return Promise.reject(new DockerApiError('exportContainer', 0, 'this Docker client cannot export'));
  }
}

/** Node error codes that mean the engine is not reachable, as opposed to refusing a request. */
const UNREACHABLE = new Set([
  'ENOENT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EACCES',
  'EPERM',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENOTSOCK',
]);

/** Of those, the codes that mean the request never reached the engine. */
const NOT_CONNECTED = new Set([
  'ENOENT',
  'ECONNREFUSED',
  'EACCES',
  'EPERM',
  'ENOTSOCK',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

interface DockerodeFailure {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

interface ModemLike {
  socketPath?: unknown;
  host?: string;
  port?: string | number;
  protocol?: string;
  demuxStream(stream: Readable, stdout: Writable, stderr: Writable): void;
}

const short = (id: string) => (/^[0-9a-f]{64}$/.test(id) ? id.slice(0, 12) : id);

/**
 * `DockerClient` over dockerode. The connection comes from the `Dockerode` instance, which by default reads
 * `DOCKER_HOST` (and `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`), else the local socket.
 *
 * Every method has one shape: debug log naming the call and the container → the call under a deadline → debug
 * log; failures become typed `DockerError`s.
 */
export class DockerodeClient extends DockerClient {
  readonly endpoint: string;
  private readonly logger = new Logger(DockerodeClient.name);
  private readonly callTimeoutMs: number;

  constructor(
    private readonly docker: Dockerode,
    /** Deadline of every call except `wait`. Default 30 s: creating and removing can be slow on a busy host. */
    options: { callTimeoutMs?: number } = {},
  ) {
    super();
    this.callTimeoutMs = options.callTimeoutMs ?? 30_000;
    this.endpoint = describeEndpoint(docker.modem);
  }

  ping(options?: DockerCallOptions): Promise<void> {
    return this.call('ping', undefined, options, async (abortSignal) => {
      // The typings omit the (supported) options argument.
      await (this.docker.ping as (o: { abortSignal: AbortSignal }) => Promise<unknown>)({ abortSignal });
    });
  }

  imageExists(ref: string, options?: DockerCallOptions): Promise<boolean> {
    // dockerode cannot abort an image inspect; the deadline still holds (see `call`).
    return this.call('imageExists', ref, options, async () => {
      try {
        await this.docker.getImage(ref).inspect();
        return true;
      } catch (err) {
        if (statusOf(err) === 404) return false;
        throw err;
      }
    });
  }

  async createContainer(spec: ContainerCreateOptions, options?: DockerCallOptions): Promise<string> {
    try {
      return await this.call('createContainer', spec.name, options, async (abortSignal) => {
        const container = await this.docker.createContainer({ ...spec, abortSignal });
        return container.id;
      });
    } catch (err) {
      // The daemon may have made it before the call failed (reply lost to a daemon restart, deadline passed): a
      // named container is removed by name, so no unstarted container outlives a failed create. Refusals made none.
      const refused = err instanceof DockerApiError && err.statusCode >= 400 && err.statusCode < 500;
      const neverSent = NOT_CONNECTED.has(((err as Error).cause as DockerodeFailure | undefined)?.code ?? '');
      if (spec.name !== undefined && !refused && !neverSent) {
        await this.remove(spec.name).catch((e: Error) =>
          this.logger.warn(`container ${spec.name} may be left by a failed create: ${e.message}`),
        );
      }
      throw err;
    }
  }

  attach(id: string, options?: DockerCallOptions): Promise<ContainerStreams> {
    let gaveUp = false;
    return this.call('attach', id, options, async () => {
      // No abort signal on the request itself: after the upgrade, the socket must live as long as the container.
      const raw = await this.docker.getContainer(id).attach({
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        hijack: true,
      });
      const socket = raw as unknown as Duplex;
      if (gaveUp) {
        socket.destroy();
        throw new DockerTimeoutError('attach', `Docker attach to ${short(id)} answered too late`);
      }
      return this.demux(id, socket);
    }).catch((err: unknown) => {
      gaveUp = true;
      throw err;
    });
  }

  start(id: string, options?: DockerCallOptions): Promise<void> {
    return this.call('start', id, options, async (abortSignal) => {
      try {
        await this.docker.getContainer(id).start({ abortSignal });
      } catch (err) {
        if (statusOf(err) !== 304) throw err; // already started
      }
    });
  }

  wait(id: string, options: DockerCallOptions = {}): Promise<ContainerExit> {
    const noDeadline = { timeoutMs: Number.POSITIVE_INFINITY, ...options };
    return this.call('wait', id, noDeadline, async (abortSignal) => {
      const r = (await this.docker.getContainer(id).wait({ condition: 'not-running', abortSignal })) as {
        StatusCode: number;
      };
      return { statusCode: r.StatusCode };
    });
  }

  kill(id: string, signal = 'SIGKILL', options?: DockerCallOptions): Promise<void> {
    return this.call('kill', id, options, async (abortSignal) => {
      try {
        await this.docker.getContainer(id).kill({ signal, abortSignal });
      } catch (err) {
        // 404: gone; 409: not running; 304: nothing to do. All mean "not running any more".
        if (![404, 409, 304].includes(statusOf(err) ?? 0)) throw err;
      }
    });
  }

  remove(id: string, options?: DockerCallOptions): Promise<void> {
    return this.call('remove', id, options, async (abortSignal) => {
      try {
        await this.docker.getContainer(id).remove({ force: true, v: true, abortSignal });
      } catch (err) {
        const status = statusOf(err);
        // 404: gone; 304: nothing to do; 409 "removal already in progress": someone else is removing it.
        if (status === 404 || status === 304) return;
        if (status === 409 && /already in progress/i.test(messageOf(err))) return;
        throw err;
      }
    });
  }

  inspect(id: string, options?: DockerCallOptions): Promise<ContainerState> {
    return this.call('inspect', id, options, async (abortSignal) => {
      const info = await this.docker.getContainer(id).inspect({ abortSignal });
      return {
        id: info.Id,
        status: info.State.Status,
        running: info.State.Running,
        exitCode: info.State.ExitCode,
        oomKilled: info.State.OOMKilled,
        labels: info.Config.Labels ?? {},
      };
    });
  }

  listByLabel(labels: LabelFilter, options?: DockerCallOptions): Promise<ContainerSummary[]> {
    const label = Object.entries(labels).map(([k, v]) => (v === true ? k : `${k}=${v}`));
    return this.call('listByLabel', label.join(','), options, async (abortSignal) => {
      const found = await this.docker.listContainers({ all: true, filters: { label }, abortSignal });
      return found.map((c) => ({ id: c.Id, state: c.State, labels: c.Labels ?? {} }));
    });
  }

  override runtimes(options?: DockerCallOptions): Promise<DockerRuntimes> {
    return this.call('runtimes', undefined, options, async (abortSignal) => {
      // The typings omit the (supported) options argument.
      const info = (await (this.docker.info as (o: { abortSignal: AbortSignal }) => Promise<unknown>)({
        abortSignal,
      })) as { Runtimes?: Record<string, unknown>; DefaultRuntime?: string };
      return {
        names: Object.keys(info.Runtimes ?? {}).sort(),
        defaultRuntime: info.DefaultRuntime || 'runc',
      };
    });
  }

  override imageId(ref: string, options?: DockerCallOptions): Promise<string | undefined> {
    // dockerode cannot abort an image inspect; the deadline still holds (see `call`).
    return this.call('imageId', ref, options, async () => {
      try {
        return (await this.docker.getImage(ref).inspect()).Id;
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    });
  }

  override exportContainer(id: string, options?: DockerCallOptions): Promise<Readable> {
    // The deadline covers the answer's start; the stream then runs as long as the reader takes.
    return this.call('exportContainer', id, options, async () => {
      return (await this.docker.getContainer(id).export()) as unknown as Readable;
    });
  }

  /** Splits Docker's multiplexed attach stream (8-byte frame headers) into stdout and stderr. */
  private demux(id: string, socket: Duplex): ContainerStreams {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    (this.docker.modem as ModemLike).demuxStream(socket, stdout, stderr);
    const finish = () => {
      stdout.end();
      stderr.end();
    };
    const closed = new Promise<void>((resolve) => socket.once('close', resolve));
    socket.once('end', finish);
    socket.once('close', finish);
    socket.on('error', (err) => this.logger.debug(`attach ${short(id)}: ${err.message}`));
    return {
      stdin: socket,
      stdout,
      stderr,
      closed,
      destroy: () => {
        socket.destroy();
        finish();
      },
    };
  }

  /**
   * Runs one Docker call under a deadline and the caller's signal, logging before and after, and turns failures
   * into `DockerError`s. The race guarantees the deadline even for calls dockerode cannot abort.
   */
  private async call<T>(
    operation: string,
    subject: string | undefined,
    options: DockerCallOptions = {},
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const what = subject === undefined ? operation : `${operation} ${short(subject)}`;
    const controller = new AbortController();
    const timeoutMs = options.timeoutMs ?? this.callTimeoutMs;
    const timer = Number.isFinite(timeoutMs)
      ? setTimeout(
          () =>
            controller.abort(
              new DockerTimeoutError(operation, `Docker ${operation} took longer than ${timeoutMs} ms`),
            ),
          timeoutMs,
        )
      : undefined;
    const onAbort = () =>
      controller.abort(new DockerTimeoutError(operation, `Docker ${operation} was cancelled`));
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
    let rejectAborted!: (reason: unknown) => void;
    const aborted = new Promise<never>((_, reject) => (rejectAborted = reject));
    const onDeadline = () => rejectAborted(controller.signal.reason);
    if (controller.signal.aborted) onDeadline();
    else controller.signal.addEventListener('abort', onDeadline, { once: true });
    this.logger.debug(`${what}…`);
    try {
      const result = await Promise.race([fn(controller.signal), aborted]);
      this.logger.debug(`${what}: done`);
      return result;
    } catch (err) {
      const error = this.toError(operation, err, controller.signal);
      this.logger.debug(`${what} failed: ${error.message}`);
      throw error;
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      controller.signal.removeEventListener('abort', onDeadline);
    }
  }

  private toError(operation: string, err: unknown, signal: AbortSignal): DockerError {
    if (err instanceof DockerError) return err;
    if (signal.aborted) {
      return signal.reason instanceof DockerError
        ? signal.reason
        : new DockerTimeoutError(operation, `Docker ${operation} was cancelled`, {}, { cause: err });
    }
    const status = statusOf(err);
    const message = messageOf(err);
    if (status === 404) return new DockerNotFoundError(operation, status, message, { cause: err });
    if (status !== undefined) return new DockerApiError(operation, status, message, { cause: err });
    const code = (err as DockerodeFailure | undefined)?.code;
    if ((code && UNREACHABLE.has(code)) || /socket hang up/i.test(message)) {
      return new DockerUnavailableError(operation, this.endpoint, code ?? message, { cause: err });
    }
    return new DockerApiError(operation, 0, message, { cause: err });
  }
}

function statusOf(err: unknown): number | undefined {
  const status = (err as DockerodeFailure | undefined)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** The daemon's own message when it sent one (dockerode wraps it in "(HTTP code …) … - …"). */
function messageOf(err: unknown): string {
  const e = err as DockerodeFailure | undefined;
  return (e?.json?.message ?? e?.message ?? String(err)).trim();
}

function describeEndpoint(modem: ModemLike): string {
  if (typeof modem.socketPath === 'string') return `unix://${modem.socketPath}`;
  if (typeof modem.socketPath === 'function') return 'unix:///var/run/docker.sock';
  if (modem.host) return `${modem.protocol ?? 'http'}://${modem.host}${modem.port ? `:${modem.port}` : ''}`;
  return 'the default Docker socket';
}
