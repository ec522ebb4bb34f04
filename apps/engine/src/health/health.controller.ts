import { Controller, Get, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { BrowserRouter } from '@switchyard/browser';
import { SandboxManager, type TierAvailability } from '@switchyard/sandbox';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';

export interface HealthResponse {
  status: 'ok';
  auth: 'api-keys' | 'open';
  tiers: Record<string, TierAvailability>;
  graph: { store: 'embedded' };
}

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly sandbox: SandboxManager,
    private readonly browser: BrowserRouter,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Liveness, and which execution tiers this engine can use right now' })
  async health(): Promise<HealthResponse> {
    const tiers = await this.sandbox.availability();
    return {
      status: 'ok',
      auth: this.config.apiKeys.length > 0 ? 'api-keys' : 'open',
      tiers: { ...tiers, browser: await this.browser.availability() },
      graph: { store: 'embedded' },
    };
  }
}
