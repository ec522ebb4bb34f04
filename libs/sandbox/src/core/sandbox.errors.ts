import { SwitchyardError, type ErrorKind } from '@switchyard/common';

/**
 * Base of the engine faults a sandbox tier or the manager throws. Anything the user's code does (exit codes,
 * signals, timeouts, limits) is data in the result, never one of these.
 */
export abstract class SandboxError extends SwitchyardError {}

/**
 * The tier is at a capacity limit for this run (every pooled container is held, none came free in time). Not a fault:
 * the manager records the action `denied` with error class `limit`, and the message names the setting to raise.
 */
export abstract class SandboxCapacityError extends SandboxError {
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;
}

/** The tier cannot run anything right now (bubblewrap missing, namespaces refused, shutting down). */
export class SandboxUnavailableError extends SandboxError {
  readonly code = 'SANDBOX_UNAVAILABLE';
  readonly kind: ErrorKind = 'unavailable';
}

/** Preparing or cleaning up a run failed on the engine's side (temp files, cgroups, missing workspace). */
export class SandboxInternalError extends SandboxError {
  readonly code: string;
  readonly kind: ErrorKind = 'internal';
  override readonly retriable: boolean;

  constructor(code: string, message: string, options: { retriable?: boolean; cause?: unknown } = {}) {
    super(message, {}, { cause: options.cause });
    this.code = code;
    this.retriable = options.retriable ?? false;
  }
}

/** `SandboxModule.forRoot` was given options that cannot work; thrown at boot. The message names the option. */
export class SandboxConfigError extends SandboxError {
  readonly code = 'SANDBOX_CONFIG';
  readonly kind: ErrorKind = 'internal';

  constructor(option: string, message: string) {
    super(`sandbox option ${option}: ${message}`, { option });
  }
}
