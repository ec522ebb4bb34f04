import type { Logger } from '@nestjs/common';
import type { ResolvedContainerOptions } from './container.options';
import { CONTAINER_TIER_LABEL, LABEL_ENGINE, LABEL_TIER } from './container.constants';
import { ATTACHED_STDIO } from './container-spec';
import type { DockerClient } from './docker-client';
import { type GvisorClone3, gvisorSecurityOpt } from './gvisor';

/** How long one probe container may take (a gVisor boot on a loaded 2-core machine is well under a second). */
const PROBE_TIMEOUT_MS = 30_000;

/** Calls `clone3(NULL, 0)` and exits with its errno: ENOSYS (38) unimplemented or denied so, EPERM (1), EFAULT… */
const PROBE_CODE =
  'import ctypes, sys\n' +
  'libc = ctypes.CDLL(None, use_errno=True)\n' +
  'libc.syscall(435, None, 0)\n' +
  'sys.exit(ctypes.get_errno())\n';

const ENOSYS = 38;
const EPERM = 1;

/**
 * Which seccomp profile the engine's runsc needs (see gvisor.ts), found by running it once per image and runtime:
 * a container with the `enosys` profile (Docker's ENOSYS rule for `clone3`) that calls `clone3`. ENOSYS: this runsc
 * honours `errnoRet` (`enosys`). Else, if the same call without the rule answers ENOSYS too, the runsc does not
 * implement `clone3` (Debian's: `runtime`). A runsc that implements `clone3` and ignores `errnoRet` gets `runtime`,
 * the only profile its threads start under, and a warning: code in its sandboxes can make namespaces of gVisor's
 * kernel through `clone3`. A probe that fails (Docker down, no image) is not kept: the next run asks again, and runs
 * meanwhile get `runtime`.
 */
export class GvisorSeccompProbe {
  private readonly known = new Map<string, Promise<GvisorClone3>>();
  private closed = false;

  constructor(
    private readonly docker: DockerClient,
    private readonly options: Pick<ResolvedContainerOptions, 'user' | 'interpreters' | 'engineInstanceId'>,
    private readonly logger: Logger,
  ) {}

  /** The profile choice for runs of `image` on `runtime` (`runtime` for anything but runsc). */
  clone3For(image: string, runtime: string | undefined): Promise<GvisorClone3> {
    if (runtime !== 'runsc' || this.closed) return Promise.resolve('runtime');
    let known = this.known.get(image);
    if (!known) {
      known = this.find(image).catch((err: unknown) => {
        this.known.delete(image);
        this.logger.warn(`cannot probe runsc's seccomp handling with ${image}: ${(err as Error).message}`);
        return 'runtime' as const;
      });
      this.known.set(image, known);
    }
    return known;
  }

  /** Shutdown: no probe starts any more (the tier refuses runs by then anyway). */
  close(): void {
    this.closed = true;
  }

  /** Forgets every answer (the daemon may have been given another runsc). */
  forget(): void {
    this.known.clear();
  }

  private async find(image: string): Promise<GvisorClone3> {
    const ruled = await this.errnoOf(image, 'enosys');
    if (ruled === ENOSYS) {
      this.logger.log(
        'runsc honours seccomp errnoRet: clone3 answers ENOSYS to the code (its profile says so)',
      );
      return 'enosys';
    }
    // Anything but EPERM (the rule's errno ignored) is no answer: a probe killed (shutdown), a python that failed.
    if (ruled !== EPERM) throw new Error(`the probe exited with ${ruled}, not an errno of clone3`);
    const unruled = await this.errnoOf(image, 'runtime');
    if (unruled !== ENOSYS) {
      this.logger.warn(
        `this runsc implements clone3 (errno ${unruled} for a bad call) but answers EPERM to every seccomp rule: ` +
          'clone3 stays allowed so that threads start, and code under gVisor can make namespaces of its kernel ' +
          'through it; register the runsc scripts/k8s.sh builds (bash scripts/docker-engine.sh does) to close that',
      );
    }
    return 'runtime';
  }

  /** Runs the probe under the `clone3` profile choice; resolves with its exit code (the errno it saw). */
  private async errnoOf(image: string, clone3: GvisorClone3): Promise<number> {
    const call = { timeoutMs: PROBE_TIMEOUT_MS };
    const id = await this.docker.createContainer(
      {
        Image: image,
        User: this.options.user,
        Entrypoint: [this.options.interpreters.python, '-I', '-S', '-c', PROBE_CODE],
        Cmd: [],
        // Labelled as the tier's own: a probe a crash left behind is reaped with them.
        Labels: { [LABEL_ENGINE]: this.options.engineInstanceId, [LABEL_TIER]: CONTAINER_TIER_LABEL },
        ...ATTACHED_STDIO,
        NetworkDisabled: true,
        HostConfig: {
          Runtime: 'runsc',
          NetworkMode: 'none',
          CapDrop: ['ALL'],
          ReadonlyRootfs: true,
          Memory: 256 * 2 ** 20,
          MemorySwap: 256 * 2 ** 20,
          PidsLimit: 128,
          SecurityOpt: gvisorSecurityOpt(clone3),
        },
      },
      call,
    );
    try {
      const streams = await this.docker.attach(id, call);
      streams.stdin.end();
      streams.stdout.resume();
      streams.stderr.resume();
      try {
        await this.docker.start(id, call);
        const exit = await this.docker.wait(id, call);
        return exit.statusCode;
      } finally {
        streams.destroy();
      }
    } finally {
      await this.docker.remove(id, call).catch(() => undefined);
    }
  }
}
