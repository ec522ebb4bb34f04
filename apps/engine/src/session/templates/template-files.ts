import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError, type ConfigProblem } from '../../platform/config/config-error';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { parseTemplateFile, TEMPLATE_EXTENSION, TemplateFileError } from './template-file';

const VARIABLE = 'SWITCHYARD_TEMPLATES_DIR';

/**
 * Reads every template file of the directory once at boot: a file that cannot be used stops start-up naming it (all
 * of them at once). An absent directory has no templates (the configuration refused a named one that is absent).
 */
export function checkTemplateFiles(dir: string): void {
  let files: string[];
  try {
    files = fs.readdirSync(dir).filter((f) => f.endsWith(TEMPLATE_EXTENSION));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new ConfigError([{ variable: VARIABLE, message: `${dir}: ${(err as Error).message}` }]);
  }
  const problems: ConfigProblem[] = [];
  for (const file of files.sort()) {
    const full = path.join(dir, file);
    try {
      parseTemplateFile(file.slice(0, -TEMPLATE_EXTENSION.length), fs.readFileSync(full, 'utf8'));
    } catch (err) {
      if (!(err instanceof TemplateFileError) && !(err as NodeJS.ErrnoException).code) throw err;
      problems.push({ variable: VARIABLE, message: `template file ${full}: ${(err as Error).message}` });
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

/** Token of the boot-time check (its value is the checked directory). */
export const TEMPLATE_FILES_CHECKED = Symbol('TEMPLATE_FILES_CHECKED');

export const templateFilesCheck = {
  provide: TEMPLATE_FILES_CHECKED,
  useFactory: (config: EngineConfig): string => {
    checkTemplateFiles(config.templates.dir);
    return config.templates.dir;
  },
  inject: [ENGINE_CONFIG],
};
