/**
 * IP address parsing and classification for the browser's URL policy. Pure functions, no I/O.
 *
 * IPv4 is parsed the way `inet_aton` and the WHATWG URL parser read it, because that is how a browser or a
 * resolver will read it: `127.1`, `2130706433`, `0x7f000001`, `0177.0.0.1` and `0x7f.1` are all 127.0.0.1.
 * IPv6 covers `::` compression, embedded dotted quads and brackets; zone ids (`fe80::1%eth0`) are refused.
 */

export type IpFamily = 4 | 6;

export interface IpAddress {
  family: IpFamily;
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array;
}

export interface Cidr {
  ip: IpAddress;
  prefix: number;
}

/** Why an address may not be reached by default. `public` is the only category reachable by default. */
export type AddressCategory =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'documentation'
  | 'benchmarking'
  | 'unique-local'
  | 'site-local'
  | 'discard'
  | 'translation';

export interface AddressClass {
  category: AddressCategory;
  /** The range that decided it, e.g. `169.254.0.0/16`; absent for `public`. */
  range?: string;
  /** The IPv4 address an IPv6 form carries (mapped, NAT64, 6to4, compatible), when that decided it. */
  embedded?: string;
}

const IPV4_PART = /^(?:0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$/i;

/** One inet_aton component: decimal, octal (leading 0) or hex (0x); undefined when malformed. */
function parseV4Part(part: string): number | undefined {
  if (!IPV4_PART.test(part)) return undefined;
  if (/^0x/i.test(part)) return part.length === 2 ? 0 : Number.parseInt(part.slice(2), 16);
  if (part.length > 1 && part.startsWith('0')) return Number.parseInt(part.slice(1), 8);
  return Number(part);
}

/** IPv4 in any inet_aton form (1 to 4 parts, each decimal, octal or hex); undefined when it is not one. */
export function parseIpv4(text: string): IpAddress | undefined {
  // A trailing dot is allowed by the WHATWG parser (`127.0.0.1.`).
  const parts = (text.endsWith('.') ? text.slice(0, -1) : text).split('.');
  if (parts.length === 0 || parts.length > 4 || parts.some((p) => p === '')) return undefined;
  const nums = parts.map(parseV4Part);
  if (nums.some((n) => n === undefined || !Number.isFinite(n))) return undefined;
  const values = nums as number[];
  const last = values[values.length - 1];
  const head = values.slice(0, -1);
  if (head.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (5 - values.length)) return undefined;
  let value = 0;
  for (const n of head) value = value * 256 + n;
  value = value * 256 ** (5 - values.length) + last;
  return {
    family: 4,
    bytes: new Uint8Array([(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]),
  };
}

/** Strict dotted-quad IPv4 (the form inside IPv6 text). */
function parseDottedQuad(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const nums = parts.map((p) => (/^(?:0|[1-9][0-9]{0,2})$/.test(p) ? Number(p) : NaN));
  return nums.every((n) => n <= 255) ? nums : undefined;
}

/** IPv6 text, with or without brackets; undefined when it is not one (zone ids included). */
export function parseIpv6(input: string): IpAddress | undefined {
  let text = input;
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  if (!text.includes(':') || text.includes('%')) return undefined;
  const words: number[] = [];
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parseHalf = (half: string, allowV4Tail: boolean): number[] | undefined => {
    if (half === '') return [];
    const groups = half.split(':');
    const out: number[] = [];
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i];
      if (allowV4Tail && i === groups.length - 1 && g.includes('.')) {
        const quad = parseDottedQuad(g);
        if (!quad) return undefined;
        out.push((quad[0] << 8) | quad[1], (quad[2] << 8) | quad[3]);
      } else if (/^[0-9a-f]{1,4}$/i.test(g)) {
        out.push(Number.parseInt(g, 16));
      } else {
        return undefined;
      }
    }
    return out;
  };
  if (halves.length === 2) {
    const head = parseHalf(halves[0], false);
    const tail = parseHalf(halves[1], true);
    if (!head || !tail || head.length + tail.length > 7) return undefined;
    words.push(...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail);
  } else {
    const all = parseHalf(text, true);
    if (!all || all.length !== 8) return undefined;
    words.push(...all);
  }
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 255;
  });
  return { family: 6, bytes };
}

/** Any IP literal (IPv4 in inet_aton forms, IPv6 with or without brackets). */
export function parseIp(text: string): IpAddress | undefined {
  return parseIpv4(text) ?? parseIpv6(text);
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lowercase, longest zero run compressed). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return [...ip.bytes].join('.');
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((ip.bytes[i] << 8) | ip.bytes[i + 1]);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i > 1) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (bestStart < 0) return hex.join(':');
  const head = hex.slice(0, bestStart).join(':');
  const tail = hex.slice(bestStart + bestLen).join(':');
  return `${head}::${tail}`;
}

/** `10.0.0.0/8`, `fc00::/7`, or a bare address (a /32 or /128). Undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  if (slash < 0) return { ip, prefix: max };
  const p = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(p) || Number(p) > max) return undefined;
  return { ip, prefix: Number(p) };
}

export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  if (cidr.ip.family !== ip.family) return false;
  let bits = cidr.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((cidr.ip.bytes[i] & mask) !== (ip.bytes[i] & mask)) return false;
  }
  return true;
}

export function formatCidr(c: Cidr): string {
  return `${formatIp(c.ip)}/${c.prefix}`;
}

const v4 = (a: number, b: number, c: number, d: number): IpAddress => ({
  family: 4,
  bytes: new Uint8Array([a, b, c, d]),
});

/**
 * The IPv4 address an IPv6 address stands for, where the IPv6 form is only a wrapper that ends at an IPv4
 * host: IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96` (deprecated; `::` and `::1` excluded), NAT64
 * `64:ff9b::/96`, IPv4-translated `::ffff:0:0:0/96` and 6to4 `2002::/16`. Such forms are judged by the address they carry.
 */
export function embeddedIpv4(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  const b = ip.bytes;
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(b[12], b[13], b[14], b[15]);
  // IPv4-translated (RFC 2765): ::ffff:0:a.b.c.d
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return v4(b[12], b[13], b[14], b[15]);
  if (zeros(0, 12) && !zeros(12, 15)) return v4(b[12], b[13], b[14], b[15]);
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) {
    return v4(b[12], b[13], b[14], b[15]);
  }
  if (b[0] === 0x20 && b[1] === 0x02) return v4(b[2], b[3], b[4], b[5]);
  return undefined;
}

interface Range {
  cidr: Cidr;
  text: string;
  category: Exclude<AddressCategory, 'public'>;
}

const range = (text: string, category: Range['category']): Range => ({
  cidr: parseCidr(text)!,
  text,
  category,
});

/** IANA special-purpose ranges nobody browses to on the public internet. Most specific first. */
const IPV4_RANGES: readonly Range[] = [
  range('255.255.255.255/32', 'broadcast'),
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'cgnat'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'documentation'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'benchmarking'),
  range('198.51.100.0/24', 'documentation'),
  range('203.0.113.0/24', 'documentation'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
];

const IPV6_RANGES: readonly Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  // The rest of the deprecated IPv4-compatible block (`::2`…) that `embeddedIpv4` did not unwrap.
  range('::/96', 'reserved'),
  range('64:ff9b:1::/48', 'translation'),
  range('100::/64', 'discard'),
  // Teredo (2001::/32) hides the IPv4 it reaches; ORCHID and the rest of the IETF block are not hosts.
  range('2001::/23', 'reserved'),
  range('2001:db8::/32', 'documentation'),
  range('3fff::/20', 'documentation'),
  range('fc00::/7', 'unique-local'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'site-local'),
  range('ff00::/8', 'multicast'),
];

/** What kind of address this is; wrapped IPv4 forms are judged by the IPv4 address they carry. */
export function classifyIp(ip: IpAddress): AddressClass {
  const inner = embeddedIpv4(ip);
  if (inner) {
    const c = classifyIp(inner);
    return { ...c, embedded: formatIp(inner) };
  }
  for (const r of ip.family === 4 ? IPV4_RANGES : IPV6_RANGES) {
    if (cidrContains(r.cidr, ip)) return { category: r.category, range: r.text };
  }
  return { category: 'public' };
}

/** The address to compare with allowlist CIDRs: a wrapped IPv4 (mapped, NAT64…) compares as that IPv4. */
export function effectiveIp(ip: IpAddress): IpAddress {
  return embeddedIpv4(ip) ?? ip;
}
