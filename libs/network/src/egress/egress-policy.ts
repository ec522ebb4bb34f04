import { InvalidInputError } from '@switchyard/common';

/** Ports a pattern without one allows: web traffic only (a package index, a git host, an API). */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443];

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*$`);

/**
 * One entry of a network policy: `pypi.org`, `*.pythonhosted.org` (any subdomain, not the name itself), or `*`
 * (any public host: only an operator's bound can hold it); optionally `:port` (otherwise 80 and 443).
 */
export interface EgressPattern {
  /** As written, lowercased: what refusals and the API show. */
  text: string;
  kind: 'exact' | 'suffix' | 'any';
  /** The name, or for `suffix` the part after `*.`. */
  host: string;
  ports: readonly number[];
}

/** Parses one pattern, or throws `InvalidInputError` for `field` naming what is wrong with it. */
export function parseEgressPattern(raw: string, field: string): EgressPattern {
  const lower = raw.trim().toLowerCase();
  // A trailing dot is the root of the DNS (`pypi.org.`); `*.` names nothing.
  const text = lower.endsWith('.') && lower !== '*.' ? lower.slice(0, -1) : lower;
  const m = /^(.*?)(?::(\d{1,5}))?$/.exec(text);
  const name = m?.[1] ?? '';
  const port = m?.[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) {
    throw new InvalidInputError(field, `"${raw}": port must be 1–65535`, 'INVALID_EGRESS_HOST');
  }
  const ports = port === undefined ? DEFAULT_EGRESS_PORTS : [port];
  if (name === '*') return { text, kind: 'any', host: '*', ports };
  const suffix = name.startsWith('*.');
  const host = suffix ? name.slice(2) : name;
  if (!NAME.test(host) || /^\d+(\.\d+)*$/.test(host)) {
    throw new InvalidInputError(
      field,
      `"${raw}" is not a host name or *.domain pattern (addresses are not accepted: names are checked, then resolved by the engine)`,
      'INVALID_EGRESS_HOST',
    );
  }
  return { text, kind: suffix ? 'suffix' : 'exact', host, ports };
}

/** Does `pattern` allow `host:port`? */
function allows(pattern: EgressPattern, host: string, port: number): boolean {
  if (!pattern.ports.includes(port)) return false;
  if (pattern.kind === 'any') return true;
  if (pattern.kind === 'exact') return host === pattern.host;
  return host.endsWith(`.${pattern.host}`);
}

/** Does `outer` allow everything `inner` does? */
function covers(outer: EgressPattern, inner: EgressPattern): boolean {
  if (!inner.ports.every((p) => outer.ports.includes(p))) return false;
  if (outer.kind === 'any') return true;
  if (inner.kind === 'any') return false;
  if (outer.kind === 'exact') return inner.kind === 'exact' && inner.host === outer.host;
  return inner.host.endsWith(`.${outer.host}`) || (inner.kind === 'suffix' && inner.host === outer.host);
}

/**
 * A session's network policy: the hosts (and ports) its sandboxes may reach through the engine's egress proxy.
 * Empty: no network at all, the default. The engine's bound (`SWITCHYARD_EGRESS_ALLOWED`) is a policy too, and a
 * session's may only narrow it.
 */
export class EgressPolicy {
  private constructor(readonly patterns: readonly EgressPattern[]) {}

  static readonly none = new EgressPolicy([]);

  /** Parses a list of patterns; `field` names the list in the 400 for a bad entry (`network.allow[2]`). */
  static parse(entries: readonly string[], field: string): EgressPolicy {
    const seen = new Map<string, EgressPattern>();
    entries.forEach((raw, i) => {
      if (raw.trim() === '') return;
      const p = parseEgressPattern(raw, `${field}[${i}]`);
      seen.set(p.text, p);
    });
    return new EgressPolicy([...seen.values()]);
  }

  get isEmpty(): boolean {
    return this.patterns.length === 0;
  }

  /** The patterns as written, for the API and the graph. */
  get allow(): string[] {
    return this.patterns.map((p) => p.text);
  }

  allows(host: string, port: number): boolean {
    const h = host.toLowerCase().replace(/\.$/, '');
    return this.patterns.some((p) => allows(p, h, port));
  }

  /** The patterns of this policy that `bound` does not cover (empty: it is within the bound). */
  beyond(bound: EgressPolicy): string[] {
    return this.patterns.filter((p) => !bound.patterns.some((b) => covers(b, p))).map((p) => p.text);
  }
}
