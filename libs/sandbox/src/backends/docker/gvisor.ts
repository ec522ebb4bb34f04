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
 * `clone3` stays allowed because this runsc answers ENOSYS itself (glibc then uses `clone`, whose namespace flags are
 * denied below). A runsc that implements `clone3` also honours `errnoRet`; with one, give `clone3` Docker's ENOSYS
 * rule back.
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

/** Docker's seccomp profile format (`SecurityOpt: ["seccomp=<json>"]`); EPERM for every denial. */
export const GVISOR_SECCOMP_PROFILE = {
  defaultAction: 'SCMP_ACT_ALLOW',
  syscalls: [
    { names: DENIED, action: 'SCMP_ACT_ERRNO' },
    ...CLONE_NAMESPACE_FLAGS.map((flag) => ({
      names: ['clone'],
      action: 'SCMP_ACT_ERRNO',
      args: [{ index: 0, value: flag, valueTwo: flag, op: 'SCMP_CMP_MASKED_EQ' }],
    })),
  ],
} as const;

/** `HostConfig.SecurityOpt` of one-off containers on gVisor: no new privileges, and the profile above. */
export const GVISOR_SECURITY_OPT: string[] = [
  'no-new-privileges',
  `seccomp=${JSON.stringify(GVISOR_SECCOMP_PROFILE)}`,
];
