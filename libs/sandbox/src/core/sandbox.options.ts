import { type Tier, TIERS } from '@switchyard/common';
import { DEFAULT_NICE_PATH, DEFAULT_SETPRIV_PATH } from './host-tools';
import type { TrustedCaFiles } from './env-policy';
import { type Bounds, checkIntegers, type IntegerOption } from './integer-options';
import { SandboxConfigError } from './sandbox.errors';
import type { OutputLimits, RiskThresholds, TierForLevel } from './sandbox.types';
import {
  resolveStatefulOptions,
  type ResolvedStatefulOptions,
  type StatefulOptions,
} from './stateful/stateful.options';
import { type PortsOptions, type ResolvedPortsOptions, resolvePortsOptions } from './stateful/ports.options';

export { checkIntegers, type IntegerOption };

const KiB = 1024;
const MiB = 1024 * KiB;

/** Resource limits and tuning of the subprocess (bubblewrap) tier. */
export interface SubprocessLimits {
  /**
   * RLIMIT_AS for python and bash. Default: none while a cgroup memory limit is in force; otherwise
   * `memoryBytes`. Node always gets at least 4 GiB because V8 reserves (not uses) that much address space.
   */
  addressSpaceBytes?: number;
  /** RLIMIT_FSIZE, largest file the code may write. Default 64 MiB. */
  fileSizeBytes: number;
  /** RLIMIT_NOFILE. Default 256. */
  openFiles: number;
  /** RLIMIT_CPU soft limit in seconds. Default: the run's timeout in whole seconds + 1. */
  cpuSeconds?: number;
  /** cgroup memory limit (swap disabled). Default 512 MiB. */
  memoryBytes: number;
  /** cgroup pids limit (processes + threads). Default 128. */
  pids: number;
  /**
   * cgroup CPU quota of each action in CPUs (0.01–1024), shared by everything it forks; needs the cpu controller
   * (v1: mounted; v2: delegated). Default 1; at most `sessionCpus` is in force. The code also runs at niceness 19
   * with or without cgroups.
   */
  cpus: number;
  /**
   * cgroup CPU quota of each session in CPUs (0.01–1024): all its concurrent actions, its kernels and background
   * processes share it, each action also held to `cpus`. Default 1. Needs the cpu controller, like `cpus`.
   */
  sessionCpus: number;
  /** Size of each tmpfs (`/tmp`, `/dev/shm`). Default 64 MiB. */
  tmpfsBytes: number;
  /**
   * Sandboxes kept launched ahead of time, already in their cgroup and waiting for a run's options, so a run
   * does not pay for the spawn and the cgroup move. Default 2; 0 launches every run from scratch.
   */
  warmSlots: number;
}

/** How per-action cgroups are found. */
export interface CgroupOptions {
  /** `auto` (default) tries cgroup v2, then v1, then runs with rlimits only; `off` skips cgroups. */
  mode: 'auto' | 'v2' | 'v1' | 'off';
  /**
   * cgroup v2 only: an absolute cgroupfs directory Switchyard may create `switchyard/` in, typically a
   * delegated, process-free cgroup (systemd `Delegate=yes`). Default: the engine's own cgroup, which only works
   * when that is the root of the hierarchy.
   */
  v2Parent?: string;
}

export interface OutputOptions {
  /** Per stream. Default 1 MiB. */
  maxBytes?: number;
  /** Per stream. Default 2000. */
  maxLines?: number;
  /**
   * Secret patterns (regular expressions or their source) replaced by `***REDACTED***` in stdout and stderr,
   * before truncation. Default `DEFAULT_SECRET_PATTERNS` (cloud, GitHub, Slack, API keys, private-key headers).
   */
  redact?: Array<string | RegExp>;
  /**
   * The engine's environment, as its configuration read it: the values of its secret-looking variables (names
   * containing KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL, values of 8+ characters) are redacted too. They
   * never reach the child; this catches them if they reach it some other way (a file in the workspace). Default
   * none: the library reads no environment of its own.
   */
  engineEnv?: EnvVars;
  /** Redact the secret values of `engineEnv`. Default true. */
  redactEngineSecrets?: boolean;
}

/** Shapes of common credentials; deliberately specific so ordinary output is left alone. */
export const DEFAULT_SECRET_PATTERNS: readonly RegExp[] = [
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, // AWS access key id
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/g,
  /\bgh[pousr]_[A-Za-z0-9]{36,}\b/g, // GitHub tokens
  /\bgithub_pat_[A-Za-z0-9_]{40,}\b/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g, // Slack
  /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}/g, // OpenAI / Anthropic style API keys
  /\bAIza[0-9A-Za-z_-]{35}\b/g, // Google API key
  /\b[Bb]earer\s+[A-Za-z0-9._~+/-]{16,}=*/g, // bearer tokens (Authorization headers)
  // The value of `*_TOKEN=…`, `*_SECRET: …`, `*PASSWORD=…` assignments (the name stays readable). V8 tries a
  // look-behind at every position, so it comes last and bounded: an unbounded `\s*` in it made a run of n blank
  // characters in output or input cost n² steps (64 Ki newlines held the engine 10 s); cheap one-character checks
  // first leave it to the few positions that follow `=`, `:`, a blank or a quote.
  /(?=[^\s"'])(?<=[=:\t "'])(?<=(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)[ \t]{0,16}[=:][ \t]{0,16}["']?)[^\s"']{6,}/gi,
];

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

/** Environment variables by name, as `process.env` holds them. */
export type EnvVars = Readonly<Record<string, string | undefined>>;

/** Literal patterns for secret values, e.g. the engine's own secrets as its configuration collected them. */
export function secretValuePatterns(values: readonly string[]): RegExp[] {
  return values.map((value) => new RegExp(value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g'));
}

/**
 * Literal patterns for the values of the secret-looking variables of `env` (names containing KEY, TOKEN, SECRET,
 * PASSWORD, PASSWD or CREDENTIAL, values of 8+ characters).
 */
export function engineSecretPatterns(env: EnvVars): RegExp[];
/** @deprecated The library reads no environment of its own: without `env` there is no pattern. Pass the env. */
export function engineSecretPatterns(): RegExp[];
export function engineSecretPatterns(env: EnvVars = {}): RegExp[] {
  return secretValuePatterns(
    Object.entries(env)
      .filter(
        (e): e is [string, string] => SECRET_NAME.test(e[0]) && typeof e[1] === 'string' && e[1].length >= 8,
      )
      .map(([, value]) => value),
  );
}

export interface RiskOptions {
  /** Scores at or above each threshold take that level. Default `{ medium: 20, high: 50, critical: 80 }`. */
  thresholds?: Partial<RiskThresholds>;
  /** Rule ids to ignore, e.g. `['unbounded-loop']`. Unknown ids fail at boot. */
  disabledRules?: string[];
  /** Weight (0–100) per rule id. Unknown ids fail at boot. */
  weights?: Record<string, number>;
}

export interface InterpreterPaths {
  /** Default `/usr/bin/python3`. */
  python: string;
  /** Default: the engine's own Node (`realpath(process.execPath)`). */
  node: string;
  /** Default `/bin/bash`. */
  bash: string;
}

/** What `SandboxModule.forRoot` accepts. Everything is optional; defaults are documented per field. */
export interface SandboxModuleOptions {
  /** Used when a request has no `timeoutMs`. Default 30 000. */
  defaultTimeoutMs?: number;
  /** Largest `timeoutMs` a request may ask for. Default 300 000. */
  maxTimeoutMs?: number;
  /** Largest `code`, in UTF-8 bytes. Default 1 MiB. */
  maxCodeBytes?: number;
  /** Largest `stdin`, in UTF-8 bytes. Default 1 MiB. */
  maxStdinBytes?: number;
  /** Per-stream output caps and redaction. */
  output?: OutputOptions;
  subprocess?: Partial<SubprocessLimits> & { cgroup?: Partial<CgroupOptions> };
  risk?: RiskOptions;
  /** Tier per risk level. Default `{ low: 'subprocess', medium: 'pooled', high: 'container' }`. */
  routing?: Partial<TierForLevel>;
  /** Let a caller pick a tier weaker than the one its risk routes to. Default false. */
  allowWeakerTier?: boolean;
  /**
   * Per-tier overrides of the run limits. A request asking for more time than its tier allows is `denied`; the
   * default timeout is lowered to the tier's maximum. Default: the global `maxTimeoutMs` and `output` caps.
   */
  tierLimits?: Partial<Record<Tier, TierRunLimitsOptions>>;
  interpreters?: Partial<InterpreterPaths>;
  /** Default `/usr/bin/bwrap`. */
  bwrapPath?: string;
  /** util-linux `prlimit`, sets the rlimits. Default `/usr/bin/prlimit`. */
  prlimitPath?: string;
  /** util-linux `setpriv`, ties each sandbox launcher to the engine (parent-death signal). Default `/usr/bin/setpriv`. */
  setprivPath?: string;
  /** coreutils `nice`, runs sandboxes at niceness 19. Default `/usr/bin/nice`. */
  nicePath?: string;
  /** POSIX shell the availability probe runs inside a sandbox. Default `/bin/sh`. */
  shellPath?: string;
  /**
   * Where the engine keeps its scratch files (code files, synthetic /etc); a fresh `switchyard-sandbox-*`
   * directory is made inside it and removed at shutdown. Default `os.tmpdir()`.
   */
  tempDir?: string;
  /** Extra host directories made visible read-only at the same path, e.g. an interpreter's lib dir. */
  extraReadOnlyBinds?: string[];
  /**
   * The operator's extra trusted CAs, as files on this host: every sandbox's environment names them
   * (`trustedCaEnv`), and the subprocess tier sees them read-only at the same paths (added to `extraReadOnlyBinds`).
   * The container tiers bind them through their own options. Default none.
   */
  trustedCa?: TrustedCaFiles;
  /**
   * Host uid/gid the sandbox launcher runs as. Default: `DEFAULT_SANDBOX_HOST_ID` when the engine is root
   * (so sandboxed code is never host root, and RLIMIT_NPROC applies), the engine's own ids otherwise; `null` keeps
   * the engine's ids. The session workspace must be writable by this uid.
   */
  runAs?: { uid: number; gid: number } | null;
  /** Session kernels and background processes. */
  stateful?: StatefulOptions;
  /** Which ports of a session's sandbox callers may open (`SessionPorts`). */
  ports?: PortsOptions;
}

export interface TierRunLimitsOptions {
  maxTimeoutMs?: number;
  output?: { maxBytes?: number; maxLines?: number };
}

export interface TierRunLimits {
  maxTimeoutMs: number;
  output: OutputLimits;
}

/** Options with every default applied; what the providers receive. */
export interface ResolvedSandboxOptions {
  tierLimits: Record<Tier, TierRunLimits>;
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  maxCodeBytes: number;
  maxStdinBytes: number;
  output: OutputLimits;
  subprocess: SubprocessLimits & { cgroup: CgroupOptions };
  risk: RiskOptions;
  routing: TierForLevel;
  allowWeakerTier: boolean;
  interpreters: InterpreterPaths;
  bwrapPath: string;
  prlimitPath: string;
  setprivPath: string;
  nicePath: string;
  shellPath: string;
  tempDir?: string;
  extraReadOnlyBinds: string[];
  trustedCa?: TrustedCaFiles;
  runAs?: { uid: number; gid: number };
  stateful: ResolvedStatefulOptions;
  ports: ResolvedPortsOptions;
}

/** Ranges of the subprocess tier's limits that are more than positive integers; declared here only. */
export const SUBPROCESS_BOUNDS = {
  cpus: { min: 0.01, max: 1024 },
  sessionCpus: { min: 0.01, max: 1024 },
  warmSlots: { min: 0, max: 64 },
} as const satisfies Record<string, Bounds>;

/** Host uid/gid of sandboxed code when the engine runs as root; the sandbox image's user has the same ids. */
export const DEFAULT_SANDBOX_HOST_ID = 10001;

export const DEFAULT_ROUTING: TierForLevel = { low: 'subprocess', medium: 'pooled', high: 'container' };

function compilePattern(pattern: string | RegExp, index: number): RegExp {
  try {
    const re = typeof pattern === 'string' ? new RegExp(pattern, 'g') : pattern;
    if (re.test('')) throw new Error('matches the empty string');
    return re.global ? re : new RegExp(re.source, `${re.flags}g`);
  } catch (err) {
    throw new SandboxConfigError(`output.redact[${index}]`, (err as Error).message);
  }
}

/** Applies defaults and fails loudly, naming the option, on anything that cannot work. */
export function resolveSandboxOptions(
  options: SandboxModuleOptions = {},
  nodePath: string = process.execPath,
): ResolvedSandboxOptions {
  const sub = options.subprocess ?? {};
  const maxTimeoutMs = options.maxTimeoutMs ?? 300_000;
  const output: OutputLimits = {
    maxBytes: options.output?.maxBytes ?? MiB,
    maxLines: options.output?.maxLines ?? 2000,
    redact: [
      ...(options.output?.redact ?? DEFAULT_SECRET_PATTERNS).map((p, i) => compilePattern(p, i)),
      ...(options.output?.redactEngineSecrets === false
        ? []
        : engineSecretPatterns(options.output?.engineEnv ?? {})),
    ],
  };
  const tierLimits = Object.fromEntries(
    TIERS.map((tier): [Tier, TierRunLimits] => {
      const o = options.tierLimits?.[tier] ?? {};
      return [
        tier,
        {
          maxTimeoutMs: o.maxTimeoutMs ?? maxTimeoutMs,
          output: {
            ...output,
            maxBytes: o.output?.maxBytes ?? output.maxBytes,
            maxLines: o.output?.maxLines ?? output.maxLines,
          },
        },
      ];
    }),
  ) as Record<Tier, TierRunLimits>;
  const resolved: ResolvedSandboxOptions = {
    tierLimits,
    defaultTimeoutMs: options.defaultTimeoutMs ?? 30_000,
    maxTimeoutMs,
    maxCodeBytes: options.maxCodeBytes ?? MiB,
    maxStdinBytes: options.maxStdinBytes ?? MiB,
    output,
    subprocess: {
      addressSpaceBytes: sub.addressSpaceBytes,
      fileSizeBytes: sub.fileSizeBytes ?? 64 * MiB,
      openFiles: sub.openFiles ?? 256,
      cpuSeconds: sub.cpuSeconds,
      memoryBytes: sub.memoryBytes ?? 512 * MiB,
      pids: sub.pids ?? 128,
      cpus: sub.cpus ?? 1,
      sessionCpus: sub.sessionCpus ?? 1,
      tmpfsBytes: sub.tmpfsBytes ?? 64 * MiB,
      warmSlots: sub.warmSlots ?? 2,
      cgroup: { mode: sub.cgroup?.mode ?? 'auto', v2Parent: sub.cgroup?.v2Parent },
    },
    risk: options.risk ?? {},
    routing: { ...DEFAULT_ROUTING, ...options.routing },
    allowWeakerTier: options.allowWeakerTier ?? false,
    interpreters: {
      python: options.interpreters?.python ?? '/usr/bin/python3',
      node: options.interpreters?.node ?? nodePath,
      bash: options.interpreters?.bash ?? '/bin/bash',
    },
    bwrapPath: options.bwrapPath ?? '/usr/bin/bwrap',
    prlimitPath: options.prlimitPath ?? '/usr/bin/prlimit',
    setprivPath: options.setprivPath ?? DEFAULT_SETPRIV_PATH,
    nicePath: options.nicePath ?? DEFAULT_NICE_PATH,
    shellPath: options.shellPath ?? '/bin/sh',
    tempDir: options.tempDir,
    extraReadOnlyBinds: [
      ...(options.extraReadOnlyBinds ?? []),
      ...(options.trustedCa ? [options.trustedCa.bundle, options.trustedCa.extra] : []),
    ],
    ...(options.trustedCa && { trustedCa: options.trustedCa }),
    runAs:
      options.runAs === undefined
        ? process.getuid?.() === 0
          ? { uid: DEFAULT_SANDBOX_HOST_ID, gid: DEFAULT_SANDBOX_HOST_ID }
          : undefined
        : (options.runAs ?? undefined),
    stateful: resolveStatefulOptions(options.stateful),
    ports: resolvePortsOptions(options.ports),
  };
  const positive: Array<[string, number | undefined]> = [
    ['defaultTimeoutMs', resolved.defaultTimeoutMs],
    ['maxTimeoutMs', resolved.maxTimeoutMs],
    ['maxCodeBytes', resolved.maxCodeBytes],
    ['maxStdinBytes', resolved.maxStdinBytes],
    ['output.maxBytes', resolved.output.maxBytes],
    ['output.maxLines', resolved.output.maxLines],
    ['subprocess.addressSpaceBytes', resolved.subprocess.addressSpaceBytes],
    ['subprocess.fileSizeBytes', resolved.subprocess.fileSizeBytes],
    ['subprocess.openFiles', resolved.subprocess.openFiles],
    ['subprocess.cpuSeconds', resolved.subprocess.cpuSeconds],
    ['subprocess.memoryBytes', resolved.subprocess.memoryBytes],
    ['subprocess.pids', resolved.subprocess.pids],
    ['subprocess.tmpfsBytes', resolved.subprocess.tmpfsBytes],
    ...TIERS.flatMap((t): Array<[string, number]> => [
      [`tierLimits.${t}.maxTimeoutMs`, tierLimits[t].maxTimeoutMs],
      [`tierLimits.${t}.output.maxBytes`, tierLimits[t].output.maxBytes],
      [`tierLimits.${t}.output.maxLines`, tierLimits[t].output.maxLines],
    ]),
  ];
  checkIntegers([
    // Unset optional limits have defaults that depend on the run.
    ...positive.flatMap(([name, value]): IntegerOption[] => (value === undefined ? [] : [[name, value, 1]])),
    [
      'subprocess.warmSlots',
      resolved.subprocess.warmSlots,
      SUBPROCESS_BOUNDS.warmSlots.min,
      SUBPROCESS_BOUNDS.warmSlots.max,
    ],
  ]);
  if (resolved.defaultTimeoutMs > resolved.maxTimeoutMs) {
    throw new SandboxConfigError(
      'defaultTimeoutMs',
      `must not exceed maxTimeoutMs (${resolved.maxTimeoutMs})`,
    );
  }
  for (const key of ['cpus', 'sessionCpus'] as const) {
    const cpus = resolved.subprocess[key];
    const { min, max } = SUBPROCESS_BOUNDS[key];
    if (typeof cpus !== 'number' || !(cpus >= min && cpus <= max)) {
      throw new SandboxConfigError(
        `subprocess.${key}`,
        `must be a number from ${min} to ${max}, got ${String(cpus)}`,
      );
    }
  }
  if (!['auto', 'v2', 'v1', 'off'].includes(resolved.subprocess.cgroup.mode)) {
    throw new SandboxConfigError('subprocess.cgroup.mode', 'must be auto, v2, v1 or off');
  }
  for (const [level, tier] of Object.entries(resolved.routing)) {
    if (!TIERS.includes(tier)) throw new SandboxConfigError(`routing.${level}`, `unknown tier "${tier}"`);
  }
  const paths: Array<[string, string | undefined]> = [
    ['interpreters.python', resolved.interpreters.python],
    ['interpreters.node', resolved.interpreters.node],
    ['interpreters.bash', resolved.interpreters.bash],
    ['bwrapPath', resolved.bwrapPath],
    ['prlimitPath', resolved.prlimitPath],
    ['setprivPath', resolved.setprivPath],
    ['nicePath', resolved.nicePath],
    ['shellPath', resolved.shellPath],
    ['tempDir', resolved.tempDir],
    ['subprocess.cgroup.v2Parent', resolved.subprocess.cgroup.v2Parent],
    ...resolved.extraReadOnlyBinds.map((p, i): [string, string] => [`extraReadOnlyBinds[${i}]`, p]),
  ];
  for (const [name, value] of paths) {
    if (value !== undefined && !value.startsWith('/'))
      throw new SandboxConfigError(name, 'must be an absolute path');
  }
  return resolved;
}
