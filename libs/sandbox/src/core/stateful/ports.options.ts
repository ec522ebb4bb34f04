import { SandboxConfigError } from '../sandbox.errors';

/** An inclusive range of TCP ports, `[low, high]`. */
export type PortRange = readonly [low: number, high: number];

/** Which ports of a session's sandbox the engine opens to callers (`SandboxModuleOptions.ports`). */
export interface PortsOptions {
  /** Whether a session's ports may be opened at all (the HTTP proxy, a browser reaching the session's server). Default true. */
  enabled?: boolean;
  /** The ports that may be opened. Default: the unprivileged ones, 1024–65535. */
  allowed?: readonly PortRange[];
  /** How refusals name the settings (the engine's env names). */
  settingNames?: { enabled?: string; allowed?: string };
}

export interface ResolvedPortsOptions {
  enabled: boolean;
  allowed: readonly PortRange[];
  settingNames: { enabled: string; allowed: string };
}

export const DEFAULT_PORT_RANGES: readonly PortRange[] = [[1024, 65535]];

const RANGE = /^(\d{1,5})(?:-(\d{1,5}))?$/;

/**
 * `"3000,8000-8999"` as ranges; throws an `Error` whose message says what is wrong with the first bad entry. Blanks
 * around entries are ignored; an empty list allows nothing.
 */
export function parsePortRanges(text: string): PortRange[] {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  return entries.map((entry) => {
    const m = RANGE.exec(entry);
    if (!m) throw new Error(`"${entry}" is not a port or a range of ports like 8000-8999`);
    const low = Number(m[1]);
    const high = m[2] === undefined ? low : Number(m[2]);
    if (low < 1 || high > 65535) throw new Error(`"${entry}" is outside 1-65535`);
    if (low > high) throw new Error(`"${entry}" ends before it starts`);
    return [low, high] as const;
  });
}

/** The ranges as one would write them: `1024-65535`, `3000,8000-8999`. */
export function formatPortRanges(ranges: readonly PortRange[]): string {
  return ranges.map(([low, high]) => (low === high ? String(low) : `${low}-${high}`)).join(',');
}

export const portAllowed = (ranges: readonly PortRange[], port: number): boolean =>
  ranges.some(([low, high]) => port >= low && port <= high);

export function resolvePortsOptions(o: PortsOptions = {}): ResolvedPortsOptions {
  const allowed = o.allowed ?? DEFAULT_PORT_RANGES;
  for (const [i, range] of allowed.entries()) {
    const [low, high] = range;
    if (!Number.isInteger(low) || !Number.isInteger(high) || low < 1 || high > 65535 || low > high) {
      throw new SandboxConfigError(
        `ports.allowed[${i}]`,
        `must be a range within 1-65535, got ${low}-${high}`,
      );
    }
  }
  return {
    enabled: o.enabled ?? true,
    allowed,
    settingNames: {
      enabled: o.settingNames?.enabled ?? 'ports.enabled',
      allowed: o.settingNames?.allowed ?? 'ports.allowed',
    },
  };
}
