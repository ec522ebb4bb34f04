import { InvalidInputError } from '@switchyard/common';
import type { HookPhase } from '../../state/hooks/hook-phase';
import { readRules } from '../../state/policies/policy-rules';
import type { PolicyMatch } from '../../state/policies/policy.types';

/** One HTTP endpoint that sees actions: before they run (it may deny or annotate them), or after (their result). */
export interface HookDefinition {
  name: string;
  url: string;
  phase: HookPhase;
  /** HMAC-SHA256 key of the `X-Switchyard-Signature` header (≥ 16 characters). */
  secret: string;
  /** Per attempt. */
  timeoutMs: number;
  /** Attempts after the first: with exponential backoff and jitter. */
  retries: number;
  /** A before-hook that cannot be reached (after its retries): `allow` runs the action anyway, `deny` refuses it. */
  onFailure: 'allow' | 'deny';
  /** Only actions this matches (policy match fields); absent: every action. */
  match?: PolicyMatch;
}

const NAME = /^[a-z][a-z0-9_-]{0,62}$/;
const MAX_HOOKS = 32;
const KEYS = new Set(['name', 'url', 'phase', 'secret', 'timeoutMs', 'retries', 'onFailure', 'match']);
/** Defaults: a before-hook holds its action up, so it gets one short try; an after-hook retries for minutes. */
const DEFAULTS: Record<HookPhase, { timeoutMs: number; retries: number }> = {
  before: { timeoutMs: 2000, retries: 0 },
  after: { timeoutMs: 5000, retries: 8 },
};

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function int(value: unknown, field: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(field, `${field} must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** A hook's `match`, read as a policy rule's is (same fields, same patterns), naming its own field. */
function readMatch(match: unknown, field: string): PolicyMatch {
  try {
    return readRules([{ effect: 'allow', match }], 'hook')[0].match;
  } catch (err) {
    if (err instanceof InvalidInputError) {
      throw new InvalidInputError(err.field.replace(/^hook\[0\]\.match/, field), err.message);
    }
    throw err;
  }
}

/** Reads `{hooks: [...]}` (JSON or TOML `[[hooks]]`), naming the first key at fault. */
export function readHooks(doc: unknown): HookDefinition[] {
  if (!isRecord(doc) || !Array.isArray(doc.hooks))
    throw new InvalidInputError('hooks', 'the file holds {"hooks": [...]}');
  if (doc.hooks.length > MAX_HOOKS) throw new InvalidInputError('hooks', `at most ${MAX_HOOKS} hooks`);
  const names = new Set<string>();
  return doc.hooks.map((h, i) => {
    const at = `hooks[${i}]`;
    if (!isRecord(h)) throw new InvalidInputError(at, 'a hook is an object');
    const unknown = Object.keys(h).find((k) => !KEYS.has(k));
    if (unknown) throw new InvalidInputError(`${at}.${unknown}`, 'unknown key');
    if (typeof h.name !== 'string' || !NAME.test(h.name) || names.has(h.name)) {
      throw new InvalidInputError(`${at}.name`, 'a unique name of lowercase letters, digits, - and _');
    }
    names.add(h.name);
    let url: URL;
    try {
      url = new URL(String(h.url));
    } catch {
      throw new InvalidInputError(`${at}.url`, 'an http(s) URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new InvalidInputError(`${at}.url`, 'an http(s) URL');
    }
    if (h.phase !== 'before' && h.phase !== 'after') {
      throw new InvalidInputError(`${at}.phase`, 'phase is before or after');
    }
    if (typeof h.secret !== 'string' || h.secret.length < 16) {
      throw new InvalidInputError(`${at}.secret`, 'a secret of at least 16 characters (it signs every body)');
    }
    if (h.onFailure !== undefined && h.onFailure !== 'allow' && h.onFailure !== 'deny') {
      throw new InvalidInputError(`${at}.onFailure`, 'onFailure is allow or deny');
    }
    const phase = h.phase;
    const match = h.match === undefined ? undefined : readMatch(h.match, `${at}.match`);
    return {
      name: h.name,
      url: url.toString(),
      phase,
      secret: h.secret,
      timeoutMs: int(h.timeoutMs, `${at}.timeoutMs`, 100, 60_000, DEFAULTS[phase].timeoutMs),
      retries: int(h.retries, `${at}.retries`, 0, 20, DEFAULTS[phase].retries),
      onFailure: h.onFailure ?? 'allow',
      ...(match && { match }),
    };
  });
}
