import type { ErrorKind } from '@switchyard/common';
import { SandboxError } from '../../core/sandbox.errors';

/**
 * Base of the faults a `DockerClient` reports. They are engine faults (the user's code never causes one), so the
 * sandbox manager turns them into an `error` outcome carrying `code` and `message`: messages name the Docker call
 * and, where there is one, the fix.
 */
export abstract class DockerError extends SandboxError {
  constructor(
    /** The Docker call that failed, e.g. `createContainer`. */
    readonly operation: string,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, { operation, ...details }, options);
  }
}

/**
 * The Docker engine did not answer (no socket, connection refused or reset, permission denied on the socket).
 * Retriable: it usually means the daemon is restarting. Start one with `npm run docker:engine`.
 */
export class DockerUnavailableError extends DockerError {
  readonly code = 'DOCKER_UNAVAILABLE';
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;

  constructor(operation: string, endpoint: string, reason: string, options?: { cause?: unknown }) {
    super(
      operation,
      `Docker engine at ${endpoint} is not answering (${reason}); start one with \`npm run docker:engine\` or set DOCKER_HOST`,
      { endpoint },
      options,
    );
  }
}

/** A Docker call took longer than allowed, or its caller gave up on it. Retriable. */
export class DockerTimeoutError extends DockerError {
  readonly code = 'DOCKER_TIMEOUT';
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;
}

/** The Docker engine answered with an error status. Retriable only for server-side (5xx) failures. */
export class DockerApiError extends DockerError {
  readonly code: string = 'DOCKER_API';
  readonly kind: ErrorKind = 'internal';
  override readonly retriable: boolean;

  constructor(
    operation: string,
    /** HTTP status from the daemon; 0 when the call failed without one. */
    readonly statusCode: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    const status = statusCode > 0 ? ` (HTTP ${statusCode})` : '';
    super(operation, `Docker ${operation} failed${status}: ${message}`, { statusCode }, options);
    this.retriable = statusCode >= 500;
  }
}

/** The container or image a call named does not exist (HTTP 404). A missing sandbox image needs `npm run sandbox:image`. */
export class DockerNotFoundError extends DockerApiError {
  override readonly code = 'DOCKER_NOT_FOUND';
  override readonly retriable = false;
}
