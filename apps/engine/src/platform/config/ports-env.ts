import { type PortRange, parsePortRanges } from '@switchyard/sandbox';
import { IsOptional, Matches } from 'class-validator';
import { configFailure } from './config-error';
import { BoolVar } from './env-parsing';

/** Sessions' ports: the HTTP proxy to a server in a session's sandbox, and its preview hosts. */
export class PortsEnv {
  /**
   * Whether callers may open sessions' ports: the proxy `/v1/sessions/{id}/ports/{port}/…`, preview hosts, and a
   * browser action of a session opening `localhost:PORT`. Off, they answer 403 `PORTS_DISABLED`.
   */
  @BoolVar()
  SWITCHYARD_PORTS_ENABLED = true;

  /**
   * The ports of a session's sandbox that may be opened: ports and ranges, comma-separated (`3000,8000-8999`). A port
   * outside them is refused with a 400 naming `port`.
   */
  @IsOptional()
  @Matches(/^\s*\d{1,5}(-\d{1,5})?(\s*,\s*\d{1,5}(-\d{1,5})?)*\s*$/, {
    message: 'must be ports and ranges of ports, comma-separated, like 3000,8000-8999',
  })
  SWITCHYARD_PORTS_ALLOWED = '1024-65535';

  /**
   * A domain whose subdomains are preview hosts: a request to `<port>-<sessionId>.<domain>` is proxied to that port
   * of the session at `/` (for apps that must sit at the root), with the same authentication. The domain's wildcard
   * (`*.<domain>`) must resolve to the engine. Default unset: no preview hosts.
   */
  @IsOptional()
  @Matches(/^(?=.{1,200}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i, {
    message: 'must be a DNS name like preview.example.com',
  })
  SWITCHYARD_PREVIEW_DOMAIN?: string = undefined;
}

export interface PortsConfig {
  enabled: boolean;
  allowed: PortRange[];
  /** Lower-case, without a trailing dot. */
  previewDomain?: string;
}

export function portsConfig(env: PortsEnv): PortsConfig {
  let allowed: PortRange[];
  try {
    allowed = parsePortRanges(env.SWITCHYARD_PORTS_ALLOWED);
  } catch (err) {
    return configFailure('SWITCHYARD_PORTS_ALLOWED', (err as Error).message);
  }
  const domain = env.SWITCHYARD_PREVIEW_DOMAIN?.toLowerCase();
  return {
    enabled: env.SWITCHYARD_PORTS_ENABLED,
    allowed,
    ...(domain !== undefined && { previewDomain: domain }),
  };
}
