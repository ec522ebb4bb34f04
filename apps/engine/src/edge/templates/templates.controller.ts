import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiV1Errors } from '../http/api-responses';
import { ApiKeyGuard } from '../http/api-key.guard';
import { jsonBody } from '../http/response-schemas';
import { TemplateRegistry, type TemplateView } from '../../session/templates/template-registry';

@ApiTags('templates')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/templates')
export class TemplatesController {
  constructor(private readonly registry: TemplateRegistry) {}

  @Get()
  @ApiOperation({
    summary: 'Sandbox templates sessions may pick, with their build state',
    description:
      'Each template of SWITCHYARD_TEMPLATES_DIR: packages, env, the image sessions with it run in, and its state ' +
      '(`ready`, `stale`: the file or base image changed since the last build, `missing`, `invalid`, `unknown`: ' +
      'Docker did not answer), with `build`, the command that makes it ready.',
  })
  @ApiOkResponse({ description: 'The templates', ...jsonBody('TemplateList') })
  async list(): Promise<{ templates: TemplateView[] }> {
    return { templates: await this.registry.list() };
  }
}
