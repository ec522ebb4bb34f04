import { type Clock, LANGUAGES } from '@switchyard/common';
import type { Kernel } from './kernel-registry';
import type { AdoptedKernel, AdoptedProcess, StatefulBox } from './stateful-box.port';
import type { ProcessInfo, StatefulTier } from './stateful.types';

/*
 * What the engine hands the runner with each kernel and background process it starts (`meta`), and gets back when
 * a later engine adopts the box (`resync`): the part of the engine's record the runner does not know. The runner
 * shares its uid with the session's code, so what comes back is checked as input, and it can only ever describe
 * that same session's box (a kernel restarted from it starts there, with that session's limits).
 */

const KERNEL_ID = /^krn_[0-9a-f]{16}$/;
const PROCESS_ID = /^prc_[0-9a-f]{16}$/;
const MAX_TEXT = 64 * 1024;

/** The record of a kernel, as `kernel_start`'s `meta`. */
export function kernelRecord(
  kernel: Pick<Kernel, 'startedAt' | 'workspaceDir' | 'baseEnv' | 'image'>,
): Record<string, unknown> {
  return {
    startedAt: kernel.startedAt,
    workspaceDir: kernel.workspaceDir,
    baseEnv: kernel.baseEnv,
    ...(kernel.image !== undefined && { image: kernel.image }),
  };
}

/** The record of a background process, as `proc_start`'s `meta`. */
export function processRecord(
  info: Pick<ProcessInfo, 'name' | 'command' | 'startedAt'>,
): Record<string, unknown> {
  return {
    command: info.command,
    startedAt: info.startedAt,
    ...(info.name !== undefined && { name: info.name }),
  };
}

/**
 * A kernel of an adopted box as the registry keeps it, or undefined for what is not one of the engine's (an id or
 * language it never uses). Its idle clock starts again now; what a restart needs comes from its record (without one:
 * the session's workspace and an empty base environment). `unpin` is the caller's.
 */
export function adoptedKernel(
  found: AdoptedKernel,
  box: StatefulBox,
  tier: StatefulTier,
  clock: Clock,
): Omit<Kernel, 'unpin'> | undefined {
  if (!KERNEL_ID.test(found.id) || !(LANGUAGES as readonly string[]).includes(found.language))
    return undefined;
  const record = found.record ?? {};
  const now = clock.now().toISOString();
  const image = text(record.image);
  return {
    id: found.id,
    sessionId: box.sessionId,
    language: found.language,
    tier,
    box,
    workspaceDir: text(record.workspaceDir) ?? '',
    baseEnv: stringMap(record.baseEnv),
    ...(image !== undefined && { image }),
    ...(Number.isSafeInteger(found.pid) && { pid: found.pid }),
    executionCount: Number.isSafeInteger(found.executionCount) ? found.executionCount : 0,
    busy: false,
    startedAt: timestamp(record.startedAt) ?? now,
    lastUsedAt: now,
    tail: Promise.resolve(),
    ended: false,
  };
}

/** A running background process of an adopted box as `ProcessInfo`, or undefined for what is not one of the engine's. */
export function adoptedProcess(
  found: AdoptedProcess,
  box: StatefulBox,
  tier: StatefulTier,
  clock: Clock,
): ProcessInfo | undefined {
  if (!PROCESS_ID.test(found.id)) return undefined;
  const record = found.record ?? {};
  const name = text(record.name);
  return {
    id: found.id,
    sessionId: box.sessionId,
    ...(name !== undefined && { name }),
    command: text(record.command) ?? '',
    tier,
    ...(Number.isSafeInteger(found.pid) && { pid: found.pid }),
    startedAt: timestamp(record.startedAt) ?? clock.now().toISOString(),
    running: true,
  };
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.length <= MAX_TEXT ? value : undefined;
}

function timestamp(value: unknown): string | undefined {
  const t = text(value);
  return t !== undefined && !Number.isNaN(Date.parse(t)) ? t : undefined;
}

function stringMap(value: unknown): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  return Object.fromEntries(
    Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
}
