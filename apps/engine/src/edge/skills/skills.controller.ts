import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiTags,
} from '@nestjs/swagger';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { SKILL_NAME } from '../../state/skills/skill.types';
import { SKILL_BODY_SCHEMA } from './skill.schemas';
import { SkillRegistry, UnknownSkillError } from '../../engine/skills/skill-registry';
import type { SkillRecord } from '../../state/skills/skill.types';

const NAME_PARAM = { name: 'name', schema: { type: 'string' as const, pattern: SKILL_NAME.source } };

@ApiTags('skills')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/skills')
export class SkillsController {
  constructor(private readonly skills: SkillRegistry) {}

  @Get()
  @ApiOperation({
    summary: 'The skills the caller may call: the engine’s (SWITCHYARD_SKILLS_DIR), then its tenant’s',
    description:
      'Skills are also tools: GET /v1/tools lists them (as its policy allows) and /tool-calls and MCP call them.',
  })
  @ApiOkResponse({ description: 'The skills, with their schemas and bodies', ...jsonBody('SkillList') })
  list(@Tenant() tenant: string): { skills: SkillRecord[] } {
    return { skills: this.skills.list(tenant) };
  }

  @Get(':name')
  @ApiOperation({ summary: 'One skill, with its schemas and body' })
  @ApiParam(NAME_PARAM)
  @ApiOkResponse({ description: 'The skill', ...jsonBody('Skill') })
  @ApiErrors(404)
  get(@Tenant() tenant: string, @Param('name') name: string): SkillRecord {
    const skill = this.skills.find(tenant, name);
    if (!skill) throw new UnknownSkillError(name);
    return skill;
  }

  @Post()
  @ApiOperation({
    summary: 'Add a skill for the caller’s tenant: a tool made of other tools',
    description:
      'Its body (python or node) defines `main(input, ctx)`; `ctx.call(name, input)` runs another tool or skill of ' +
      'the session. The schemas are checked here (400 naming the field); 409 when the name is taken.',
  })
  @ApiBody({ schema: SKILL_BODY_SCHEMA })
  @ApiCreatedResponse({
    description: 'The skill as added',
    ...jsonBody('Skill'),
    links: {
      GetSkill: {
        operationId: 'SkillsController_get',
        parameters: { name: '$response.body#/name' },
        description: 'The skill',
      },
      DeleteSkill: {
        operationId: 'SkillsController_remove',
        parameters: { name: '$response.body#/name' },
        description: 'Remove it',
      },
    },
  })
  @ApiBodyErrors()
  @ApiErrors(409)
  add(@Tenant() tenant: string, @Body() body: unknown): Promise<SkillRecord> {
    return this.skills.add(tenant, body);
  }

  @Delete(':name')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Remove one of the caller’s tenant’s skills (the engine’s cannot be removed here)',
  })
  @ApiParam(NAME_PARAM)
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(403, 404)
  async remove(@Tenant() tenant: string, @Param('name') name: string): Promise<void> {
    await this.skills.remove(tenant, name);
  }
}
