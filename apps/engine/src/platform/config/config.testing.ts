import { ConfigError, loadEngineConfig } from './engine-config';

/** @internal Tests only: the problems `loadEngineConfig` names for `env` (fails the test when there are none). */
export function problemsOf(env: NodeJS.ProcessEnv): ConfigError['problems'] {
  try {
    loadEngineConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}
