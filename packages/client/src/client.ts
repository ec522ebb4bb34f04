import { connectionError, errorFromResponse, SwitchyardError } from './errors';
import { type EventStreamOptions, sessionEventStream } from './sse';
import type {
  Action,
  ActionInput,
  ActionPage,
  ApprovalDecision,
  ArchiveUpload,
  Caller,
  Checkpoint,
  CheckpointDiff,
  CheckpointRestore,
  CreateCheckpointRequest,
  CreatePlanRequest,
  CreateSessionRequest,
  EffectivePolicy,
  FailureContext,
  FileLineage,
  FileUpload,
  ForkSessionRequest,
  Graph,
  GraphQuery,
  HookDelivery,
  HookList,
  Kernel,
  KernelInterrupt,
  OpenedTerminal,
  OpenTerminalRequest,
  PendingApproval,
  Plan,
  PolicyInput,
  ReplanRequest,
  RetryRequest,
  Session,
  SessionEvent,
  Skill,
  SkillInput,
  TenantPolicy,
  Terminal,
  TerminalAwaitingApproval,
  TerminalToken,
  Tool,
  ToolCall,
  ToolCallAnswer,
  UploadBody,
} from './types';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * Settings, by precedence: the option given here > the environment (`SWITCHYARD_URL`, `SWITCHYARD_API_KEY`) >
 * the default (`http://127.0.0.1:8080`, no key).
 */
export interface SwitchyardClientOptions {
  baseUrl?: string;
  apiKey?: string;
  /** A `fetch` to use instead of the global one (tests, proxies). */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A model API's tool shape: Chat Completions (`openai`), the Responses API's flat tools, or Anthropic's. */
export type ToolFormat = 'openai' | 'openai-responses' | 'anthropic';

export interface WaitOptions {
  /** Give up after this long (default 10 minutes); throws `SwitchyardError` with code `WAIT_TIMEOUT`. */
  timeoutMs?: number;
  /** Between polls (default 250 ms). */
  intervalMs?: number;
  signal?: AbortSignal;
}

const FINAL_PLAN = new Set(['succeeded', 'needs_replan', 'cancelled', 'interrupted']);

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The Switchyard REST API, typed. Every method throws `SwitchyardError` when the engine refuses the request. */
export class SwitchyardClient {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly fetchFn: typeof fetch;

  constructor(options: SwitchyardClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? process.env.SWITCHYARD_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    this.apiKey = options.apiKey ?? (process.env.SWITCHYARD_API_KEY || undefined);
    this.fetchFn = options.fetch ?? fetch;
  }

  readonly sessions = {
    create: (body: CreateSessionRequest = {}) => this.request<Session>('POST', '/v1/sessions', { body }),
    get: (sessionId: string) => this.request<Session>('GET', `/v1/sessions/${enc(sessionId)}`),
    list: async () => (await this.request<{ sessions: Session[] }>('GET', '/v1/sessions')).sessions,
    delete: (sessionId: string) => this.request<void>('DELETE', `/v1/sessions/${enc(sessionId)}`),
    fork: (sessionId: string, body: ForkSessionRequest = {}) =>
      this.request<Session>('POST', `${sessionPath(sessionId)}/fork`, { body }),
  };

  readonly actions = {
    /** Runs the action and answers its result (a failed exit is a result, not an exception). */
    run: (
      sessionId: string,
      action: ActionInput,
      options: { checkpoint?: 'before'; idempotencyKey?: string } = {},
    ) =>
      this.request<Action>('POST', `${sessionPath(sessionId)}/actions`, {
        body: { ...action, ...(options.checkpoint && { checkpoint: options.checkpoint }) },
        headers: idempotency(options.idempotencyKey),
      }),
    /** Submits the action and answers at once (202) with it `running`; follow it with `waitFor` or `events`. */
    start: (
      sessionId: string,
      action: ActionInput,
      options: { checkpoint?: 'before'; idempotencyKey?: string } = {},
    ) =>
      this.request<Action>('POST', `${sessionPath(sessionId)}/actions`, {
        body: { ...action, wait: false, ...(options.checkpoint && { checkpoint: options.checkpoint }) },
        headers: idempotency(options.idempotencyKey),
      }),
    /** Polls the action until it ends (no longer `running` or `awaiting_approval`). */
    waitFor: (sessionId: string, actionId: string, options: WaitOptions = {}) =>
      this.poll(
        () => this.actions.get(sessionId, actionId),
        (a) => a.status !== 'running' && a.status !== 'awaiting_approval',
        options,
        `action ${actionId}`,
      ),
    list: (sessionId: string, query: { cursor?: string; limit?: number } = {}) =>
      this.request<ActionPage>('GET', `${sessionPath(sessionId)}/actions`, { query }),
    get: (sessionId: string, actionId: string) =>
      this.request<Action>('GET', `${sessionPath(sessionId)}/actions/${enc(actionId)}`),
    cancel: (sessionId: string, actionId: string) =>
      this.request<Action>('POST', `${sessionPath(sessionId)}/actions/${enc(actionId)}/cancel`),
    /** Retries an action, revised (`action`) or as it was; `restore: true` first undoes the original's changes. */
    retry: (sessionId: string, actionId: string, body: RetryRequest = {}) =>
      this.request<Action>('POST', `${sessionPath(sessionId)}/actions/${enc(actionId)}/retry`, { body }),
    context: (sessionId: string, actionId: string, query: { before?: number } = {}) =>
      this.request<FailureContext>('GET', `${sessionPath(sessionId)}/actions/${enc(actionId)}/context`, {
        query,
      }),
  };

  readonly files = {
    lineage: (sessionId: string, path: string) =>
      this.request<FileLineage>('GET', `${sessionPath(sessionId)}/files/lineage`, { query: { path } }),
    /**
     * Streams `body` into the file at `path` (`PUT …/files/content`): parents made, atomic replace, any size up to
     * the workspace quota; `overwrite: false` refuses an existing file (409 `FILE_EXISTS`).
     */
    upload: async (
      sessionId: string,
      path: string,
      body: UploadBody,
      options: { overwrite?: boolean } = {},
    ) =>
      json<FileUpload>(
        await this.send('PUT', `${sessionPath(sessionId)}/files/content`, {
          query: { path, ...(options.overwrite === false && { overwrite: false }) },
          body,
          headers: { 'content-type': 'application/octet-stream' },
        }),
      ),
    /** The file's bytes as a `Response` to stream (`GET …/files/content`); `range` asks for `bytes=start-end`. */
    download: (sessionId: string, path: string, options: { range?: string; signal?: AbortSignal } = {}) =>
      this.send('GET', `${sessionPath(sessionId)}/files/content`, {
        query: { path },
        headers: options.range === undefined ? {} : { range: options.range },
        signal: options.signal,
      }),
    /** Extracts a tar (gzip too) streamed as `body` into the directory `path` (`PUT …/files/archive`). */
    uploadArchive: async (sessionId: string, path: string, body: UploadBody) =>
      json<ArchiveUpload>(
        await this.send('PUT', `${sessionPath(sessionId)}/files/archive`, {
          query: { path },
          body,
          headers: { 'content-type': 'application/x-tar' },
        }),
      ),
    /** The directory `path` (default: the workspace root) as a tar `Response` to stream (`GET …/files/archive`). */
    downloadArchive: (sessionId: string, path?: string, options: { signal?: AbortSignal } = {}) =>
      this.send('GET', `${sessionPath(sessionId)}/files/archive`, {
        query: { path },
        signal: options.signal,
      }),
  };

  readonly browser = {
    /**
     * The session's current browser tab as a person watching sees it (`GET …/browser/view`): a viewport JPEG with its
     * URL, title and tab id. Not an action: nothing is recorded and nothing runs in the page. 404 `NO_BROWSER` when
     * the session has no open tab.
     */
    view: async (
      sessionId: string,
      options: { signal?: AbortSignal } = {},
    ): Promise<{ image: Blob; url: string; title: string; tab: string }> => {
      const response = await this.send('GET', `${sessionPath(sessionId)}/browser/view`, {
        signal: options.signal,
      });
      const header = (name: string) => decodeURIComponent(response.headers.get(name) ?? '');
      return {
        image: new Blob([await response.arrayBuffer()], { type: 'image/jpeg' }),
        url: header('x-switchyard-page-url'),
        title: header('x-switchyard-page-title'),
        tab: response.headers.get('x-switchyard-tab') ?? '',
      };
    },
  };

  readonly graph = {
    get: (sessionId: string, query: GraphQuery = {}) =>
      this.request<Graph>('GET', `${sessionPath(sessionId)}/graph`, {
        query: {
          types: query.types?.join(','),
          status: query.status?.join(','),
          since: query.since,
          limit: query.limit,
        },
      }),
  };

  readonly plans = {
    create: (sessionId: string, plan: CreatePlanRequest) =>
      this.request<Plan>('POST', `${sessionPath(sessionId)}/plans`, { body: plan }),
    get: (sessionId: string, planId: string) =>
      this.request<Plan>('GET', `${sessionPath(sessionId)}/plans/${enc(planId)}`),
    list: async (sessionId: string) =>
      (await this.request<{ plans: Plan[] }>('GET', `${sessionPath(sessionId)}/plans`)).plans,
    replan: (sessionId: string, planId: string, body: ReplanRequest) =>
      this.request<Plan>('POST', `${sessionPath(sessionId)}/plans/${enc(planId)}/replan`, { body }),
    cancel: (sessionId: string, planId: string) =>
      this.request<Plan>('POST', `${sessionPath(sessionId)}/plans/${enc(planId)}/cancel`),
    /** Polls until the plan ends or needs a replan; `onProgress` sees each state polled. */
    waitFor: (
      sessionId: string,
      planId: string,
      options: WaitOptions & { onProgress?: (plan: Plan) => void } = {},
    ) =>
      this.poll(
        async () => {
          const plan = await this.plans.get(sessionId, planId);
          options.onProgress?.(plan);
          return plan;
        },
        (p) => FINAL_PLAN.has(p.status),
        options,
        `plan ${planId}`,
      ),
  };

  readonly checkpoints = {
    create: (sessionId: string, body: CreateCheckpointRequest = {}) =>
      this.request<Checkpoint>('POST', `${sessionPath(sessionId)}/checkpoints`, { body }),
    list: async (sessionId: string) =>
      (await this.request<{ checkpoints: Checkpoint[] }>('GET', `${sessionPath(sessionId)}/checkpoints`))
        .checkpoints,
    get: (sessionId: string, checkpointId: string) =>
      this.request<Checkpoint>('GET', `${sessionPath(sessionId)}/checkpoints/${enc(checkpointId)}`),
    delete: (sessionId: string, checkpointId: string) =>
      this.request<void>('DELETE', `${sessionPath(sessionId)}/checkpoints/${enc(checkpointId)}`),
    restore: (sessionId: string, checkpointId: string) =>
      this.request<CheckpointRestore>(
        'POST',
        `${sessionPath(sessionId)}/checkpoints/${enc(checkpointId)}/restore`,
      ),
    /** What changed since the checkpoint: to the workspace now (`current`, default) or to another checkpoint. */
    diff: (sessionId: string, checkpointId: string, to = 'current') =>
      this.request<CheckpointDiff>('GET', `${sessionPath(sessionId)}/checkpoints/${enc(checkpointId)}/diff`, {
        query: { to },
      }),
    /** A new session whose workspace is a copy of this one at the checkpoint. */
    fork: (sessionId: string, checkpointId: string) => this.sessions.fork(sessionId, { checkpointId }),
  };

  readonly kernels = {
    list: async (sessionId: string) =>
      (await this.request<{ kernels: Kernel[] }>('GET', `${sessionPath(sessionId)}/kernels`)).kernels,
    interrupt: (sessionId: string, kernelId: string) =>
      this.request<KernelInterrupt>('POST', `${sessionPath(sessionId)}/kernels/${enc(kernelId)}/interrupt`),
    restart: (sessionId: string, kernelId: string) =>
      this.request<Kernel>('POST', `${sessionPath(sessionId)}/kernels/${enc(kernelId)}/restart`),
    delete: (sessionId: string, kernelId: string) =>
      this.request<void>('DELETE', `${sessionPath(sessionId)}/kernels/${enc(kernelId)}`),
  };

  /**
   * A session's terminals: shells (PTYs) in its sandbox, driven over a WebSocket (`wsUrl`). Opening one answers the
   * terminal with a short-lived token, or, when a policy asks for approval, `status: "awaiting_approval"`.
   */
  readonly terminals = {
    open: (sessionId: string, body: OpenTerminalRequest = {}) =>
      this.request<OpenedTerminal | TerminalAwaitingApproval>('POST', `${sessionPath(sessionId)}/terminals`, {
        body,
      }),
    list: async (sessionId: string) =>
      (await this.request<{ terminals: Terminal[] }>('GET', `${sessionPath(sessionId)}/terminals`)).terminals,
    get: (sessionId: string, terminalId: string) =>
      this.request<Terminal>('GET', `${sessionPath(sessionId)}/terminals/${enc(terminalId)}`),
    resize: (sessionId: string, terminalId: string, cols: number, rows: number) =>
      this.request<Terminal>('POST', `${sessionPath(sessionId)}/terminals/${enc(terminalId)}/resize`, {
        body: { cols, rows },
      }),
    /** A new token for the terminal's WebSocket (for a browser, which cannot send the key). */
    token: (sessionId: string, terminalId: string, ttlSeconds?: number) =>
      this.request<TerminalToken>('POST', `${sessionPath(sessionId)}/terminals/${enc(terminalId)}/token`, {
        body: ttlSeconds === undefined ? {} : { ttlSeconds },
      }),
    /** Closes it (SIGHUP to its shell); answers once it has ended, or 202 when a policy holds the close. */
    close: (sessionId: string, terminalId: string) =>
      this.request<Terminal & { actionId: string }>(
        'DELETE',
        `${sessionPath(sessionId)}/terminals/${enc(terminalId)}`,
      ),
    /**
     * The WebSocket URL of a terminal (`ws://` or `wss://`), with `token` in its query when given: a browser's
     * `new WebSocket(url)` needs it; a program may send `authHeaders()` instead.
     */
    wsUrl: (terminal: { wsPath: string }, token?: string): string => {
      const url = new URL(`${this.baseUrl}${terminal.wsPath}`);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      if (token !== undefined) url.searchParams.set('token', token);
      return url.toString();
    },
  };

  readonly tools = {
    /**
     * The tool catalog in a model API's shape; `strict` (OpenAI only) for strict function calling; with `sessionId`,
     * what that session's policy offers (its skills included).
     */
    list: async (options: { format?: ToolFormat; strict?: boolean; sessionId?: string } = {}) =>
      (
        await this.request<{ tools: Tool[] }>('GET', '/v1/tools', {
          query: { format: options.format, strict: options.strict, sessionId: options.sessionId },
        })
      ).tools,
    /** Runs one tool call (answers one result) or an array of them in order (answers an array). */
    call: (sessionId: string, calls: ToolCall) =>
      this.request<ToolCallAnswer>('POST', `${sessionPath(sessionId)}/tool-calls`, { body: calls }),
  };

  readonly approvals = {
    /** Actions waiting for a decision that the caller may see (an admin key: every tenant's). */
    list: async () =>
      (await this.request<{ approvals: PendingApproval[] }>('GET', '/v1/approvals')).approvals,
    approve: (sessionId: string, actionId: string, reason?: string) =>
      this.request<ApprovalDecision>('POST', `${sessionPath(sessionId)}/actions/${enc(actionId)}/approve`, {
        body: reason === undefined ? {} : { reason },
      }),
    reject: (sessionId: string, actionId: string, reason?: string) =>
      this.request<ApprovalDecision>('POST', `${sessionPath(sessionId)}/actions/${enc(actionId)}/reject`, {
        body: reason === undefined ? {} : { reason },
      }),
  };

  readonly policies = {
    /** Who the caller is: its tenant, whether it is an admin, whether it decides approvals. */
    whoami: () => this.request<Caller>('GET', '/v1/whoami'),
    /** A session's effective policy: every layer with its source, and the tools it hides. */
    session: (sessionId: string) => this.request<EffectivePolicy>('GET', `${sessionPath(sessionId)}/policy`),
    tenant: (tenant: string) => this.request<TenantPolicy>('GET', `/v1/tenants/${enc(tenant)}/policy`),
    /** Sets a tenant's layer (admin keys only). */
    setTenant: (tenant: string, policy: PolicyInput) =>
      this.request<TenantPolicy>('PUT', `/v1/tenants/${enc(tenant)}/policy`, { body: policy }),
    deleteTenant: (tenant: string) => this.request<void>('DELETE', `/v1/tenants/${enc(tenant)}/policy`),
  };

  readonly skills = {
    list: async () => (await this.request<{ skills: Skill[] }>('GET', '/v1/skills')).skills,
    get: (name: string) => this.request<Skill>('GET', `/v1/skills/${enc(name)}`),
    /** Adds a skill for the caller's tenant. */
    add: (skill: SkillInput) => this.request<Skill>('POST', '/v1/skills', { body: skill }),
    delete: (name: string) => this.request<void>('DELETE', `/v1/skills/${enc(name)}`),
  };

  readonly hooks = {
    /** The configured hooks and their deliveries by status (admin keys only). */
    list: () => this.request<HookList>('GET', '/v1/hooks'),
    deliveries: async (query: { limit?: number } = {}) =>
      (await this.request<{ deliveries: HookDelivery[] }>('GET', '/v1/hooks/deliveries', { query }))
        .deliveries,
    /** How the hooks were told of one action. */
    forAction: async (sessionId: string, actionId: string) =>
      (
        await this.request<{ deliveries: HookDelivery[] }>(
          'GET',
          `${sessionPath(sessionId)}/actions/${enc(actionId)}/hooks`,
        )
      ).deliveries,
  };

  /**
   * The session's events, live, as an async iterator; reconnects with `Last-Event-ID` after a dropped connection.
   * Ends when the session ends or `signal` aborts.
   */
  events(sessionId: string, options: EventStreamOptions = {}): AsyncGenerator<SessionEvent, void, undefined> {
    const url = `${this.baseUrl}${sessionPath(sessionId)}/events`;
    return sessionEventStream(async (lastEventId, signal) => {
      const headers: Record<string, string> = { ...this.authHeaders(), accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      try {
        return await this.fetchFn(url, { headers, signal });
      } catch (error) {
        if (signal?.aborted) throw error;
        throw connectionError(this.baseUrl, error);
      }
    }, options);
  }

  /**
   * One request with a raw body (streamed when it is a stream: `duplex: 'half'`), answering the `Response` for the
   * caller to read or stream. Non-2xx answers throw `SwitchyardError`.
   */
  async send(
    method: string,
    path: string,
    options: Omit<RequestOptions, 'body'> & { body?: UploadBody } = {},
  ): Promise<Response> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { ...this.authHeaders(), ...options.headers };
    let response: Response;
    try {
      response = await this.fetchFn(url, {
        method,
        headers,
        body: bodyInit(options.body),
        signal: options.signal,
        ...(options.body instanceof ReadableStream && { duplex: 'half' }),
      });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw connectionError(this.baseUrl, error);
    }
    if (!response.ok) throw errorFromResponse(response.status, await readBody(response));
    return response;
  }

  /** One request; JSON in and out. Non-2xx answers throw `SwitchyardError`. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { ...this.authHeaders(), ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await this.fetchFn(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: options.signal,
      });
    } catch (error) {
      throw connectionError(this.baseUrl, error);
    }
    const body = await readBody(response);
    if (!response.ok) throw errorFromResponse(response.status, body);
    return body as T;
  }

  private url(path: string, query: RequestOptions['query'] = {}): URL {
    const url = new URL(`${this.baseUrl}${path}`);
    for (const [key, value] of Object.entries(query))
      if (value !== undefined) url.searchParams.set(key, String(value));
    return url;
  }

  /** The `authorization` header for the API key, if any. */
  authHeaders(): Record<string, string> {
    return this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {};
  }

  private async poll<T>(
    get: () => Promise<T>,
    done: (value: T) => boolean,
    options: WaitOptions,
    what: string,
  ): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? 600_000);
    for (;;) {
      const value = await get();
      if (done(value)) return value;
      if (options.signal?.aborted) throw options.signal.reason;
      if (Date.now() >= deadline) {
        throw new SwitchyardError(
          `${what} did not finish in ${options.timeoutMs ?? 600_000} ms`,
          0,
          'WAIT_TIMEOUT',
        );
      }
      await pause(options.intervalMs ?? 250);
    }
  }
}

/** The body as JSON when it parses, else its text (kept for the error), `undefined` when empty. */
async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A body as `fetch` takes it: bytes on a `SharedArrayBuffer` are copied, other views passed as they are. */
function bodyInit(body: UploadBody | undefined): RequestInit['body'] {
  if (!(body instanceof Uint8Array)) return body;
  return body.buffer instanceof ArrayBuffer
    ? new Uint8Array(body.buffer, body.byteOffset, body.byteLength)
    : new Uint8Array(body);
}

const json = async <T>(response: Response): Promise<T> => (await readBody(response)) as T;

const enc = encodeURIComponent;
const sessionPath = (sessionId: string): string => `/v1/sessions/${enc(sessionId)}`;
const idempotency = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { 'idempotency-key': key };
