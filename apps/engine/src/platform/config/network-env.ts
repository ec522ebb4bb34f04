import { InvalidInputError } from '@switchyard/common';
import {
  type Cidr,
  cidrContains,
  EgressPolicy,
  formatCidr,
  parseCidr,
  parseIp,
  parseUpstreamProxy,
  type UpstreamProxy,
} from '@switchyard/network';
import { IsOptional, IsString } from 'class-validator';
import { configFailure } from './config-error';
import { AbsolutePathVar, ListVar } from './env-parsing';

/** What sandboxes may reach over the network: nothing unless a session asks, within the operator's bound. */
export class NetworkEnv {
  /**
   * Hosts sessions may ask egress to (`pypi.org`, `*.pythonhosted.org`, `host:port`, `*` for any public host).
   * Empty (the default): no session may have network.
   */
  @ListVar()
  SWITCHYARD_EGRESS_ALLOWED: string[] = [];

  /** The network policy of a session that asks for none (within SWITCHYARD_EGRESS_ALLOWED). Empty: no network. */
  @ListVar()
  SWITCHYARD_EGRESS_DEFAULT: string[] = [];

  /**
   * Tests only: `name=address` pairs the egress proxy resolves itself, trusting those addresses (so test servers on
   * this machine's loopback can stand in for package indexes). Empty in production: loopback stays refused.
   */
  @ListVar()
  SWITCHYARD_EGRESS_RESOLVE: string[] = [];

  /**
   * An HTTP proxy the egress proxy sends every connection it allowed through (`http://host:port`, or
   * `http://user:password@host:port`), for networks whose only way out is a proxy: https and other tunnels as a
   * `CONNECT` of the requested host, plain http as an absolute-URI request. The session's policy is still checked on
   * the requested host, which the engine still resolves and refuses when it is not public (see
   * SWITCHYARD_EGRESS_TRUSTED_NETS); the upstream then resolves it again in its own network. Unset (the default): the
   * egress proxy dials each checked address itself.
   */
  @IsOptional()
  @IsString()
  SWITCHYARD_EGRESS_UPSTREAM_PROXY?: string = undefined;

  /**
   * Address ranges (CIDRs like `10.20.0.0/16`, or single addresses) the egress proxy may dial although they are private
   * or reserved, comma-separated: an operator's package mirror on such an address. Only hosts a session's policy
   * names are ever dialled. Loopback, link-local (cloud metadata) and unspecified ranges are refused: sandboxes must
   * never reach the engine's host or its metadata service. Empty (the default): only public addresses.
   */
  @ListVar()
  SWITCHYARD_EGRESS_TRUSTED_NETS: string[] = [];

  /**
   * A PEM file of extra CA certificates sandboxes trust (a TLS-intercepting proxy's, a private mirror's), on top of
   * the system's. Read at boot; every sandbox sees it read-only, with pip, Python (ssl, requests), curl, git, npm and
   * Node pointed at it by their usual variables (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE,
   * GIT_SSL_CAINFO: the system bundle plus these; NODE_EXTRA_CA_CERTS: these). Docker backend only. Unset (the
   * default): sandboxes trust the system's CAs alone.
   */
  @AbsolutePathVar()
  SWITCHYARD_SANDBOX_CA_FILE?: string = undefined;
}

export interface NetworkConfig {
  bound: EgressPolicy;
  default: EgressPolicy;
  resolve: ReadonlyMap<string, string>;
  /** The operator's proxy that allowed connections go through; none: dialled directly. */
  upstream?: UpstreamProxy;
  /** Non-public ranges the egress proxy may dial, as CIDR text (`10.20.0.0/16`). */
  trustedNets: string[];
  /** The operator's extra CA certificates for sandboxes (a PEM file, read at boot). */
  sandboxCaFile?: string;
}

/** Ranges no trusted network may overlap: the engine's own host, cloud metadata, "this host". */
const NEVER_TRUSTED = [
  '127.0.0.0/8',
  '169.254.0.0/16',
  '0.0.0.0/8',
  '::1/128',
  '::/128',
  'fe80::/10',
  // The same IPv4 ranges inside IPv6 (mapped, NAT64, 6to4): the address policy reads them as what they carry.
  '::ffff:0:0/96',
  '64:ff9b::/96',
  '2002::/16',
].map((c) => parseCidr(c)!);

function overlaps(a: Cidr, b: Cidr): boolean {
  return a.ip.family === b.ip.family && (cidrContains(a, b.ip) || cidrContains(b, a.ip));
}

function trustedNetsOf(entries: string[]): string[] {
  return entries.map((entry) => {
    const cidr = parseCidr(entry.trim());
    if (!cidr) configFailure('SWITCHYARD_EGRESS_TRUSTED_NETS', `"${entry}" is not a CIDR or an IP address`);
    const clash = NEVER_TRUSTED.find((never) => overlaps(cidr, never));
    if (clash) {
      configFailure(
        'SWITCHYARD_EGRESS_TRUSTED_NETS',
        `"${entry}" overlaps ${formatCidr(clash)}: loopback, link-local (cloud metadata) and unspecified ranges are never reachable from sandboxes`,
      );
    }
    return formatCidr(cidr);
  });
}

function upstreamOf(raw: string | undefined): UpstreamProxy | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const upstream = parseUpstreamProxy(raw);
  if ('reason' in upstream) configFailure('SWITCHYARD_EGRESS_UPSTREAM_PROXY', upstream.reason);
  return upstream;
}

function policyOf(variable: string, entries: string[]): EgressPolicy {
  try {
    return EgressPolicy.parse(entries, variable);
  } catch (err) {
    if (err instanceof InvalidInputError) configFailure(variable, err.message);
    throw err;
  }
}

export function networkConfig(env: NetworkEnv): NetworkConfig {
  const bound = policyOf('SWITCHYARD_EGRESS_ALLOWED', env.SWITCHYARD_EGRESS_ALLOWED);
  const fallback = policyOf('SWITCHYARD_EGRESS_DEFAULT', env.SWITCHYARD_EGRESS_DEFAULT);
  const beyond = fallback.beyond(bound);
  if (beyond.length > 0) {
    configFailure(
      'SWITCHYARD_EGRESS_DEFAULT',
      `${beyond.join(', ')} ${beyond.length > 1 ? 'are' : 'is'} beyond SWITCHYARD_EGRESS_ALLOWED`,
    );
  }
  const resolve = new Map<string, string>();
  for (const pair of env.SWITCHYARD_EGRESS_RESOLVE) {
    const [name, address] = pair.split('=').map((s) => s.trim());
    if (!name || !address || !parseIp(address)) {
      configFailure('SWITCHYARD_EGRESS_RESOLVE', `"${pair}" is not name=address (an IP address)`);
    }
    resolve.set(name.toLowerCase(), address);
  }
  const upstream = upstreamOf(env.SWITCHYARD_EGRESS_UPSTREAM_PROXY);
  return {
    bound,
    default: fallback,
    resolve,
    ...(upstream && { upstream }),
    trustedNets: trustedNetsOf(env.SWITCHYARD_EGRESS_TRUSTED_NETS),
    ...(env.SWITCHYARD_SANDBOX_CA_FILE !== undefined && { sandboxCaFile: env.SWITCHYARD_SANDBOX_CA_FILE }),
  };
}
