import * as k8s from '@kubernetes/client-node';
// Not re-exported by the package's index; a plain CommonJS module of the same package (no exports map).
import { WebSocketHandler } from '@kubernetes/client-node/dist/web-socket-handler';
import type { Writable } from 'node:stream';
import { ChannelStreams, type ChannelStreamsOptions, exitCodeOf, V5_PROTOCOL } from './channel-streams';
import { KubeClient } from './kube-client';
import type {
  AccessAnswer,
  AccessCheck,
  AttachedStreams,
  DeletePrecondition,
  ExecOptions,
  ExecResult,
  ExecStream,
  KubeNode,
  NetworkPolicyManifest,
  PodInfo,
  PodManifest,
} from './kube-types';
import { KubeApiError } from './kubernetes.errors';
import {
  explainKubeError,
  type KubeOrigin,
  toKubeError,
  toPodInfo,
  toSocketError,
} from './client-node-mapping';

export interface ClientNodeKubeClientOptions {
  /** A kubeconfig file; in-cluster configuration (the pod's service account) when absent. */
  kubeconfigPath?: string;
  /** A context of that kubeconfig; its current one when absent. */
  context?: string;
  namespace: string;
  /** Deadline of every API call (not the streams). */
  apiTimeoutMs: number;
  /** Deadline of an exec without its own, from connect to exit. */
  execTimeoutMs: number;
  /**
   * How the operator sets `kubeconfigPath` and `context` (`KUBECONFIG`, `SWITCHYARD_K8S_CONTEXT`): named in the
   * errors of a server that does not answer or refuses the engine's account. Default the option names.
   */
  settingNames?: { kubeconfigPath: string; context: string };
}

const DEFAULT_EXEC_OUTPUT_BYTES = 64 * 2 ** 20;
const MERGE_PATCH = { headers: { 'Content-Type': 'application/merge-patch+json' } };
/** `WebSocket.CLOSING` of the `ws` package the handler uses. */
const SOCKET_CLOSING = 2;

/** What this adapter uses of the `ws` socket the library's handler opens. */
interface RawSocket {
  readonly protocol: string;
  readonly readyState: number;
  send(data: Buffer, callback: (err?: Error) => void): void;
  close(): void;
  pause(): void;
  resume(): void;
  on(event: 'close' | 'error', listener: () => void): void;
}

/** `KubeClient` on `@kubernetes/client-node` 0.22 (CommonJS): REST calls through its generated API, streams over its WebSocket handler. */
export class ClientNodeKubeClient extends KubeClient {
  readonly namespace: string;
  private readonly config: k8s.KubeConfig;
  private readonly core: k8s.CoreV1Api;
  private readonly networking: k8s.NetworkingV1Api;
  private readonly version: k8s.VersionApi;
  private readonly authorization: k8s.AuthorizationV1Api;
  private readonly authentication: k8s.AuthenticationV1Api;
  private readonly sockets = new Set<ChannelStreams>();
  private readonly origin: KubeOrigin;

  constructor(private readonly options: ClientNodeKubeClientOptions) {
    super();
    this.namespace = options.namespace;
    this.config = new k8s.KubeConfig();
    try {
      if (options.kubeconfigPath !== undefined) this.config.loadFromFile(options.kubeconfigPath);
      else this.config.loadFromCluster();
      if (options.context !== undefined) this.config.setCurrentContext(options.context);
    } catch (err) {
      throw new KubeApiError(
        'KUBE_CONFIG',
        `cannot load the Kubernetes configuration ${options.kubeconfigPath ?? '(in-cluster)'}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const cluster = this.config.getCurrentCluster();
    if (!cluster) {
      throw new KubeApiError(
        'KUBE_CONFIG',
        `no cluster in ${options.kubeconfigPath ?? 'the in-cluster configuration'}`,
      );
    }
    // Outside a pod the library still builds an in-cluster server, from environment variables that are not there.
    if (options.kubeconfigPath === undefined && cluster.server.includes('undefined')) {
      throw new KubeApiError(
        'KUBE_CONFIG',
        'no kubeconfig given and not running in a pod of a cluster (KUBERNETES_SERVICE_HOST is not set)',
      );
    }
    const names = options.settingNames ?? { kubeconfigPath: 'kubeconfigPath', context: 'context' };
    this.origin = {
      server: cluster.server,
      source:
        options.kubeconfigPath === undefined
          ? `the in-cluster service account (${names.kubeconfigPath} unset)`
          : `${names.kubeconfigPath} ${options.kubeconfigPath}, context ${this.config.getCurrentContext()}`,
      settings: `${names.kubeconfigPath} (or ${names.context})`,
    };
    this.core = this.config.makeApiClient(k8s.CoreV1Api);
    this.networking = this.config.makeApiClient(k8s.NetworkingV1Api);
    this.version = this.config.makeApiClient(k8s.VersionApi);
    this.authorization = this.config.makeApiClient(k8s.AuthorizationV1Api);
    this.authentication = this.config.makeApiClient(k8s.AuthenticationV1Api);
    // Every REST call: a socket/response timeout (the request library aborts it) and kept-alive connections.
    const timeout = (opts: Record<string, unknown>) => {
      opts.timeout = options.apiTimeoutMs;
      opts.forever = true;
    };
    for (const api of [this.core, this.networking, this.version, this.authorization, this.authentication])
      api.addInterceptor(timeout);
  }

  override get server(): string {
    return this.origin.server;
  }

  override get source(): string {
    return this.origin.source;
  }

  async ping(): Promise<string> {
    const { body } = await this.call('version', () => this.version.getCode());
    return body.gitVersion;
  }

  async namespaceExists(): Promise<boolean> {
    try {
      const { body } = await this.call('read namespace', () => this.core.readNamespace(this.namespace));
      return body.status?.phase !== 'Terminating';
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 'KUBE_NOT_FOUND') return false;
      throw err;
    }
  }

  async whoAmI(): Promise<string | undefined> {
    try {
      const { body } = await this.call('self subject review', () =>
        this.authentication.createSelfSubjectReview({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'SelfSubjectReview',
        }),
      );
      return body.status?.userInfo?.username;
    } catch (err) {
      // Servers before 1.28 have no SelfSubjectReview; the name only makes messages clearer.
      if (err instanceof KubeApiError && (err.code === 'KUBE_NOT_FOUND' || err.code === 'KUBE_FORBIDDEN'))
        return undefined;
      throw err;
    }
  }

  async reviewAccess(check: AccessCheck): Promise<AccessAnswer> {
    const { body } = await this.call(`access review ${check.verb} ${check.resource}`, () =>
      this.authorization.createSelfSubjectAccessReview({
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: {
          resourceAttributes: {
            verb: check.verb,
            resource: check.resource,
            ...(check.subresource !== undefined && { subresource: check.subresource }),
            ...(check.group !== undefined && { group: check.group }),
            ...(check.name !== undefined && { name: check.name }),
            ...(!check.clusterScoped && { namespace: this.namespace }),
          },
        },
      }),
    );
    const reason = body.status?.reason || body.status?.evaluationError;
    return { allowed: body.status?.allowed === true, ...(reason && { reason }) };
  }

  async nodes(): Promise<KubeNode[]> {
    const { body } = await this.call('list nodes', () => this.core.listNode());
    return body.items.map((n) => ({
      name: n.metadata?.name ?? '',
      ready: n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
      unschedulable: n.spec?.unschedulable === true,
      labels: n.metadata?.labels ?? {},
      images: (n.status?.images ?? []).flatMap((i) => i.names ?? []),
    }));
  }

  async createPod(manifest: PodManifest): Promise<PodInfo> {
    const { body } = await this.call(`create pod ${manifest.metadata.name}`, () =>
      this.core.createNamespacedPod(this.namespace, manifest as unknown as k8s.V1Pod),
    );
    return toPodInfo(body);
  }

  async readPod(name: string): Promise<PodInfo | undefined> {
    try {
      const { body } = await this.call(`read pod ${name}`, () =>
        this.core.readNamespacedPod(name, this.namespace),
      );
      return toPodInfo(body);
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 'KUBE_NOT_FOUND') return undefined;
      throw err;
    }
  }

  async listPods(labelSelector: string): Promise<PodInfo[]> {
    const { body } = await this.call(`list pods ${labelSelector}`, () =>
      this.core.listNamespacedPod(this.namespace, undefined, undefined, undefined, undefined, labelSelector),
    );
    return body.items.map(toPodInfo);
  }

  async deletePod(name: string, graceSeconds: number, precondition?: DeletePrecondition): Promise<boolean> {
    const body: k8s.V1DeleteOptions = {
      gracePeriodSeconds: graceSeconds,
      ...(precondition && { preconditions: { ...precondition } }),
    };
    try {
      await this.call(`delete pod ${name}`, () =>
        this.core.deleteNamespacedPod(
          name,
          this.namespace,
          undefined,
          undefined,
          graceSeconds,
          undefined,
          undefined,
          body,
        ),
      );
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 'KUBE_NOT_FOUND') return true;
      if (err instanceof KubeApiError && err.code === 'KUBE_CONFLICT' && precondition) return false;
      throw err;
    }
  }

  async claim(
    name: string,
    resourceVersion: string,
    labels: Record<string, string>,
    annotations: Record<string, string> = {},
  ): Promise<boolean> {
    // A JSON merge patch carrying metadata.resourceVersion: the server applies it only at that version (409 else).
    const patch = { metadata: { resourceVersion, labels, annotations } };
    try {
      await this.call(`claim pod ${name}`, () =>
        this.core.patchNamespacedPod(
          name,
          this.namespace,
          patch,
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          MERGE_PATCH,
        ),
      );
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && (err.code === 'KUBE_CONFLICT' || err.code === 'KUBE_NOT_FOUND'))
        return false;
      throw err;
    }
  }

  async attach(name: string, container: string): Promise<AttachedStreams> {
    const query = new URLSearchParams({
      container,
      stdin: 'true',
      stdout: 'true',
      stderr: 'true',
      tty: 'false',
    });
    return this.connect(
      `attach ${name}/${container}`,
      this.podPath(name, 'attach', query),
      this.options.apiTimeoutMs,
    );
  }

  async exec(
    name: string,
    container: string,
    argv: string[],
    options: ExecOptions = {},
  ): Promise<ExecResult> {
    const timeoutMs = options.timeoutMs ?? this.options.execTimeoutMs;
    const maxBytes = options.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_BYTES;
    const query = new URLSearchParams({ container, stdout: 'true', stderr: 'true', tty: 'false' });
    if (options.stdin) query.set('stdin', 'true');
    for (const arg of argv) query.append('command', arg);
    const what = `exec in ${name}/${container} (${argv[0] ?? ''})`;
    const started = Date.now();
    const streams = await this.connect(what, this.podPath(name, 'exec', query), timeoutMs);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = [0, 0];
    let overflow = false;
    const collect = (into: Buffer[], i: 0 | 1) => (chunk: Buffer) => {
      bytes[i] += chunk.length;
      if (bytes[i] > maxBytes) {
        overflow = true;
        streams.close();
      } else into.push(chunk);
    };
    streams.stdout.on('data', collect(out, 0));
    streams.stderr.on('data', collect(err, 1));
    if (options.stdin) writeAll(streams.stdin, options.stdin);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(1, timeoutMs - (Date.now() - started)));
    });
    try {
      const ended = await Promise.race([streams.closed, timedOut]);
      if (ended === 'timeout') {
        throw new KubeApiError('KUBE_TIMEOUT', `${what}: no exit within ${timeoutMs} ms`, {
          retriable: true,
        });
      }
    } finally {
      clearTimeout(timer);
      streams.close();
    }
    bytes = [0, 0];
    if (overflow) throw new KubeApiError('KUBE_EXEC_OUTPUT', `${what}: output over ${maxBytes} bytes`);
    const status = streams.status;
    if (!status)
      throw new KubeApiError('KUBE_STREAM', `${what}: the connection closed without an exit status`, {
        retriable: true,
      });
    const exitCode = exitCodeOf(status);
    const stderr = Buffer.concat(err);
    return {
      exitCode: exitCode ?? -1,
      stdout: Buffer.concat(out),
      // A failure without an exit code (the command could not start): its message is all there is.
      stderr:
        exitCode === undefined
          ? Buffer.concat([stderr, Buffer.from(status.message ?? 'exec failed')])
          : stderr,
    };
  }

  async execStream(name: string, container: string, argv: string[]): Promise<ExecStream> {
    const query = new URLSearchParams({
      container,
      stdin: 'true',
      stdout: 'true',
      stderr: 'true',
      tty: 'false',
    });
    for (const arg of argv) query.append('command', arg);
    const what = `exec in ${name}/${container} (${argv[0] ?? ''})`;
    const streams = await this.connect(what, this.podPath(name, 'exec', query), this.options.apiTimeoutMs, {
      flowControl: true,
    });
    if (!streams.halfCloses) {
      streams.close();
      throw new KubeApiError(
        'KUBE_STREAM',
        `${what}: the API server does not speak ${V5_PROTOCOL} (Kubernetes 1.30+), which a streamed exec needs to end its stdin`,
      );
    }
    const exit = streams.closed.then(() => {
      const status = streams.status;
      if (!status)
        throw new KubeApiError('KUBE_STREAM', `${what}: the connection closed without an exit status`, {
          retriable: true,
        });
      const exitCode = exitCodeOf(status);
      return exitCode === undefined
        ? { exitCode: -1, message: status.message ?? 'exec failed' }
        : { exitCode };
    });
    exit.catch(() => undefined); // the caller may only care about the streams
    return {
      stdin: streams.stdin,
      stdout: streams.stdout,
      stderr: streams.stderr,
      exit,
      close: () => streams.close(),
    };
  }

  async ensureNetworkPolicy(manifest: NetworkPolicyManifest): Promise<boolean> {
    try {
      await this.call(`read networkpolicy ${manifest.metadata.name}`, () =>
        this.networking.readNamespacedNetworkPolicy(manifest.metadata.name, this.namespace),
      );
      return false;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.code === 'KUBE_NOT_FOUND')) throw err;
    }
    try {
      await this.call(`create networkpolicy ${manifest.metadata.name}`, () =>
        this.networking.createNamespacedNetworkPolicy(
          this.namespace,
          manifest as unknown as k8s.V1NetworkPolicy,
        ),
      );
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 'KUBE_CONFLICT') return false; // made meanwhile
      throw err;
    }
  }

  override close(): void {
    for (const s of this.sockets) s.close();
  }

  private podPath(name: string, sub: 'attach' | 'exec', query: URLSearchParams): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/pods/${encodeURIComponent(name)}/${sub}?${query.toString()}`;
  }

  /** Opens an attach or exec WebSocket and wraps it in `ChannelStreams`; a socket that opens past the deadline is closed. */
  private async connect(
    what: string,
    path: string,
    timeoutMs: number,
    options: ChannelStreamsOptions = {},
  ): Promise<ChannelStreams> {
    // Messages that arrive before `streams` exists (with the upgrade's own bytes) wait for it.
    const target: { streams?: ChannelStreams; early: Buffer[] } = { early: [] };
    let gaveUp = false;
    const sink = { write: () => true, end: () => undefined, pause: () => undefined };
    // The handler closes "its" streams on a close-channel message: ours are handled by ChannelStreams instead.
    const handler = new WebSocketHandler(this.config, undefined, {
      stdin: sink as unknown as NodeJS.ReadStream,
      stdout: sink as unknown as Writable,
      stderr: sink as unknown as Writable,
    });
    const connect = handler.connect.bind(handler) as unknown as (
      path: string,
      text: null,
      binary: (channel: number, data: Buffer) => boolean,
    ) => Promise<RawSocket>;
    const opening = connect(path, null, (channel, data) => {
      // The handler strips the channel byte; ChannelStreams wants the whole message.
      const message = Buffer.concat([Buffer.from([channel]), data]);
      if (target.streams) target.streams.receive(message);
      else target.early.push(message);
      return true;
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        gaveUp = true;
        reject(
          new KubeApiError('KUBE_TIMEOUT', `${what}: no connection within ${timeoutMs} ms`, {
            retriable: true,
          }),
        );
      }, timeoutMs);
    });
    let ws: RawSocket;
    try {
      ws = await Promise.race([opening, deadline]);
    } catch (err) {
      void opening.then((late) => late.close()).catch(() => undefined);
      throw explainKubeError(toSocketError(what, err), this.origin);
    } finally {
      clearTimeout(timer);
    }
    if (gaveUp) {
      ws.close();
      throw explainKubeError(
        new KubeApiError('KUBE_TIMEOUT', `${what}: no connection within ${timeoutMs} ms`, {
          retriable: true,
        }),
        this.origin,
      );
    }
    const streams = new ChannelStreams(
      {
        protocol: ws.protocol,
        send: (data, callback) => ws.send(data, callback),
        close: () => ws.close(),
        pause: () => ws.pause(),
        resume: () => ws.resume(),
      },
      options,
    );
    target.streams = streams;
    for (const message of target.early.splice(0)) streams.receive(message);
    this.sockets.add(streams);
    ws.on('close', () => streams.socketClosed());
    ws.on('error', () => streams.socketClosed());
    if (ws.readyState >= SOCKET_CLOSING) streams.socketClosed();
    void streams.closed.then(() => this.sockets.delete(streams));
    return streams;
  }

  /** Runs one REST call under the deadline, mapping failures to `KubeApiError`. */
  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        fn(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new KubeApiError(
                  'KUBE_TIMEOUT',
                  `${what}: no answer within ${this.options.apiTimeoutMs} ms`,
                  { retriable: true },
                ),
              ),
            this.options.apiTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      throw explainKubeError(toKubeError(what, err), this.origin);
    } finally {
      clearTimeout(timer);
    }
  }
}

function writeAll(stdin: Writable, data: Buffer): void {
  stdin.write(data);
  stdin.end();
}
