/**
 * Host threads a gVisor sandbox needs for itself, on top of the code's own: on the ptrace platform its kernel (Go
 * runtime threads), its file proxy and one stub per thread of the code all sit in the container's pids cgroup (about
 * 45 for an idle sandbox here). The one-off tier adds this to `PidsLimit` on runsc, so the code keeps the budget
 * SWITCHYARD_CONTAINER_PIDS names; without it, node at the 64 minimum cannot start its threads and the sandbox dies.
 */
export const GVISOR_SANDBOX_PIDS = 64;

/**
 * The seccomp profile of one-off containers on gVisor (`runsc`, registered with `--oci-seccomp` so the sandbox applies
 * it to the code inside).
 *
 * Why not Docker's default profile: Debian's runsc (2022) ignores a rule's `errnoRet`, and Docker's default answers
 * `clone3` with ENOSYS through one, so glibc's fallback to `clone` never happens and no thread can start (node does not
 * start at all, Python's `threading` fails). This profile keeps what the default denies to a container without
 * capabilities, as far as gVisor's kernel would otherwise grant it to the sandbox user: namespaces (so `unshare` and
 * user namespaces fail, as SECURITY.md 10 asks), mounts, the kernel keyring, BPF, perf, userfaultfd, the kernel log,
 * modules, kexec, reboot, swap, quotas, clocks, host and domain names, I/O ports, file handles and NUMA policies.
 * Everything else reaches gVisor's kernel, never the host's: the sandbox process that serves it runs under gVisor's
 * own, much narrower seccomp filter on the host.
 *
 * `clone3` takes its flags in memory, where no seccomp rule can look, so it must answer ENOSYS (glibc then uses `clone`,
 * whose namespace flags are denied below). Debian's runsc does not implement it and answers ENOSYS itself: there the
 * profile leaves it alone (`clone3: 'runtime'`). A runsc that implements it (gVisor since 2023) must be given Docker's
 * ENOSYS rule (`clone3: 'enosys'`), which works only where runsc honours `errnoRet`: upstream's does not (its OCI
 * seccomp answers EPERM to every rule); the one `scripts/k8s.sh` builds is patched to. Which of the two a runsc needs
 * is found by running it (`GvisorSeccompProbe`).
 */

/** `clone` flags that create namespaces (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET). */
const CLONE_NAMESPACE_FLAGS = [0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000];

const DENIED = [
  // namespaces and mounts
  'unshare',
  'setns',
  'mount',
  'umount2',
  'pivot_root',
  'chroot',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'move_mount',
  'open_tree',
  'mount_setattr',
  // kernel keyring, BPF, tracing of the kernel
  'keyctl',
  'add_key',
  'request_key',
  'bpf',
  'perf_event_open',
  'userfaultfd',
  'lookup_dcookie',
  // the kernel log, accounting, modules, kexec, reboot, swap, quotas
  'syslog',
  'acct',
  'init_module',
  'finit_module',
  'delete_module',
  'kexec_load',
  'kexec_file_load',
  'reboot',
  'swapon',
  'swapoff',
  'quotactl',
  'nfsservctl',
  // clocks, names, I/O ports, file handles, NUMA policies, obsolete calls
  'settimeofday',
  'clock_settime',
  'clock_adjtime',
  'sethostname',
  'setdomainname',
  'iopl',
  'ioperm',
  'open_by_handle_at',
  'name_to_handle_at',
  'mbind',
  'migrate_pages',
  'move_pages',
  'set_mempolicy',
  'vhangup',
  'uselib',
  'ustat',
  'sysfs',
  '_sysctl',
];

/** ENOSYS on x86-64 and arm64. */
const ENOSYS = 38;

/**
 * How the profile treats `clone3`: `enosys`, denied with ENOSYS through `errnoRet` (a runsc that implements it and
 * honours `errnoRet`); `runtime`, left to the runsc (one that does not implement it, and answers ENOSYS itself).
 */
export type GvisorClone3 = 'enosys' | 'runtime';

/** Docker's seccomp profile format (`SecurityOpt: ["seccomp=<json>"]`); EPERM for every denial but `clone3`'s. */
export function gvisorSeccompProfile(clone3: GvisorClone3) {
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    syscalls: [
      { names: DENIED, action: 'SCMP_ACT_ERRNO' },
      ...CLONE_NAMESPACE_FLAGS.map((flag) => ({
        names: ['clone'],
        action: 'SCMP_ACT_ERRNO',
        args: [{ index: 0, value: flag, valueTwo: flag, op: 'SCMP_CMP_MASKED_EQ' }],
      })),
      ...(clone3 === 'enosys' ? [{ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS }] : []),
    ],
  };
}

/** The profile for a runsc that leaves `clone3` unimplemented (Debian's). */
export const GVISOR_SECCOMP_PROFILE = gvisorSeccompProfile('runtime');

/** `HostConfig.SecurityOpt` of one-off containers on gVisor: no new privileges, and the profile above. */
export function gvisorSecurityOpt(clone3: GvisorClone3): string[] {
  return ['no-new-privileges', `seccomp=${JSON.stringify(gvisorSeccompProfile(clone3))}`];
}
