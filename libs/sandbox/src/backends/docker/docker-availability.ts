import { DockerUnavailableError } from './docker.errors';

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
