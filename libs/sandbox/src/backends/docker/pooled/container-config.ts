import { SESSION_HOME } from '@switchyard/common';
import type Docker from 'dockerode';
import { LABEL_ENGINE, LABEL_SESSION, LABEL_TIER } from '../container.constants';
import { ATTACHED_STDIO, CODE_TMPFS_INODES, sandboxHostConfig, sandboxTmpfs } from '../container-spec';
import { SANDBOX_UID } from '../../../core/sandbox-image';
import { HOSTS_TARGET } from '../sandbox-hosts';
import type { PooledLimits } from './pooled.options';

export const POOLED_LABELS = Object.freeze({
  engine: LABEL_ENGINE,
  tier: LABEL_TIER,
  /** Docker labels cannot change after create, so a warm container cannot carry its future session (see README). */
  session: LABEL_SESSION,
  /** Name of the container's mount-point directory under `pooled.mountRoot`. */
  mountKey: 'dev.switchyard.pooled.key',
});
export const POOLED_TIER_LABEL = 'pooled';

export const WORKSPACE_TARGET = '/workspace';
/**
 * Where the session's egress proxy socket appears, when its policy allows network: a host directory of the
 * container's own (`<mountPoint>.egress`), in which the engine makes the socket at claim. The runner forwards
 * 127.0.0.1:3128 to it. Read-only: code can connect to the socket, not replace it.
 */
export const EGRESS_TARGET = '/run/switchyard-egress';
export const egressDirOf = (mountPoint: string): string => `${mountPoint}.egress`;
/**
 * Where the runner listens on `relay.sock` for the engine's raw-byte connections to the box's ports (see
 * docker/sandbox/runner/runner_relay.py): a host directory of the container's own (`<mountPoint>.relay`), owned by the
 * sandbox user, so the runner can bind there. The engine opens the socket without following links
 * (core/runner/runner-relay.ts): the box's code can write the directory too.
 */
export const RELAY_TARGET = '/run/switchyard-relay';
export const relayDirOf = (mountPoint: string): string => `${mountPoint}.relay`;
export const RELAY_SOCKET_NAME = 'relay.sock';

/** The runner writes each run's code here (its own small tmpfs, so a full /tmp cannot stop runs). */
export const CODE_DIR = '/run/switchyard';
const CODE_TMPFS_BYTES = 8 * 2 ** 20;
/**
 * The runner: isolated mode, and no `site` (it imports only the standard library, and skipping site-packages saves
 * a few ms of every container's start). Its modules are compiled ahead in the image (`scripts/sandbox-image.mjs`).
 */
export const RUNNER_CMD = ['/usr/bin/python3', '-I', '-S', '/opt/switchyard/runner/runner.py'];

export interface PooledContainerSpec {
  image: string;
  name: string;
  engineId: string;
  mountKey: string;
  /** Host directory (under the shared mount root) bind-mounted at /workspace with `rslave` propagation. */
  mountPoint: string;
  limits: PooledLimits;
  /** Host paths bound read-only at the same path (see `PooledOptions.readOnlyBinds`). */
  readOnlyBinds?: readonly string[];
  /** Host path of the read-only /etc/hosts (see `SandboxHostsFile`). */
  hostsFile: string;
}

/**
 * Create options of a warm container, with every setting SECURITY.md asks of container tiers: non-root, no
 * capabilities, no-new-privileges, Docker's default seccomp profile, read-only root with size-capped tmpfs,
 * no network, pids/memory (swap equal)/CPU limits, nofile/fsize ulimits and no core dumps, an init process, no
 * log driver, private IPC, labels for the reaper. Never the Docker socket. The runner is the main process, its
 * stdio attached to the engine.
 */
export function buildContainerConfig(spec: PooledContainerSpec): Docker.ContainerCreateOptions {
  const { limits } = spec;
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: RUNNER_CMD,
    Entrypoint: [],
    User: `${SANDBOX_UID}:${SANDBOX_UID}`,
    WorkingDir: WORKSPACE_TARGET,
    Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8', `HOME=${SESSION_HOME}`],
    Labels: {
      [POOLED_LABELS.engine]: spec.engineId,
      [POOLED_LABELS.tier]: POOLED_TIER_LABEL,
      [POOLED_LABELS.mountKey]: spec.mountKey,
    },
    // The engine's attach is the runner's stdin: when the engine goes, the runner reads EOF and the container ends.
    ...ATTACHED_STDIO,
    // No network set-up at all, as for one-off containers: a network namespace holding only `lo`, without the
    // daemon's sandbox set-up (`NetworkMode: none` in the shared host config stays as a second guard), which makes a
    // warm container start sooner. Docker then leaves /etc/hosts empty: the bind of `hostsFile` names loopback, so
    // `localhost` resolves for code that talks to the session's own background servers.
    NetworkDisabled: true,
    StopSignal: 'SIGKILL',
    HostConfig: {
      ...sandboxHostConfig(limits),
      Tmpfs: {
        ...sandboxTmpfs(limits.tmpfsBytes),
        [CODE_DIR]: `rw,nosuid,nodev,noexec,size=${CODE_TMPFS_BYTES},nr_inodes=${CODE_TMPFS_INODES},uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0700`,
      },
      Mounts: [
        {
          Type: 'bind',
          Source: spec.mountPoint,
          Target: WORKSPACE_TARGET,
          ReadOnly: false,
          BindOptions: { Propagation: 'rslave' },
        },
        { Type: 'bind', Source: egressDirOf(spec.mountPoint), Target: EGRESS_TARGET, ReadOnly: true },
        { Type: 'bind', Source: relayDirOf(spec.mountPoint), Target: RELAY_TARGET, ReadOnly: false },
        { Type: 'bind', Source: spec.hostsFile, Target: HOSTS_TARGET, ReadOnly: true },
        ...(spec.readOnlyBinds ?? []).map((p) => ({
          Type: 'bind' as const,
          Source: p,
          Target: p,
          ReadOnly: true,
        })),
      ],
    },
  };
}
