import type { OutputLimits, TierRunResult } from '../sandbox.types';

/** A limit a tier enforced that ended the run. */
export type EnforcedLimit = NonNullable<TierRunResult['limit']>;

/** Whole MiB as such, anything else in bytes: the unit the options are usually given in. */
export function formatBytes(n: number): string {
  return n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`;
}

/** A run that produced nothing (it never started, or was aborted before it did). */
export function emptyResult(durationMs: number): TierRunResult {
  return { timedOut: false, stdout: '', stderr: '', truncated: { stdout: false, stderr: false }, durationMs };
}

/** `limit` names the memory limit as the tier's users know it, e.g. "its 512 MiB limit". */
export const outOfMemory = (limit: string): EnforcedLimit => ({
  code: 'OUT_OF_MEMORY',
  message: `out of memory: the run went over ${limit}`,
});

export const outputCap = (output: OutputLimits): EnforcedLimit => ({
  code: 'OUTPUT_CAP',
  message: `output over ${formatBytes(output.maxBytes)} or ${output.maxLines} lines on a stream; the run was stopped`,
});

export const cpuTime = (): EnforcedLimit => ({ code: 'CPU_TIME', message: 'CPU time limit reached' });

export const fileSize = (bytes: number): EnforcedLimit => ({
  code: 'FILE_SIZE',
  message: `file size limit of ${formatBytes(bytes)} reached`,
});

export const pidsLimit = (pids: number): EnforcedLimit => ({
  code: 'PIDS',
  message: `process limit of ${pids} reached`,
});

/** What a tier observed about a run's end; a tier that cannot observe one leaves it out. */
export interface LimitEvidence {
  oomKilled?: boolean;
  /** The run went past an output cap (the engine's or the tier's own). */
  outputCapped?: boolean;
  /** The code died of SIGXCPU (RLIMIT_CPU). */
  cpuTime?: boolean;
  /** The code died of SIGXFSZ (RLIMIT_FSIZE). */
  fileSize?: boolean;
  /** The pids limit refused a fork at some point. */
  pidsLimitHit?: boolean;
}

/** The limits in force, as the messages name them. */
export interface LimitSettings {
  /** How the out-of-memory message names the memory limit (see {@link outOfMemory}). */
  memory: string;
  output: OutputLimits;
  fileSizeBytes: number;
  pids?: number;
}

/**
 * The limit that ended the run, the most telling first: out of memory (it explains any signal), the output cap, the
 * CPU and file size rlimits, then the pids limit, which counts only when the run failed (a refused fork the code
 * handled is not its outcome).
 */
export function enforcedLimit(
  result: Pick<TierRunResult, 'timedOut' | 'exitCode'>,
  evidence: LimitEvidence,
  settings: LimitSettings,
): EnforcedLimit | undefined {
  if (evidence.oomKilled) return outOfMemory(settings.memory);
  if (evidence.outputCapped) return outputCap(settings.output);
  if (evidence.cpuTime) return cpuTime();
  if (evidence.fileSize) return fileSize(settings.fileSizeBytes);
  if (evidence.pidsLimitHit && settings.pids !== undefined && (result.timedOut || result.exitCode !== 0)) {
    return pidsLimit(settings.pids);
  }
  return undefined;
}
