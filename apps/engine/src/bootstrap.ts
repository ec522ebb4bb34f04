import { chmodSync, mkdirSync } from 'node:fs';
import { type INestApplication, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { ContextGraph } from '@switchyard/context-graph';
import { BrowserRouter } from '@switchyard/browser';
import { SandboxManager } from '@switchyard/sandbox';
import { AppModule } from './app.module';
import { graphStartupError } from './engine/graph/graph-store';
import { tierAvailability } from './edge/health/health.controller';
import type { Clock } from '@switchyard/common';
import type { EngineConfig } from './platform/config/engine-config';
import { DomainErrorFilter } from './edge/http/domain-error.filter';
import { installJsonBody } from './edge/http/json-body.middleware';
import { EngineLogger } from './platform/logging/engine-logger';
import { countHttpRequest, installHttpMetrics } from './platform/metrics/http-metrics.middleware';
import { MetricsService } from './platform/metrics/metrics.service';
import { handleBeforeExpress } from './edge/http/before-express';
import { installConsole } from './edge/console/console-assets';
import { installMethodNotAllowed } from './edge/http/method-not-allowed.middleware';
import { installOpenApi } from './edge/http/openapi';
import { ApprovalsFanOut } from './edge/replicas/approvals-fan-out';
import { SessionForwarding } from './edge/replicas/session-forwarding';
import { PORTS_ROUTE, PortProxy } from './edge/ports/port-proxy';
import { kubernetesStartupError } from './sandbox-backend';

/** The request line and headers: a 4 096-character query value percent-encodes to up to 48 KiB. */
const MAX_HEADER_BYTES = 64 * 1024;

/**
 * The data dir holds every session's workspace. Sandboxed code runs as an unprivileged uid that must traverse
 * it to reach its own workspace, but must not list it (other sessions' ids): hence 0711.
 */
function prepareDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o711);
}

export interface BootOptions {
  clock?: Clock;
  /** A graph store to use instead of the configured one (the bench's no-op store). */
  graph?: ContextGraph;
  /** Where log lines go (default stdout); tests pass a stream to read them. */
  logStream?: NodeJS.WritableStream;
}

/** Builds the HTTP app from a validated config. Shared by `main.ts`, the e2e tests and the bench. */
export async function createEngineApp(
  config: EngineConfig,
  options: BootOptions = {},
): Promise<INestApplication> {
  prepareDataDir(config.dataDir);
  // JSON lines for machines; the same lines made readable when a person watches the terminal.
  const pretty =
    config.logFormat === 'pretty' ||
    (config.logFormat === 'auto' && !options.logStream && process.stdout.isTTY);
  const engineLogger = new EngineLogger(config.logLevel, { stream: options.logStream, pretty });
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule.forRoot(config, { clock: options.clock, graph: options.graph }),
    {
      bodyParser: false,
      // Rethrow start-up failures (Nest would abort the process), so a bad graph store setting is named.
      abortOnError: false,
      logger: engineLogger,
    },
  ).catch((error: unknown) => {
    throw kubernetesStartupError(graphStartupError(error));
  });
  app.use(engineLogger.middleware());
  app.disable('x-powered-by');
  installHttpMetrics(app);
  const ports = app.get(PortProxy);
  installJsonBody(app, config.http.maxBodyBytes, (req) => ports.claims(req));
  // Replicas: a session's requests go to the replica serving it (after the body is read and checked here), the
  // ports proxy's included; then the proxy streams its requests itself, before any route.
  if (config.state.store === 'postgres') {
    app.use(app.get(SessionForwarding).middleware());
    app.use(app.get(ApprovalsFanOut).middleware());
    app.use(ports.middleware());
  } else {
    // One engine: the proxy takes its requests before Express does (logged and counted as every request is).
    const log = engineLogger.middleware();
    const metrics = app.get(MetricsService);
    handleBeforeExpress(app.getHttpServer(), (req, res) => {
      if (!ports.claims(req)) return false;
      log(req, res, () => {
        countHttpRequest(metrics, req, res, () => PORTS_ROUTE);
        ports.handle(req, res);
      });
      return true;
    });
  }
  app.useGlobalFilters(new DomainErrorFilter());
  app.enableShutdownHooks();
  installConsole(app);
  installMethodNotAllowed(app, installOpenApi(app));
  // Long query strings (a 4 096-character lineage `path`, percent-encoded) fit: Node's default is 16 KiB.
  (app.getHttpServer() as { maxHeaderSize?: number }).maxHeaderSize = MAX_HEADER_BYTES;

  const log = new Logger('Engine');
  // One engine: whatever ran when it last stopped was its own. Replicas: others may be running actions now; a dead
  // replica's are marked by whoever takes its sessions over (`ReplicaTakeover`).
  if (config.state.store === 'sqlite') {
    const interrupted = await app.get(ContextGraph).markRunningInterrupted(new Date().toISOString());
    if (interrupted > 0)
      log.warn({ msg: 'actions interrupted by the previous shutdown', count: interrupted });
  }
  // Say at start-up, not at the first action, which tiers cannot run and how to fix it (missing image, Docker down).
  const tiers = await tierAvailability(app.get(SandboxManager), app.get(BrowserRouter));
  for (const [tier, availability] of Object.entries(tiers)) {
    if (availability.available) log.log({ msg: 'tier available', tier });
    else log.warn({ msg: 'tier unavailable: its actions will be denied', tier, reason: availability.reason });
  }
  if (config.apiKeys.length === 0 && config.policy.adminKeys.length === 0) {
    log.warn(
      '!!! SWITCHYARD_API_KEYS is not set: the API is OPEN to anyone who can reach ' +
        `${config.host}:${config.port}. Set SWITCHYARD_API_KEYS before exposing it. !!!`,
    );
  }
  return app;
}
