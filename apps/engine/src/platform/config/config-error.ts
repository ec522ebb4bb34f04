/** One bad environment variable and what is wrong with it. */
export interface ConfigProblem {
  variable: string;
  message: string;
}

/** The environment cannot configure the engine; names every variable at fault (the engine exits 78). */
export class ConfigError extends Error {
  constructor(readonly problems: ConfigProblem[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  ${p.variable}: ${p.message}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Throws one `ConfigError` for `message` about `variable`. */
export function configFailure(variable: string, message: string): never {
  throw new ConfigError([{ variable, message }]);
}
