import { randomBytes } from 'node:crypto';
import type { ActionError } from '@switchyard/common';
import { clip, fault } from './browser-output';
import type { BrowserOutcome } from './browser.types';
import type { ContextSpec, GuardedRequest } from './driver/browser-driver.port';
import type { SessionBrowser } from './session-browser';
import type { SessionPortDialer } from './session-ports.port';
import {
  classifyIp,
  type EgressRefusal,
  EgressProxy,
  isLocalhost,
  type LocalRoute,
  parseIp,
  type UrlPolicy,
  type UrlRefusal,
} from '@switchyard/network';

/** The reason recorded on a connection that went to the session's own sandbox. */
export const OWN_PORT = "the session's own sandbox port";

/** The traffic set-up of one context: its egress proxy, and the spec that sends the context through it. */
export interface ContextTraffic {
  egress: EgressProxy;
  spec: ContextSpec;
}

/**
 * The URL policy where the router applies it (SECURITY.md 13–14): on the action's own URL before anything
 * runs, on every request a context sends (the route interceptor), and in each context's egress proxy,
 * which enforces it with pinned addresses. Keeps the ports of the engine's own proxies so none is ever a
 * destination, allowlisted or not.
 *
 * With the engine's `SessionPortDialer`, a host that names this machine (`localhost`, `127.0.0.1`, `[::1]`… see
 * `isLocalhost`) is the session's own sandbox, at every one of those layers alike: its allowed ports pass the checks,
 * and the egress proxy opens them through the dialer (`routeLocal`), never on the engine host. Its other ports are
 * refused, as the rest of loopback is. An address or name the operator allowlisted keeps its ordinary meaning.
 */
export class UrlGuard {
  /** Unguessable per engine, so a page cannot forge the proxy's refusal mark. */
  private readonly denialHeader = `x-switchyard-egress-${randomBytes(8).toString('hex')}`;
  private readonly egressPorts = new Set<number>();

  constructor(
    private readonly policy: UrlPolicy,
    private readonly ports?: SessionPortDialer,
  ) {}

  /**
   * The refusal of `url` that needs no DNS (scheme, address literals), if any. A URL that does not parse is no
   * policy matter: the action runs and fails with URL_INVALID (`beforeRun`), recorded like DNS_FAILED.
   */
  staticDenial(url: string): ActionError | undefined {
    const local = this.localUrl(url);
    if (local) return local.refusal && refusalError(url, local.refusal);
    const verdict = this.policy.checkStatic(url);
    if (!verdict || verdict.allowed || verdict.refusal.code === 'URL_INVALID') return undefined;
    return refusalError(url, verdict.refusal);
  }

  /**
   * The same decision the interceptor and the proxy make, before the browser sees the URL at all: the
   * outcome of a refused action, or undefined when it may go on.
   */
  async beforeRun(url: string): Promise<BrowserOutcome | undefined> {
    const local = this.localUrl(url);
    if (local) return local.refusal && fault('denied', refusalError(url, local.refusal));
    const verdict = await this.policy.checkUrl(url);
    if (verdict.allowed) return undefined;
    if (verdict.refusal.code === 'DNS_FAILED' || verdict.refusal.code === 'URL_INVALID') {
      return fault('failed', {
        class: 'validation',
        code: verdict.refusal.code,
        message: verdict.refusal.reason,
      });
    }
    return fault('denied', refusalError(url, verdict.refusal));
  }

  /**
   * Starts the egress proxy of a new context. The proxy and the interceptor exist before the session does:
   * their refusals are logged into `holder.sb` once it is set. The caller owns the proxy and closes it with
   * `closeEgress`.
   */
  async openEgress(
    holder: { sb?: SessionBrowser },
    sessionId: string,
    acceptDownloads: boolean,
  ): Promise<ContextTraffic> {
    const egress = await EgressProxy.start({
      routeLocal: (host, port) => this.routeLocal(holder, sessionId, host, port),
      checkHost: (host) => this.policy.checkHost(host),
      vetoAddress: (address, port) => this.vetoAddress(address, port),
      denialHeader: this.denialHeader,
      onRefusal: (r: EgressRefusal) =>
        holder.sb?.record({
          url: r.via === 'HTTP' ? r.target : `${r.via === 'CONNECT' ? 'tunnel' : 'upgrade'} to ${r.target}`,
          reason: r.refusal.reason,
          code: r.refusal.code,
          source: 'proxy',
          mainFrameNavigation: false,
        }),
      onAttempt: (a) => {
        if (a.local) holder.sb?.recordLocal(a);
      },
    });
    this.egressPorts.add(egress.port);
    return {
      egress,
      spec: {
        proxyServer: egress.url,
        egressDenialHeader: this.denialHeader,
        acceptDownloads,
        requestGuard: (r) => this.check(holder.sb, r),
      },
    };
  }

  async closeEgress(egress: EgressProxy): Promise<void> {
    this.egressPorts.delete(egress.port);
    await egress.close();
  }

  /**
   * The interceptor's check of one request (or redirect hop); refusals are logged against the session,
   * which stops the running action when its own document or download was refused.
   */
  private async check(sb: SessionBrowser | undefined, r: GuardedRequest): Promise<string | undefined> {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(r.url)?.[1]?.toLowerCase();
    if (scheme === 'data' || scheme === 'blob' || scheme === 'about') return undefined;
    const local = this.localUrl(r.url);
    const verdict: { allowed: true } | { allowed: false; refusal: UrlRefusal } = local
      ? local.refusal
        ? { allowed: false, refusal: local.refusal }
        : { allowed: true }
      : (this.policy.checkStatic(r.url) ?? (await this.policy.checkUrl(r.url)));
    // A name that does not resolve is left to the proxy, which answers it with a 502.
    if (verdict.allowed || verdict.refusal.code === 'DNS_FAILED') return undefined;
    sb?.record({
      url: clip(r.url, 500),
      reason: verdict.refusal.reason,
      code: verdict.refusal.code,
      source: 'guard',
      mainFrameNavigation: r.navigation && r.mainFrame,
      page: r.page,
    });
    return verdict.refusal.reason;
  }

  /**
   * Whether `host:port` is the session's own sandbox: undefined when it is not (the URL policy decides), `{}` when
   * it is, with the refusal when the host is but the port may not be opened.
   */
  private local(host: string, port: number): { refusal?: UrlRefusal } | undefined {
    if (!this.ports || !isLocalhost(host) || this.policy.allowlisted(host)) return undefined;
    const why = this.ports.refusal(port);
    if (why === undefined) return {};
    // What the address is (decided without DNS: a local host is an address or a localhost name), then why not here.
    const url = `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}/`;
    const verdict = this.policy.checkStatic(url);
    const what = verdict && !verdict.allowed ? verdict.refusal.reason : `${host} names this machine`;
    return {
      refusal: {
        code: 'ADDRESS_REFUSED',
        reason: `${what}; in the browser this machine is the session's own sandbox, and ${why}`,
      },
    };
  }

  /** `local` for a URL's host and port (the scheme's default when it names none); undefined for other URLs. */
  private localUrl(raw: string): { refusal?: UrlRefusal } | undefined {
    if (!this.ports) return undefined;
    const parsed = this.policy.parse(raw);
    if ('refusal' in parsed) return undefined;
    const { url } = parsed;
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    return this.local(url.hostname, port);
  }

  /**
   * The egress proxy's way to the session's own sandbox: the port opened through the engine's dialer, and a failure
   * noted against the session's browser (an action whose document it was reports it).
   */
  private routeLocal(
    holder: { sb?: SessionBrowser },
    sessionId: string,
    host: string,
    port: number,
  ): LocalRoute | { refusal: UrlRefusal } | undefined {
    const local = this.local(host, port);
    if (!local) return undefined;
    if (local.refusal) return { refusal: local.refusal };
    const ports = this.ports!;
    return {
      reason: OWN_PORT,
      open: () =>
        ports.connect(sessionId, port).catch((err: unknown) => {
          const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
          holder.sb?.recordUnreachable({
            target: `${host.includes(':') ? `[${host}]` : host}:${port}`,
            message: typeof message === 'string' ? message : String(err),
            code: typeof code === 'string' ? code : 'PORT_CLOSED',
          });
          throw err;
        }),
    };
  }

  /** Loopback ports of the engine's own proxies are never a destination, allowlisted or not. */
  private vetoAddress(address: string, port: number): string | undefined {
    const ip = parseIp(address);
    if (ip && classifyIp(ip).category === 'loopback' && this.egressPorts.has(port)) {
      return "it is one of the engine's own egress proxies";
    }
    return undefined;
  }
}

function refusalError(url: string, refusal: UrlRefusal): ActionError {
  return {
    class: 'policy',
    code: refusal.code,
    message: `refused ${clip(url, 300).trim()}: ${refusal.reason}`,
  };
}
