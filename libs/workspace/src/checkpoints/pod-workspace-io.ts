/**
 * How the engine reaches a session's workspace when it lives in the session's own pod (the Kubernetes backend)
 * rather than in a directory on the engine's host: only as a tar, out of it or into it. Given (under
 * `POD_WORKSPACE_IO`), every session's checkpoints are tars kept by `PodCheckpointStore`.
 *
 * Whatever `tarOut` answers is the sandbox's output: the engine treats it as untrusted (its size, paths, links and
 * entry types), and never unpacks it on its own filesystem.
 */
export abstract class PodWorkspaceIo {
  /**
   * The session's workspace as a tar (GNU/POSIX ustar or pax, from `tar -C /workspace -cf - .`): regular files,
   * directories, symlinks; modes and mtimes kept.
   */
  abstract tarOut(sessionId: string): Promise<Buffer>;
  /**
   * Unpacks `tar` into the session's workspace; `replace` empties it first (so what the tar lacks is gone);
   * `dataOnly` then takes out fifos, sockets and devices (a tar may hold fifos: a checkpoint does not keep them).
   */
  abstract tarIn(
    sessionId: string,
    tar: Buffer,
    options: { replace: boolean; dataOnly?: boolean },
  ): Promise<void>;
}

/** The Nest token of the `PodWorkspaceIo` the Kubernetes backend provides (absent: workspaces are host directories). */
export const POD_WORKSPACE_IO = Symbol('switchyard:workspace:pod-io');
