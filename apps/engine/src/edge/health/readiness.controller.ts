import { Controller, Get, Inject, Req, ServiceUnavailableException } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import {
  ApiBearerAuth,
  ApiOkResponse,
  ApiOperation,
  ApiSecurity,
  ApiServiceUnavailableResponse,
  ApiTags,
} from '@nestjs/swagger';
import {
  HealthCheck,
  HealthCheckService,
  HealthIndicatorService,
  type HealthCheckResult,
  type HealthIndicatorResult,
} from '@nestjs/terminus';
import { BrowserRouter } from '@switchyard/browser';
import { ContextGraph } from '@switchyard/context-graph';
import {
  DOCKER_UNAVAILABLE,
  SANDBOX_IMAGE_MISSING,
  SandboxManager,
  type TierAvailability,
} from '@switchyard/sandbox';
import type { Request } from 'express';
import { ExecutionEngine } from '../../engine/actions/execution-engine.service';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ApiKeys } from '../http/api-keys';
import { ApiErrors, ERROR_RESPONSE } from '../http/api-responses';
import { jsonBody } from '../http/response-schemas';
import { errorBody } from '../../platform/validation/error-body';
import { clusterReadiness } from './cluster-readiness';

/**
 * Kubernetes-style probes: `live` answers while the process serves HTTP; `ready` checks each dependency
 * (graph store, Docker and the one-off tier's container runtime — or, with the Kubernetes backend, the cluster —, the
 * sandbox image, bubblewrap, Chromium) and turns 503 when one is down or the engine is shutting down.
 */
@ApiTags('health')
@Controller('health')
export class ReadinessController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly engine: ExecutionEngine,
    private readonly sandbox: SandboxManager,
    private readonly browser: BrowserRouter,
    private readonly graph: ContextGraph,
    private readonly keys: ApiKeys,
    private readonly ref: ModuleRef,
  ) {}

  @Get('live')
  @ApiOperation({ summary: 'Liveness: the process answers' })
  @ApiSecurity({})
  @ApiOkResponse({ description: 'Alive', ...jsonBody('Liveness') })
  @ApiErrors(500)
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  // Above @HealthCheck, so that it replaces the schema of terminus' own 200 (whose `status` may be `error`). Nest
  // merges the two entries: a `schema` replaces terminus' `schema` (a `content` would not), and the description
  // stays terminus'.
  @ApiOkResponse({ schema: jsonBody('Readiness').content['application/json'].schema })
  @ApiServiceUnavailableResponse({
    description:
      'Not ready: `NOT_READY`; for a trusted caller the message names the indicators that are down and ' +
      '`details.indicators` has each one',
    schema: { $ref: `#/components/schemas/${ERROR_RESPONSE}` },
  })
  @HealthCheck()
  @ApiOperation({
    summary: 'Readiness: one indicator per dependency; 503 when one is down or during shutdown',
    description:
      'With SWITCHYARD_API_KEYS set, the indicators and their reasons are shown only to requests with a valid key; ' +
      'others get the status alone (`{"status":"ok"}` with 200, `NOT_READY` with 503).',
  })
  @ApiErrors(500)
  // The key is optional: `{}` (anonymous) or a bearer key, which shows the indicators.
  @ApiSecurity({})
  @ApiBearerAuth()
  async ready(@Req() req: Request): Promise<HealthCheckResult | { status: 'ok' }> {
    const trusted = this.keys.trusted(req);
    try {
      const report = await this.check();
      return trusted ? report : { status: 'ok' };
    } catch (err) {
      throw notReady(err, trusted);
    }
  }

  private async check(): Promise<HealthCheckResult> {
    // One probe of the tiers serves the three indicators that depend on it.
    const tiers = this.engine.isShuttingDown ? undefined : await this.sandbox.availability();
    const shuttingDown: TierAvailability = { available: false, reason: 'not checked: shutting down' };
    const tier = (key: string, a: TierAvailability) => this.tier(key, a);
    return this.health.check([
      () => {
        const session = this.indicators.check('engine');
        return this.engine.isShuttingDown ? session.down({ reason: 'shutting_down' }) : session.up();
      },
      async () => {
        const session = this.indicators.check('graph');
        try {
          // Degraded Neo4j still serves: records wait in the local outbox, so the engine stays ready.
          const h = await this.graph.health();
          return session.up({ store: h.store, state: h.status, backlog: h.backlog });
        } catch (err) {
          return session.down({ reason: (err as Error).message });
        }
      },
      () => tier('bubblewrap', tiers?.subprocess ?? shuttingDown),
      ...(this.config.kubernetes.backend === 'kubernetes'
        ? this.cluster(tiers?.pooled ?? shuttingDown)
        : this.docker(tiers, shuttingDown)),
      async () => tier('chromium', await this.browser.availability()),
    ]);
  }

  /**
   * The Kubernetes backend: `kubernetes` is down while the cluster cannot run a session's pod (the API server, the
   * credentials and rights, the namespace, a Ready node, or the latest pod did not start; the reason and its code say
   * which), `sandbox_image` while the nodes cannot have the image (on no Ready node, or its pull failed).
   */
  private cluster(a: TierAvailability): Array<() => HealthIndicatorResult> {
    const r = clusterReadiness(this.ref, a);
    const imageMissing = r.code === SANDBOX_IMAGE_MISSING;
    return [
      () => {
        const session = this.indicators.check('kubernetes');
        if (r.ready || imageMissing) {
          return session.up({ namespace: this.config.kubernetes.namespace });
        }
        return session.down({ reason: r.reason ?? 'unknown', ...(r.code !== undefined && { code: r.code }) });
      },
      () => {
        const session = this.indicators.check('sandbox_image');
        return imageMissing ? session.down({ reason: r.reason ?? 'unknown' }) : session.up();
      },
    ];
  }

  /** The Docker backend: the daemon, the one-off tier's runtime, the image. */
  private docker(
    tiers: Record<string, TierAvailability> | undefined,
    shuttingDown: TierAvailability,
  ): Array<() => HealthIndicatorResult> {
    return [
      () => {
        // Docker itself is down when the tier says the engine does not answer; a missing image is its own check.
        const a = tiers?.container;
        const dockerDown = !a || (!a.available && a.code === DOCKER_UNAVAILABLE);
        const session = this.indicators.check('docker');
        return dockerDown ? session.down({ reason: a?.reason ?? shuttingDown.reason }) : session.up();
      },
      () => {
        // The runtime the one-off tier uses (runsc: gVisor); down when Docker lacks the one its setting names.
        const a = tiers?.container;
        const runtime = a?.details?.runtime;
        const session = this.indicators.check('container_runtime');
        if (typeof runtime === 'string') return session.up({ runtime });
        return session.down({ reason: a?.reason ?? shuttingDown.reason });
      },
      () => this.tier('sandbox_image', tiers?.container ?? shuttingDown),
    ];
  }

  /** Up when the tier is available, else down with its reason. */
  private tier(key: string, a: TierAvailability): HealthIndicatorResult {
    const session = this.indicators.check(key);
    return a.available ? session.up() : session.down({ reason: a.reason ?? 'unknown' });
  }
}

/**
 * The 503 of `ready`, in the error envelope of every other answer: the indicators that are down in the message, the
 * whole report in `details.report` (both only for a trusted caller; others learn that the engine is not ready).
 */
function notReady(err: unknown, trusted: boolean): unknown {
  if (!(err instanceof ServiceUnavailableException)) return err;
  const report = err.getResponse() as Partial<HealthCheckResult>;
  if (!trusted) return new ServiceUnavailableException(errorBody('NOT_READY', 'not ready'));
  const down = Object.entries(report.error ?? {}).map(([name, r]) =>
    typeof r?.reason === 'string' ? `${name} (${r.reason})` : name,
  );
  return new ServiceUnavailableException(
    errorBody('NOT_READY', `not ready: ${down.join('; ') || 'a dependency is down'}`, [], {
      indicators: report.details ?? {},
    }),
  );
}
