import { InvalidInputError, LANGUAGES, TIERS } from '@switchyard/common';
import { validateEnv } from './core/env-policy';
import type { ResolvedSandboxOptions } from './core/sandbox.options';
import type { CodeRequest } from './core/sandbox.types';

type Limits = Pick<
  ResolvedSandboxOptions,
  'maxCodeBytes' | 'maxStdinBytes' | 'defaultTimeoutMs' | 'maxTimeoutMs'
>;

/** A text field's size against its cap, in UTF-8 bytes: `INVALID_*` when it is not text, `*_TOO_LARGE` past it. */
function checkText(field: 'code' | 'stdin', value: unknown, max: number): void {
  const upper = field.toUpperCase();
  if (typeof value !== 'string')
    throw new InvalidInputError(field, `${field} must be a string`, `INVALID_${upper}`);
  if (field === 'code' && value.includes('\0')) {
    throw new InvalidInputError(field, 'code contains a NUL byte', 'INVALID_CODE');
  }
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > max) {
    throw new InvalidInputError(field, `${field} is ${bytes} bytes; at most ${max}`, `${upper}_TOO_LARGE`, {
      limit: max,
    });
  }
}

/**
 * Checks a code request against the engine's global limits. Throws `InvalidInputError` naming the field for
 * anything that must not run; answers the timeout to use and the caller's validated environment entries.
 */
export function validateCodeRequest(
  req: CodeRequest,
  limits: Limits,
): { timeoutMs: number; env: Record<string, string> } {
  if (!LANGUAGES.includes(req.language)) {
    throw new InvalidInputError(
      'language',
      `language must be one of ${LANGUAGES.join(', ')}`,
      'INVALID_LANGUAGE',
    );
  }
  const tier = req.tier ?? 'auto';
  if (tier !== 'auto' && !TIERS.includes(tier)) {
    throw new InvalidInputError('tier', `tier must be auto or one of ${TIERS.join(', ')}`, 'INVALID_TIER');
  }
  const state = req.state ?? 'fresh';
  if (state !== 'fresh' && state !== 'session') {
    throw new InvalidInputError('state', 'state must be fresh or session', 'INVALID_STATE');
  }
  checkText('code', req.code, limits.maxCodeBytes);
  if (req.stdin !== undefined) checkText('stdin', req.stdin, limits.maxStdinBytes);
  if (req.stdin !== undefined && state === 'session') {
    // A kernel's input is its cells; a cell that reads stdin gets end-of-file.
    throw new InvalidInputError(
      'stdin',
      'stdin cannot be given with state "session" (a kernel reads no input); write it to a file, or use state "fresh"',
      'STDIN_WITH_SESSION_STATE',
    );
  }
  if (req.channel !== undefined && state === 'session') {
    // A kernel outlives the action; a channel belongs to one action's sandbox, made for it and gone with it.
    throw new InvalidInputError(
      'state',
      'a call channel cannot be given with state "session" (a kernel cell runs in a sandbox that outlives the action); use state "fresh"',
      'CHANNEL_WITH_SESSION_STATE',
    );
  }
  const timeoutMs = req.timeoutMs ?? limits.defaultTimeoutMs;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > limits.maxTimeoutMs) {
    throw new InvalidInputError(
      'timeoutMs',
      `timeoutMs must be an integer from 1 to ${limits.maxTimeoutMs}`,
      'INVALID_TIMEOUT',
      { max: limits.maxTimeoutMs },
    );
  }
  if (
    typeof req.workspaceDir !== 'string' ||
    !req.workspaceDir.startsWith('/') ||
    req.workspaceDir.includes('\0')
  ) {
    throw new InvalidInputError('workspaceDir', 'workspaceDir must be an absolute path', 'INVALID_WORKSPACE');
  }
  return { timeoutMs, env: validateEnv(req.env) };
}
