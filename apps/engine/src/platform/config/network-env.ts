import { InvalidInputError } from '@switchyard/common';
import { EgressPolicy, parseIp } from '@switchyard/network';
import { configFailure } from './config-error';
import { ListVar } from './env-parsing';

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
}

export interface NetworkConfig {
  bound: EgressPolicy;
  default: EgressPolicy;
  resolve: ReadonlyMap<string, string>;
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
  return { bound, default: fallback, resolve };
}
