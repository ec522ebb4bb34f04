/** The runner's connection closed (runner exited, container stopped or removed, daemon gone). */
export class RunnerGoneError extends Error {}
/** The runner did not answer in time. */
export class RunnerTimeoutError extends Error {}
/** The runner refused a request or sent something that is not the protocol. */
export class RunnerProtocolError extends Error {}
/**
 * The runner refused a request on purpose; `code` says why: `workspace` (/workspace is not the expected one), `busy`,
 * `exists`, `no_kernel`, `kernel_start`, `env`, `cwd`, `proc_start`, `closed`, `signal`, `connect` (nothing accepts
 * connections on that port), `tunnel_limit`, `term_start`, `term_limit`.
 */
export class RunnerRefusedError extends RunnerProtocolError {
  constructor(
    message: string,
    readonly code?: string,
    /** For `workspace`: device and inode of what /workspace is in the container. */
    readonly workspace?: [string, string],
  ) {
    super(message);
  }
}
