import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ForbiddenError } from '@switchyard/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { ENGINE_HOOKS } from '../../gates/hooks/engine-hooks';
import type { HookDefinition } from '../../gates/hooks/hook-file';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Principal } from '../../platform/auth/principal';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiErrors, ApiV1Errors } from '../http/api-responses';
import { validateDto } from '../../platform/validation/validate-dto';
import { jsonBody } from '../http/response-schemas';
import { Caller } from '../http/tenant.decorator';
import { SessionsService } from '../../session/sessions/sessions.service';
import { AfterHooks } from '../../gates/hooks/after-hooks';
import { HookDeliveriesQuery } from './dto/hook-deliveries.query';
import {
  type DeliveryStatus,
  type HookDelivery,
  HookDeliveryStore,
} from '../../state/hooks/hook-deliveries.store';
import type { HookPhase } from '../../state/hooks/hook-phase';

/** A configured hook as the API shows it: never its secret, and its URL without query or credentials. */
export interface HookView {
  name: string;
  phase: HookPhase;
  url: string;
  timeoutMs: number;
  retries: number;
  onFailure: 'allow' | 'deny';
  match?: Record<string, unknown>;
  deliveries: Partial<Record<DeliveryStatus, number>>;
}

const shownUrl = (url: string): string => {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
};

@ApiTags('hooks')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1')
export class HooksController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(ENGINE_HOOKS) private readonly hooks: HookDefinition[],
    private readonly store: HookDeliveryStore,
    private readonly after: AfterHooks,
    private readonly sessions: SessionsService,
  ) {}

  @Get('hooks')
  @ApiOperation({
    summary: 'The configured hooks (SWITCHYARD_HOOKS_FILE) and their deliveries by status (admin keys only)',
  })
  @ApiOkResponse({ description: 'The hooks', ...jsonBody('HookList') })
  @ApiErrors(403)
  async list(@Caller() caller: Principal): Promise<{ hooks: HookView[]; backlog: number }> {
    this.mustOperate(caller);
    const counts = await this.store.counts();
    return {
      hooks: this.hooks.map((h) => ({
        name: h.name,
        phase: h.phase,
        url: shownUrl(h.url),
        timeoutMs: h.timeoutMs,
        retries: h.retries,
        onFailure: h.onFailure,
        ...(h.match && { match: h.match }),
        deliveries: counts.get(h.name) ?? {},
      })),
      backlog: this.after.backlog,
    };
  }

  @Get('hooks/deliveries')
  @ApiOperation({
    summary: 'The latest hook deliveries, newest first: all for an admin key, the caller’s tenant’s else',
  })
  @ApiQuery({
    name: 'limit',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
  })
  @ApiOkResponse({ description: 'Deliveries, newest first', ...jsonBody('HookDeliveryList') })
  @ApiErrors(400)
  async deliveries(
    @Caller() caller: Principal,
    @Query() query: Record<string, unknown>,
  ): Promise<{ deliveries: HookDelivery[] }> {
    const { limit } = validateDto(HookDeliveriesQuery, query);
    return {
      deliveries: await this.store.recent(limit ?? 100, caller.admin ? undefined : caller.tenant),
    };
  }

  @Get('sessions/:sessionId/actions/:actionId/hooks')
  @ApiOperation({ summary: 'How the hooks were told of one action: each delivery, its attempts and outcome' })
  @ApiOkResponse({ description: 'The action’s deliveries, oldest first', ...jsonBody('HookDeliveryList') })
  @ApiErrors(404)
  async forAction(
    @Caller() caller: Principal,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
  ): Promise<{ deliveries: HookDelivery[] }> {
    this.sessions.get(caller.tenant, sessionId);
    return { deliveries: await this.store.forAction(sessionId, actionId) };
  }

  private mustOperate(caller: Principal): void {
    if (!caller.admin) {
      throw new ForbiddenError('only an admin key (SWITCHYARD_ADMIN_KEYS) may list the hooks', 'ADMIN_ONLY');
    }
  }
}
