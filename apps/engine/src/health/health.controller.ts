import { Controller, Get, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { BrowserRouter } from '@switchyard/browser';
import { ContextGraph, type GraphHealth } from '@switchyard/context-graph';
import { SandboxManager, type TierAvailability } from '@switchyard/sandbox';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';

export interface HealthResponse {
  status: 'ok';
  auth: 'api-keys' | 'open';
  tiers: Record<string, TierAvailability>;
  /** `degraded` while Neo4j cannot be reached; `backlog` records wait in the local outbox meanwhile. */
  graph: GraphHealth;
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
  ) {}

  @Get()
  @ApiOperation({ summary: 'Liveness, and which execution tiers this engine can use right now' })
  async health(): Promise<HealthResponse> {
    return {
      status: 'ok',
      auth: this.config.apiKeys.length > 0 ? 'api-keys' : 'open',
      tiers: await tierAvailability(this.sandbox, this.browser),
      graph: await this.graph.health(),
    };
  }
}
