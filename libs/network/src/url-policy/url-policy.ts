import { lookup } from 'node:dns/promises';
import { type Clock, systemClock } from '@switchyard/common';
import {
  type AddressClass,
  type Cidr,
  cidrContains,
  classifyIp,
  effectiveIp,
  formatCidr,
  formatIp,
  type IpAddress,
  parseCidr,
  parseIp,
} from './ip-address';

/** Resolves a hostname to every address it has. The default is `dns.lookup` with `all: true`. */
export interface HostResolver {
  lookup(hostname: string): Promise<{ address: string; family: number }[]>;
}

export const systemResolver: HostResolver = {
  lookup: (hostname) => lookup(hostname, { all: true, order: 'verbatim' }),
};

/**
 * Why a URL or host was refused:
 * - `URL_INVALID`: not a URL at all;
 * - `URL_SCHEME`: not http/https (`file:`, `view-source:`, `chrome:`, `data:`, `javascript:`…);
 * - `ADDRESS_REFUSED`: the host is, or resolves to, an address outside the public internet that the
 *   allowlist does not cover (loopback, private, link-local, CGNAT, ULA, multicast, reserved…).
 * `DNS_FAILED` is not a refusal but a failure: the name could not be resolved, so nothing was opened.
 */
export type UrlRefusalCode = 'URL_INVALID' | 'URL_SCHEME' | 'ADDRESS_REFUSED' | 'DNS_FAILED';

export interface UrlRefusal {
  code: UrlRefusalCode;
  /** One sentence for the caller, naming the setting that would change the answer. */
  reason: string;
}

export type HostVerdict =
  | { allowed: true; host: string; addresses: string[] }
  | { allowed: false; host: string; refusal: UrlRefusal };

export type UrlVerdict =
  { allowed: true; url: URL; host: string; addresses: string[] } | { allowed: false; refusal: UrlRefusal };

/** The operator allowlist, parsed once at boot. */
export interface Allowlist {
  /** Exact hostnames (lowercase, no trailing dot). */
  hosts: ReadonlySet<string>;
  /** `*.example.org` entries, stored as `.example.org`. */
  suffixes: readonly string[];
  /** Addresses and ranges; a bare address is a /32 or /128. */
  cidrs: readonly Cidr[];
}

export class AllowlistEntryError extends Error {
  constructor(
    readonly entry: string,
    message: string,
  ) {
    super(message);
    this.name = 'AllowlistEntryError';
  }
}

const HOSTNAME =
  /^(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/**
 * Parses allowlist entries: IP addresses (`127.0.0.1`, `::1`), CIDRs (`10.0.0.0/8`, `fd00::/8`), hostnames
 * (`intranet.example`) and subdomain wildcards (`*.corp.example`). Throws `AllowlistEntryError` naming the
 * first bad entry.
 */
export function parseAllowlist(entries: readonly string[]): Allowlist {
  const hosts = new Set<string>();
  const suffixes: string[] = [];
  const cidrs: Cidr[] = [];
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const cidr = parseCidr(entry);
    if (cidr) {
      cidrs.push(cidr);
      continue;
    }
    if (entry.includes('/') || entry.includes(':')) {
      throw new AllowlistEntryError(raw, `"${raw}" is neither an IP address, a CIDR nor a hostname`);
    }
    const name = entry.endsWith('.') ? entry.slice(0, -1) : entry;
    if (name.startsWith('*.')) {
      if (!HOSTNAME.test(name.slice(2))) {
        throw new AllowlistEntryError(raw, `"${raw}" is not a valid wildcard hostname`);
      }
      suffixes.push(name.slice(1));
    } else if (HOSTNAME.test(name)) {
      hosts.add(name);
    } else {
      throw new AllowlistEntryError(raw, `"${raw}" is not a valid hostname`);
    }
  }
  return { hosts, suffixes, cidrs };
}

const ALLOWED_SCHEMES = new Set(['http:', 'https:']);
const CATEGORY_TEXT: Record<Exclude<AddressClass['category'], 'public'>, string> = {
  unspecified: 'an unspecified ("this network") address',
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address (cloud metadata lives here)',
  cgnat: 'a carrier-grade NAT address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved address',
  documentation: 'a documentation-only address',
  benchmarking: 'a benchmarking address',
  'unique-local': 'an IPv6 unique-local address',
  'site-local': 'an IPv6 site-local address',
  discard: 'an IPv6 discard-only address',
  translation: 'a local-use NAT64 address',
};

export interface UrlPolicyOptions {
  allowlist?: Allowlist;
  resolver?: HostResolver;
  /** Name of the setting that holds the allowlist, quoted in refusals. */
  allowlistSetting?: string;
  /** How long a resolution is reused. Default 10 s; 0 disables the cache. */
  cacheTtlMs?: number;
  /** A lookup slower than this fails with `DNS_FAILED`. Default 5 s. */
  lookupTimeoutMs?: number;
  /** For the resolution cache (its monotonic time). Default `systemClock`. */
  clock?: Clock;
}

const CACHE_MAX = 1024;

/**
 * Decides which URLs the browser may open (SECURITY.md 13–14). Only `http:`/`https:`; the host must be a
 * public address, or resolve only to public addresses, unless the allowlist covers it:
 *
 * - a hostname entry (`intranet.example`, `*.corp.example`) allows that name whatever it resolves to;
 * - an address or CIDR entry (`127.0.0.2`, `10.0.0.0/8`) allows the addresses inside it, however the URL
 *   spells them: hosts are compared as addresses after WHATWG canonicalization (`127.1` is `127.0.0.1`),
 *   and wrapped IPv4 forms (`::ffff:127.0.0.1`, NAT64, 6to4) count as the IPv4 address they carry.
 *
 * A name is refused when *any* of its addresses is refused. `localhost` and `*.localhost` always mean
 * loopback (RFC 6761), whatever the resolver says. The caller that connects must connect to one of the
 * addresses returned (see `EgressProxy`), so a second, different DNS answer (rebinding) is never used.
 */
export class UrlPolicy {
  private readonly allowlist: Allowlist;
  private readonly resolver: HostResolver;
  private readonly setting: string;
  private readonly cacheTtlMs: number;
  private readonly lookupTimeoutMs: number;
  private readonly clock: Clock;
  private readonly cache = new Map<string, { addresses: string[]; expires: number }>();

  constructor(options: UrlPolicyOptions = {}) {
    this.allowlist = options.allowlist ?? parseAllowlist([]);
    this.resolver = options.resolver ?? systemResolver;
    this.setting = options.allowlistSetting ?? 'the browser allowlist';
    this.cacheTtlMs = options.cacheTtlMs ?? 10_000;
    this.lookupTimeoutMs = options.lookupTimeoutMs ?? 5000;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Syntax and scheme only, no DNS: the WHATWG parser strips surrounding whitespace and control characters
   * and ignores case, exactly as the browser would, so ` FILE:///x` and `jAvAsCrIpT:` are caught here.
   */
  parse(raw: string): { url: URL } | { refusal: UrlRefusal } {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return { refusal: { code: 'URL_INVALID', reason: `not an absolute URL: ${clip(raw, 120)}` } };
    }
    if (!ALLOWED_SCHEMES.has(url.protocol)) {
      return {
        refusal: {
          code: 'URL_SCHEME',
          reason: `only http and https URLs may be opened; ${url.protocol} URLs are refused`,
        },
      };
    }
    if (url.hostname === '') return { refusal: { code: 'URL_INVALID', reason: 'the URL has no host' } };
    return { url };
  }

  /**
   * What can be decided without DNS: the scheme, IP-literal hosts and allowlisted names. `undefined` means
   * the answer depends on resolution (`checkUrl`).
   */
  checkStatic(raw: string): UrlVerdict | undefined {
    const parsed = this.parse(raw);
    if ('refusal' in parsed) return { allowed: false, refusal: parsed.refusal };
    const host = hostOf(parsed.url);
    const literal = parseIp(host);
    if (literal) {
      const refusal = this.judgeAddresses(host, [literal]);
      return refusal
        ? { allowed: false, refusal }
        : { allowed: true, url: parsed.url, host, addresses: [formatIp(literal)] };
    }
    if (isLocalhostName(host)) {
      const refusal = this.judgeAddresses(host, LOCALHOST_ADDRESSES);
      if (refusal) return { allowed: false, refusal };
    }
    return undefined;
  }

  /** The full decision for a URL, resolving its host when needed. */
  async checkUrl(raw: string): Promise<UrlVerdict> {
    const parsed = this.parse(raw);
    if ('refusal' in parsed) return { allowed: false, refusal: parsed.refusal };
    const verdict = await this.checkHost(hostOf(parsed.url));
    return verdict.allowed
      ? { allowed: true, url: parsed.url, host: verdict.host, addresses: verdict.addresses }
      : { allowed: false, refusal: verdict.refusal };
  }

  /**
   * The decision for a host (a URL's hostname or a proxy's CONNECT target, brackets optional), with the
   * addresses that may be connected to. Hosts in non-canonical forms are canonicalized first.
   */
  async checkHost(rawHost: string): Promise<HostVerdict> {
    const host = canonicalHost(rawHost);
    if (host === undefined) {
      return {
        allowed: false,
        host: rawHost,
        refusal: { code: 'URL_INVALID', reason: `not a valid host: ${clip(rawHost, 120)}` },
      };
    }
    const literal = parseIp(host);
    if (literal) {
      const refusal = this.judgeAddresses(host, [literal]);
      return refusal
        ? { allowed: false, host, refusal }
        : { allowed: true, host, addresses: [formatIp(literal)] };
    }
    let addresses: string[];
    if (isLocalhostName(host)) {
      addresses = LOCALHOST_ADDRESSES.map(formatIp);
    } else {
      try {
        addresses = await this.resolve(host);
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        return {
          allowed: false,
          host,
          refusal: { code: 'DNS_FAILED', reason: `could not resolve ${host}: ${why}` },
        };
      }
    }
    if (this.hostAllowlisted(host)) return { allowed: true, host, addresses };
    const parsed = addresses.map((a) => parseIp(a)).filter((a): a is IpAddress => a !== undefined);
    if (parsed.length === 0) {
      return {
        allowed: false,
        host,
        refusal: { code: 'DNS_FAILED', reason: `${host} resolved to no usable address` },
      };
    }
    const refusal = this.judgeAddresses(host, parsed);
    return refusal
      ? { allowed: false, host, refusal }
      : { allowed: true, host, addresses: parsed.map(formatIp) };
  }

  /**
   * Whether the allowlist itself names `host` (a URL's host, any spelling): its name, or its address however spelled.
   * What a name resolves to does not count here.
   */
  allowlisted(rawHost: string): boolean {
    const host = canonicalHost(rawHost);
    if (host === undefined) return false;
    const ip = parseIp(host);
    return ip ? this.cidrAllowlisted(ip) : this.hostAllowlisted(host);
  }

  /** True when an address (already resolved) may be connected to. */
  private addressAllowed(ip: IpAddress): boolean {
    return classifyIp(ip).category === 'public' || this.cidrAllowlisted(ip);
  }

  private hostAllowlisted(host: string): boolean {
    if (this.allowlist.hosts.has(host)) return true;
    return this.allowlist.suffixes.some((s) => host.endsWith(s));
  }

  private cidrAllowlisted(ip: IpAddress): boolean {
    const target = effectiveIp(ip);
    return this.allowlist.cidrs.some((c) => cidrContains(c, target) || cidrContains(c, ip));
  }

  /** The refusal for the first address that may not be reached, or undefined when all may. */
  private judgeAddresses(host: string, addresses: readonly IpAddress[]): UrlRefusal | undefined {
    if (!parseIp(host) && this.hostAllowlisted(host)) return undefined;
    const literal = parseIp(host) !== undefined;
    for (const ip of addresses) {
      if (this.addressAllowed(ip)) continue;
      const c = classifyIp(ip);
      if (c.category === 'public') continue;
      const text = formatIp(ip);
      const what = `${CATEGORY_TEXT[c.category]}${c.range ? ` (${c.range})` : ''}`;
      let reason = literal ? text : `${host} resolves to ${text}`;
      if (c.embedded) reason += `${literal ? '' : ', which'} carries ${c.embedded}, ${what}`;
      else reason += literal ? ` is ${what}` : `, ${what}`;
      return { code: 'ADDRESS_REFUSED', reason: `${reason}; not on ${this.setting}` };
    }
    return undefined;
  }

  private async resolve(host: string): Promise<string[]> {
    const now = this.clock.monotonic();
    const hit = this.cache.get(host);
    if (hit && hit.expires > now) return hit.addresses;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`lookup timed out after ${this.lookupTimeoutMs} ms`)),
        this.lookupTimeoutMs,
      );
      timer.unref();
    });
    try {
      const answers = await Promise.race([this.resolver.lookup(host), timeout]);
      const addresses = answers.map((a) => a.address);
      if (this.cacheTtlMs > 0 && addresses.length > 0) {
        if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
        this.cache.set(host, { addresses, expires: now + this.cacheTtlMs });
      }
      return addresses;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The allowlist as text, for health output and logs. */
  describeAllowlist(): string[] {
    return [
      ...this.allowlist.hosts,
      ...this.allowlist.suffixes.map((s) => `*${s}`),
      ...this.allowlist.cidrs.map(formatCidr),
    ];
  }
}

const LOCALHOST_ADDRESSES: readonly IpAddress[] = [parseIp('127.0.0.1')!, parseIp('::1')!];

function isLocalhostName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost');
}

/** `url.hostname` without IPv6 brackets or a trailing dot, lowercase. */
function hostOf(url: URL): string {
  return canonicalHost(url.hostname) ?? url.hostname;
}

/**
 * Canonical form of a host as a browser would send it: WHATWG host parsing (IPv4 number forms become
 * dotted quads, IPv6 is compressed, names are lowercased and punycoded), brackets and a trailing dot removed.
 */
export function canonicalHost(raw: string): string | undefined {
  const bracketed = raw.includes(':') && !raw.startsWith('[') ? `[${raw}]` : raw;
  let hostname: string;
  try {
    hostname = new URL(`http://${bracketed}/`).hostname;
  } catch {
    return undefined;
  }
  if (hostname === '') return undefined;
  if (hostname.startsWith('[')) hostname = hostname.slice(1, -1);
  if (hostname.endsWith('.')) hostname = hostname.slice(0, -1);
  return hostname.toLowerCase();
}

/** `s` at most `n` characters long. */
function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
