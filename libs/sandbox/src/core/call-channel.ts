import * as fs from 'node:fs';
import { SandboxInternalError } from './sandbox.errors';
import { CALL_SOCKET_ENV, type CallChannel } from './sandbox.types';

/**
 * Where a one-off container or a bubblewrap sandbox sees the channel's directory (`CallChannel.socketDir`), mounted
 * read-only: the code can connect to the socket, not replace it. A pooled container sees its run's socket in its own
 * egress directory instead (`pooledCallSocketName`), which is mounted from the container's creation.
 */
export const CALL_DIR_TARGET = '/run/switchyard-call';
/** The channel's socket in its directory. */
export const CALL_SOCKET_NAME = 'call.sock';
/** `CALL_SOCKET_ENV` of a run in a one-off container or a bubblewrap sandbox. */
export const CALL_SOCKET_TARGET = `${CALL_DIR_TARGET}/${CALL_SOCKET_NAME}`;

/**
 * The name of a run's socket in a pooled container's egress directory: one per action, so a socket left by an earlier
 * run of the session is never this run's. Only characters safe in a file name, and short: the host path must fit a
 * Unix socket address (`MAX_SOCKET_PATH_BYTES`).
 */
export function pooledCallSocketName(actionId: string): string {
  return `call-${actionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40)}.sock`;
}

/** `sun_path` is 108 bytes on Linux, its terminating NUL included. */
export const MAX_SOCKET_PATH_BYTES = 107;

/**
 * The child's environment for a run: `env` with `CALL_SOCKET_ENV` naming the channel's socket as the sandbox sees it,
 * or without any such entry when the run has none. Set last, so nothing else in `env` (a template's environment; a
 * caller's own entry is refused by the env policy) can point the code at another socket.
 */
export function withCallSocket(
  env: Readonly<Record<string, string>>,
  socketPath: string | undefined,
): Record<string, string> {
  const out = { ...env };
  delete out[CALL_SOCKET_ENV];
  if (socketPath !== undefined) out[CALL_SOCKET_ENV] = socketPath;
  return out;
}

/**
 * The channel's directory must exist before it is bind-mounted (Docker would create a missing one, owned by root,
 * and bubblewrap would fail the run as a sandbox set-up error), and be a path both can take (absolute, no ":").
 */
export function checkCallSocketDir(channel: CallChannel): void {
  const dir = channel.socketDir;
  if (typeof dir !== 'string' || !dir.startsWith('/') || dir.includes(':') || dir.includes('\0')) {
    throw new SandboxInternalError(
      'CALL_SOCKET_DIR',
      `call channel directory ${JSON.stringify(dir)} cannot be bind-mounted (absolute, without ":")`,
    );
  }
  try {
    if (!fs.statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new SandboxInternalError(
      'CALL_SOCKET_DIR',
      `call channel directory ${dir}: ${(err as Error).message}`,
    );
  }
}
