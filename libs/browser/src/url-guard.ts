import { randomBytes } from 'node:crypto';
import type { ActionError } from '@switchyard/common';
import { clip, fault } from './browser-output';
import type { BrowserOutcome } from './browser.types';
import type { ContextSpec, GuardedRequest } from './driver/browser-driver.port';
import type { SessionBrowser } from './session-browser';
import {
  classifyIp,
  type EgressRefusal,
  EgressProxy,
  parseIp,
  type UrlPolicy,
  type UrlRefusal,
} from '@switchyard/network';

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
 */
export class UrlGuard {
  /** Unguessable per engine, so a page cannot forge the proxy's refusal mark. */
  private readonly denialHeader = `x-switchyard-egress-${randomBytes(8).toString('hex')}`;
  private readonly egressPorts = new Set<number>();

  constructor(private readonly policy: UrlPolicy) {}

  /**
   * The refusal of `url` that needs no DNS (scheme, address literals), if any. A URL that does not parse is no
   * policy matter: the action runs and fails with URL_INVALID (`beforeRun`), recorded like DNS_FAILED.
   */
  staticDenial(url: string): ActionError | undefined {
    const verdict = this.policy.checkStatic(url);
    if (!verdict || verdict.allowed || verdict.refusal.code === 'URL_INVALID') return undefined;
    return refusalError(url, verdict.refusal);
  }

  /**
   * The same decision the interceptor and the proxy make, before the browser sees the URL at all: the
   * outcome of a refused action, or undefined when it may go on.
   */
  async beforeRun(url: string): Promise<BrowserOutcome | undefined> {
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
  async openEgress(holder: { sb?: SessionBrowser }, acceptDownloads: boolean): Promise<ContextTraffic> {
    const egress = await EgressProxy.start({
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
    const verdict = this.policy.checkStatic(r.url) ?? (await this.policy.checkUrl(r.url));
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
