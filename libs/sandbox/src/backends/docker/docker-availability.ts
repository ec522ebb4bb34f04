import type { DockerClient } from './docker-client';
import { DockerTimeoutError, DockerUnavailableError } from './docker.errors';

/** `TierAvailability.code` of a container tier whose Docker engine does not answer. */
export const DOCKER_UNAVAILABLE = 'DOCKER_UNAVAILABLE';
/** `TierAvailability.code` of the one-off tier when the Docker engine lacks the runtime its setting asks for. */
export const CONTAINER_RUNTIME_UNAVAILABLE = 'CONTAINER_RUNTIME_UNAVAILABLE';
/** `TierAvailability.code` of a container tier with no sandbox image configured or built. */
export const SANDBOX_IMAGE_MISSING = 'SANDBOX_IMAGE_MISSING';

/** Why a container tier is down when Docker does not answer; the client's own message already names the fix. */
export function dockerUnreachable(endpoint: string, err: unknown): { code: string; reason: string } {
  const reason =
    err instanceof DockerUnavailableError
      ? err.message
      : `Docker engine at ${endpoint} is not answering (${(err as Error).message}); ` +
        'start one with `npm run docker:engine` or point DOCKER_HOST at one';
  return { code: DOCKER_UNAVAILABLE, reason };
}

/** How many times longer the second ping of a busy Docker engine may take than the first. */
const BUSY_PING_FACTOR = 4;

/**
 * Pings the Docker engine for an availability answer. An engine that refuses or is absent fails at once; one that
 * answered before and is only slow now (a loaded host: containers starting, gVisor at work) is given a second,
 * longer wait before the tier is called down, so that load alone never turns into `TIER_UNAVAILABLE` denials.
 */
export async function pingForAvailability(
  docker: Pick<DockerClient, 'ping'>,
  timeoutMs: number,
  answeredBefore: boolean,
): Promise<void> {
  try {
    await docker.ping({ timeoutMs });
  } catch (err) {
    if (!(err instanceof DockerTimeoutError) || !answeredBefore) throw err;
    await docker.ping({ timeoutMs: timeoutMs * BUSY_PING_FACTOR });
  }
}
