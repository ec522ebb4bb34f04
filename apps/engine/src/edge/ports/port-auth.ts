import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '@switchyard/common';
import type { IncomingMessage } from 'node:http';
import { AccessTokens } from '../http/access-tokens';
import { ApiKeys } from '../http/api-keys';
import type { PortTarget } from './port-target';
import { PREVIEW_COOKIE, previewCookie } from './proxy-headers';

/** Who may open a session's port, and how they proved it. */
export interface PortAccess {
  tenant: string;
  /** `key`: the bearer key (dropped before forwarding); `token`/`cookie`: a preview token for this port. */
  by: 'key' | 'token' | 'cookie' | 'open';
  /**
   * The URL carried the token: the caller is sent to the same URL without it (`Location`), with the token in a
   * cookie (`Set-Cookie`), so it leaves the address bar, the history and the server's logs.
   */
  redirect?: { location: string; cookie: string };
}

/**
 * Authentication of the proxy, for requests and WebSocket upgrades alike: the session's API key (`Authorization:
 * Bearer`), or a preview token of scope `port:<port>` for that session (`AccessTokens`), from the URL's
 * `switchyard_token` once, then from an HttpOnly, SameSite=Lax cookie scoped to the port's path (or to the preview
 * host). A token or cookie that is not valid for this session and port is a 401, as a missing key is.
 */
@Injectable()
export class PortAuth {
  constructor(
    private readonly keys: ApiKeys,
    private readonly tokens: AccessTokens,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** Throws the 401 of `ApiKeys`/`AccessTokens`. */
  authorize(req: IncomingMessage, target: PortTarget, port: number, secure: boolean): PortAccess {
    const scope = `port:${port}` as const;
    if (target.token !== undefined) {
      // An open engine signs with a key of its own process: a token it did not issue still opens nothing it would
      // not open without one.
      const grant = this.keys.open
        ? this.tokens.read(target.token)
        : this.tokens.verify(target.token, target.sessionId, scope);
      const location = `${target.prefix}${target.path}${target.query === '' ? '' : `?${target.query}`}`;
      return {
        tenant: grant?.tenant ?? this.keys.principalOf(undefined).tenant,
        by: this.keys.open ? 'open' : 'token',
        ...(grant && {
          redirect: {
            location,
            cookie: tokenCookie(
              target.token,
              target,
              grant.expiresAt - Math.floor(this.clock.now().getTime() / 1000),
              secure,
            ),
          },
        }),
      };
    }
    const cookie = previewCookie(headerText(req.headers.cookie));
    if (cookie !== undefined && !this.keys.open) {
      const grant = this.tokens.read(cookie);
      if (grant && grant.sessionId === target.sessionId && grant.scope === scope) {
        return { tenant: grant.tenant, by: 'cookie' };
      }
      // A stale cookie with a valid key is the key's request; without a key, the 401 the token's checks give.
      if (req.headers.authorization === undefined) this.tokens.verify(cookie, target.sessionId, scope);
    }
    const principal = this.keys.principal(req as Parameters<ApiKeys['principal']>[0]);
    return { tenant: principal.tenant, by: this.keys.open ? 'open' : 'key' };
  }
}

const headerText = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join('; ') : value;

/**
 * The cookie holding a preview token: HttpOnly (no script reads it), SameSite=Lax (another site's page cannot make
 * the browser send it with a request of its own but a top-level link), scoped to the port's path through the path
 * proxy (never the engine's API) or, at a preview host, to that host alone (no `Domain`); `Secure` over TLS; it
 * expires with the token.
 */
function tokenCookie(token: string, target: PortTarget, maxAge: number, secure: boolean): string {
  return [
    `${PREVIEW_COOKIE}=${token}`,
    `Path=${target.prefix === '' ? '/' : `${target.prefix}/`}`,
    `Max-Age=${Math.max(0, maxAge)}`,
    'HttpOnly',
    'SameSite=Lax',
    ...(secure ? ['Secure'] : []),
  ].join('; ');
}
