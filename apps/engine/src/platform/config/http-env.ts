import { IsIn, IsOptional, IsString, MinLength } from 'class-validator';
import * as path from 'node:path';
import { BoolVar, IntVar, ListVar, MiB } from './env-parsing';

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** `auto`: human-readable lines when stdout is a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
/** `api-key`: `/metrics` answers only requests with a valid API key (any tenant's). */
export const METRICS_AUTH = ['open', 'api-key'] as const;
export type MetricsAuth = (typeof METRICS_AUTH)[number];

/** The HTTP server, its tenants (API keys), sessions, logging, tool descriptions and tool answers' images. */
export class HttpEnv {
  /** TCP port the HTTP server listens on. */
  @IntVar(0, 65535)
  PORT = 8080;

  /** Address the HTTP server listens on; `0.0.0.0` or `::` to listen on every interface. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  HOST = '127.0.0.1';

  /**
   * Directory of the engine's files, relative to its working directory: session workspaces (`workspaces/<session>`),
   * the embedded graph and the graph's outbox (`graph.db`) and, with SWITCHYARD_STATE=sqlite, its state (`engine.db`).
   */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_DATA_DIR = './data';

  /**
   * Comma-separated bearer tokens; each one is a tenant. Empty = open (no auth): the engine logs loudly at start-up that
   * the API is open to anyone who can reach it.
   */
  @ListVar()
  @MinLength(16, { each: true })
  SWITCHYARD_API_KEYS: string[] = [];

  /** Least severe log level written: `error`, `warn`, `info` or `debug`. */
  @IsOptional()
  @IsIn(LOG_LEVELS)
  SWITCHYARD_LOG_LEVEL: LogLevel = 'info';

  /**
   * `json`: one JSON object per line; `pretty`: human-readable lines; `auto`: `pretty` when stdout is a terminal, else
   * `json`.
   */
  @IsOptional()
  @IsIn(LOG_FORMATS)
  SWITCHYARD_LOG_FORMAT: LogFormat = 'auto';

  /** `open`: anyone may read `GET /metrics`; `api-key`: it answers only requests with a valid API key (any tenant's). */
  @IsOptional()
  @IsIn(METRICS_AUTH)
  SWITCHYARD_METRICS_AUTH: MetricsAuth = 'open';

  /** Idle time after which a session expires, when its creator gives no `ttlSeconds`. */
  @IntVar(1, 7 * 24 * 3600)
  SWITCHYARD_SESSION_TTL_SECONDS = 3600;

  /** Largest `ttlSeconds` a caller may ask for when creating a session. */
  @IntVar(1, 30 * 24 * 3600)
  SWITCHYARD_MAX_SESSION_TTL_SECONDS = 24 * 3600;

  /** How often expired sessions (and idle MCP sessions) are looked for and ended. */
  @IntVar(50, 3_600_000)
  SWITCHYARD_SWEEP_INTERVAL_MS = 30_000;

  /** Live sessions the engine holds at once; creating one more is refused with 503 (`SESSION_LIMIT`). */
  @IntVar(1, 100_000)
  SWITCHYARD_MAX_SESSIONS = 1000;

  /** Largest JSON request body accepted; a larger one is answered 413. */
  @IntVar(1024, 1024 * MiB)
  SWITCHYARD_MAX_BODY_BYTES = 8 * MiB;

  /**
   * Accept a Jupyter kernel's channels WebSocket (`…/jupyter/api/kernels/<id>/channels`) that carries no key, when its
   * kernel id names a live Jupyter kernel of the session: the id (a random UUID, answered only to a caller with the
   * session's key) stands for the key. nbclient and papermill through jupyter_server's `GatewayKernelManager` need it
   * when SWITCHYARD_API_KEYS is set: that client opens the WebSocket without its `auth_token`. `jupyter server
   * --gateway-url` sends the key and needs nothing. No effect without keys (the API is open).
   */
  @BoolVar()
  SWITCHYARD_JUPYTER_KERNEL_ID_AUTH = false;

  /** TOML file with tool descriptions (`[bash] description = "…"`), read on every GET /v1/tools. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_TOOLS_FILE?: string = undefined;

  /**
   * Largest image (decoded bytes) a tool call or MCP answer attaches as an image: a read of a PNG, JPEG, GIF or WebP
   * file, a cell's image result, a browser screenshot. A larger one is named with where it is, not attached. The
   * default's base64 is 5 MiB, Anthropic's limit for one image; 0 attaches none.
   */
  @IntVar(0, 64 * MiB)
  SWITCHYARD_TOOL_IMAGE_MAX_BYTES = 3.75 * MiB;
}

export interface HttpConfig {
  port: number;
  host: string;
  dataDir: string;
  apiKeys: string[];
  logLevel: LogLevel;
  logFormat: LogFormat;
  metricsAuth: MetricsAuth;
  sessions: {
    defaultTtlSeconds: number;
    maxTtlSeconds: number;
    sweepIntervalMs: number;
    maxSessions: number;
  };
  http: { maxBodyBytes: number };
  /** The Jupyter protocol (`/v1/sessions/:id/jupyter`). */
  jupyter: { kernelIdAuth: boolean };
  tools: { descriptionsFile?: string; imageMaxBytes: number };
}

/** Relative paths are taken from `cwd`, the engine's working directory. */
export function httpConfig(env: HttpEnv, cwd: string): HttpConfig {
  return {
    port: env.PORT,
    host: env.HOST,
    dataDir: path.resolve(cwd, env.SWITCHYARD_DATA_DIR),
    apiKeys: env.SWITCHYARD_API_KEYS,
    logLevel: env.SWITCHYARD_LOG_LEVEL,
    logFormat: env.SWITCHYARD_LOG_FORMAT,
    metricsAuth: env.SWITCHYARD_METRICS_AUTH,
    sessions: {
      defaultTtlSeconds: env.SWITCHYARD_SESSION_TTL_SECONDS,
      maxTtlSeconds: env.SWITCHYARD_MAX_SESSION_TTL_SECONDS,
      sweepIntervalMs: env.SWITCHYARD_SWEEP_INTERVAL_MS,
      maxSessions: env.SWITCHYARD_MAX_SESSIONS,
    },
    http: { maxBodyBytes: env.SWITCHYARD_MAX_BODY_BYTES },
    jupyter: { kernelIdAuth: env.SWITCHYARD_JUPYTER_KERNEL_ID_AUTH },
    tools: {
      descriptionsFile: env.SWITCHYARD_TOOLS_FILE && path.resolve(cwd, env.SWITCHYARD_TOOLS_FILE),
      imageMaxBytes: env.SWITCHYARD_TOOL_IMAGE_MAX_BYTES,
    },
  };
}
