import { Global, Module } from '@nestjs/common';
import { SessionTemplates } from './session-templates';
import { TemplateRegistry } from './template-registry';
import { templateFilesCheck } from './template-files';

/**
 * Sandbox templates (`SWITCHYARD_TEMPLATES_DIR`): their listing and build state, and what a session's template means
 * for its actions. Every template file is checked at boot. Global: sessions check the name at creation, the code and process handlers route by it.
 */
@Global()
@Module({
  providers: [templateFilesCheck, TemplateRegistry, SessionTemplates],
  exports: [TemplateRegistry, SessionTemplates],
})
export class TemplatesModule {}
