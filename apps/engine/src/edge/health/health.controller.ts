import { Controller, Get, Inject, Req } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiSecurity, ApiTags } from '@nestjs/swagger';
import { ApiErrors } from '../http/api-responses';
import { BrowserRouter } from '@switchyard/browser';
import { ContextGraph, type GraphHealth } from '@switchyard/context-graph';
import { SandboxManager, type TierAvailability } from '@switchyard/sandbox';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ApiKeys } from '../http/api-keys';
import { jsonBody } from '../http/response-schemas';
import { ReplicaLeases } from '../../engine/replicas/replica-leases';
import type { Request } from 'express';
import { clusterReadiness } from './cluster-readiness';

/** With API keys set, a request without a valid key gets `status` alone: the rest is for operators. */
export interface HealthResponse {
  status: 'ok';
  auth?: 'api-keys' | 'open';
  tiers?: Record<string, TierAvailability>;
  backend?: {
    name: 'docker' | 'kubernetes';
    namespace?: string;
    kubeconfig?: string;
    context?: string;
    ready: boolean;
    reason?: string;
    /** Kubernetes: why not, for code (`KUBERNETES_NAMESPACE_MISSING`, `POD_START_TIMEOUT`, …). */
    code?: string;
  };
  /** `degraded` while Neo4j cannot be reached; `backlog` records wait in the local outbox meanwhile. */
  graph?: GraphHealth;
  /** Where the engine's state is (SWITCHYARD_STATE); with replicas, this one's id and how many hold a lease. */
  state?: { store: 'sqlite' | 'postgres'; replica?: string; replicas?: number };
}

/** Every execution tier's availability: the sandbox tiers' and the browser's. */
export async function tierAvailability(
  sandbox: SandboxManager,
  browser: BrowserRouter,
): Promise<Record<string, TierAvailability>> {
  return { ...(await sandbox.availability()), browser: await browser.availability() };
}

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly sandbox: SandboxManager,
    private readonly browser: BrowserRouter,
    private readonly graph: ContextGraph,
    private readonly keys: ApiKeys,
    private readonly ref: ModuleRef,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'Liveness, and which execution tiers this engine can use right now',
    description:
      'With SWITCHYARD_API_KEYS set, the tiers, the graph store and their reasons (host paths, the Docker endpoint) ' +
      'are shown only to requests with a valid key; others get `{"status":"ok"}`.',
  })
  // The key is optional: `{}` (anonymous) or a bearer key, which shows the details.
  @ApiSecurity({})
  @ApiBearerAuth()
  @ApiOkResponse({ description: 'Alive', ...jsonBody('Health') })
  @ApiErrors(500)
  async health(@Req() req: Request): Promise<HealthResponse> {
    if (!this.keys.trusted(req)) return { status: 'ok' };
    const tiers = await tierAvailability(this.sandbox, this.browser);
    return {
      status: 'ok',
      auth: this.keys.open ? 'open' : 'api-keys',
      backend: this.backend(tiers),
      tiers,
      graph: await this.graph.health(),
      state: await this.state(),
    };
  }

  private async state(): Promise<NonNullable<HealthResponse['state']>> {
    if (this.config.state.store === 'sqlite') return { store: 'sqlite' };
    const leases = this.ref.get(ReplicaLeases, { strict: false });
    const live = await leases.live().catch(() => undefined);
    return { store: 'postgres', replica: leases.replicaId, ...(live && { replicas: live.length }) };
  }

  /**
   * The backend of the container tiers and its readiness: Docker's daemon as the pooled tier found it; the cluster as
   * the pooled tier found it and as its latest pod start went (`clusterReadiness`).
   */
  private backend(tiers: Record<string, TierAvailability>): NonNullable<HealthResponse['backend']> {
    const k8s = this.config.kubernetes;
    const pooled = tiers.pooled;
    if (k8s.backend === 'docker') {
      return {
        name: 'docker',
        ready: pooled?.available === true,
        ...(pooled && !pooled.available && pooled.reason !== undefined && { reason: pooled.reason }),
      };
    }
    return {
      name: 'kubernetes',
      namespace: k8s.namespace,
      ...(k8s.kubeconfigPath !== undefined && { kubeconfig: k8s.kubeconfigPath }),
      ...(k8s.context !== undefined && { context: k8s.context }),
      ...clusterReadiness(this.ref, pooled),
    };
  }
}
