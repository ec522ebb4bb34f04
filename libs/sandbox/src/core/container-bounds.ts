import type { Bounds } from './integer-options';

const MiB = 2 ** 20;

/**
 * Ranges of the warm pool's capacity options, shared by the Docker pooled tier (`pooled.*`) and the Kubernetes
 * tiers (`kubernetes.*`): one operator setting feeds both, whichever backend runs. Declared here only; the engine's
 * settings refer to them.
 */
export const POOL_BOUNDS = {
  min: { min: 0, max: 64 },
  max: { min: 1, max: 256 },
  maxSessions: { min: 1, max: 4096 },
  acquireTimeoutMs: { min: 1, max: 600_000 },
  starts: { min: 1, max: 64 },
  demandWindowMs: { min: 1000, max: 86_400_000 },
} as const satisfies Record<string, Bounds>;

/**
 * Ranges of the limits every sandbox container or pod gets, whichever tier and backend starts it. `pids` is the range
 * SECURITY.md asks for; `cpus` is in CPUs (Docker's `nanoCpus` are these times 1e9).
 */
export const CONTAINER_LIMIT_BOUNDS = {
  memoryBytes: { min: 16 * MiB },
  cpus: { min: 0.01, max: 1024 },
  pids: { min: 64, max: 256 },
} as const satisfies Record<string, Bounds>;
