import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import {
  type HostResolver,
  type HostVerdict,
  parseAllowlist,
  UrlPolicy,
  type UrlRefusal,
} from '../url-policy/url-policy';
import { type EgressAttempt, EgressProxy } from './egress-proxy';
import type { EgressPolicy } from './egress-policy';
import type { UpstreamProxy } from './upstream-proxy';

/**
 * The engine's say on a connection, past the session's network policy: its policy layers' host rules (a rule may
 * hold the connection for a person's approval, until `signal` aborts). Answers why it is refused, or undefined.
 */
export type EgressGate = (host: string, port: number, signal: AbortSignal) => Promise<string | undefined>;

/** Attempts kept per session for the actions to collect (the oldest go first). */
const MAX_ATTEMPTS = 1000;

export interface SessionEgressOptions {
  /** Engine-private directory for the sessions' proxy sockets (a short path: Unix socket paths are limited). */
  root: string;
  /**
   * Test-only resolution (`host → address`), for names that must reach servers on this machine's loopback; their
   * addresses are trusted as if public. Empty in production: the system resolver, and loopback refused. Looked up
   * by the request's canonical host, the one the policy checked.
   */
  resolve?: ReadonlyMap<string, string>;
  /**
   * Address ranges (CIDRs, or single addresses) the proxy may dial although they are not public: an operator's
   * package mirror on a private or reserved address. The host is still checked against the session's policy first,
   * and a name is refused when any of its addresses is neither public nor in these ranges. Default none.
   */
  trustedNets?: readonly string[];
  /** Where allowed connections go instead of being dialled directly (see `EgressProxyOptions.upstream`). */
  upstream?: UpstreamProxy;
  /** How names are resolved (their answers judged by the address policy). Default: the system resolver. */
  resolver?: HostResolver;
  /** How refusals name the settings a caller can act on. */
  settingNames?: { bound?: string; trustedNets?: string };
}

interface Entry {
  policy: EgressPolicy;
  proxy: EgressProxy;
  dir: string;
  attempts: EgressAttempt[];
}

/**
 * The engine's egress proxies, one per session whose network policy allows anything. A sandbox has no route out:
 * its only way is a Unix socket of its session's proxy, made in a directory only that sandbox sees (the runner there
 * forwards 127.0.0.1:3128 to it, and the tier sets HTTP_PROXY/HTTPS_PROXY). The proxy checks each host (and port)
 * against the session's policy, resolves it itself, refuses loopback, private, link-local (metadata), CGNAT and the
 * rest (the browser's address policy) unless an operator trusts their range (`trustedNets`), and connects to exactly
 * the address it checked: no DNS rebinding. With an operator's `upstream` proxy, it makes the same checks and sends
 * the connection through that proxy instead (which then resolves the checked name again, in its own network). Every
 * attempt, allowed or refused, is kept with its bytes, for the action it happened under.
 */
export class SessionEgress {
  private readonly logger = new Logger(SessionEgress.name);
  private readonly sessions = new Map<string, Promise<Entry>>();
  private readonly policyOfAddresses: UrlPolicy;
  private readonly resolve: ReadonlyMap<string, string>;
  private readonly denialHeader = `x-switchyard-egress-${randomBytes(8).toString('hex')}`;
  private closed = false;

  constructor(private readonly options: SessionEgressOptions) {
    this.resolve = options.resolve ?? new Map<string, string>();
    this.policyOfAddresses = new UrlPolicy({
      allowlist: parseAllowlist(options.trustedNets ?? []),
      allowlistSetting: options.settingNames?.trustedNets ?? "the egress proxy's trusted networks",
      ...(options.resolver && { resolver: options.resolver }),
    });
  }

  /**
   * Where a host may be reached: a test-only mapped name to its mapped address (trusted as it is); anything else
   * resolved by the system and refused unless every address is public (a literal address is judged as it is).
   */
  private checkAddress(host: string): Promise<HostVerdict> {
    const mapped = this.resolve.get(host);
    if (mapped) return Promise.resolve({ allowed: true, host, addresses: [mapped] });
    return this.policyOfAddresses.checkHost(host);
  }

  /**
   * The session's proxy, started on first use: `undefined` for a session without network. The primary socket is
   * `socketDir/proxy.sock`, for one-off containers (which mount that directory). `gate`, when given, is asked about
   * every connection the network policy allows, before its host is resolved.
   */
  async open(
    sessionId: string,
    policy: EgressPolicy,
    gate?: EgressGate,
  ): Promise<{ socketDir: string } | undefined> {
    if (policy.isEmpty) return undefined;
    const entry = await this.entry(sessionId, policy, gate);
    return { socketDir: entry.dir };
  }

  /**
   * Another Unix socket of the session's proxy, at `socketPath` (a pooled container's own directory); answers its
   * stop. The session must have been `open`ed.
   */
  async listen(sessionId: string, socketPath: string): Promise<() => Promise<void>> {
    const entry = await this.sessions.get(sessionId);
    if (!entry) throw new Error(`session ${sessionId} has no egress proxy`);
    fs.rmSync(socketPath, { force: true });
    return entry.proxy.listenOn(socketPath);
  }

  /** The attempts of the session that began at or after `sinceMs` (wall clock), oldest first. */
  async attempts(sessionId: string, sinceMs: number): Promise<EgressAttempt[]> {
    const entry = await this.sessions.get(sessionId)?.catch(() => undefined);
    return entry ? entry.attempts.filter((a) => a.startedAt >= sinceMs) : [];
  }

  /** The session ended: its proxy stops, its tunnels are cut, its sockets go. */
  async close(sessionId: string): Promise<void> {
    const pending = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    const entry = await pending?.catch(() => undefined);
    if (!entry) return;
    await entry.proxy.close();
    fs.rmSync(entry.dir, { recursive: true, force: true });
  }

  async closeAll(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.sessions.keys()].map((id) => this.close(id)));
  }

  private entry(sessionId: string, policy: EgressPolicy, gate?: EgressGate): Promise<Entry> {
    let pending = this.sessions.get(sessionId);
    if (!pending) {
      if (this.closed) return Promise.reject(new Error('the engine is shutting down'));
      pending = this.start(sessionId, policy, gate);
      this.sessions.set(sessionId, pending);
      pending.catch(() => this.sessions.delete(sessionId));
    }
    return pending;
  }

  /** The directory of the session's primary socket (`proxy.sock`): known before the proxy starts. */
  socketDirOf(sessionId: string): string {
    // Socket paths are limited to 107 bytes: a short name per session.
    return path.join(this.options.root, createHash('sha256').update(sessionId).digest('hex').slice(0, 16));
  }

  private async start(sessionId: string, policy: EgressPolicy, gate?: EgressGate): Promise<Entry> {
    const dir = this.socketDirOf(sessionId);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    fs.chmodSync(dir, 0o755);
    const socket = path.join(dir, 'proxy.sock');
    fs.rmSync(socket, { force: true });
    const attempts: EgressAttempt[] = [];
    // Refusals of the engine's gate already say who refused and why: they are shown as they are.
    const byGate = new WeakSet<UrlRefusal>();
    const bound = this.options.settingNames?.bound ?? 'the engine bound';
    const proxy = await EgressProxy.start({
      listenPath: socket,
      ...(this.options.upstream && { upstream: this.options.upstream }),
      denialHeader: this.denialHeader,
      // `host` is the request's canonical host: the one value checked here, resolved, dialled and recorded.
      checkHost: async (host, port, signal) => {
        if (!policy.allows(host, port)) {
          const refusal: UrlRefusal = {
            code: 'ADDRESS_REFUSED',
            reason: `egress to ${host}:${port} is not in this session's network policy (${policy.allow.join(', ')})`,
          };
          return { allowed: false, host, refusal };
        }
        const denied = await gate?.(host, port, signal);
        if (denied !== undefined) {
          const refusal: UrlRefusal = { code: 'ADDRESS_REFUSED', reason: denied };
          byGate.add(refusal);
          return { allowed: false, host, refusal };
        }
        return this.checkAddress(host);
      },
      refusalText: (refusal, host) =>
        refusal.code === 'DNS_FAILED'
          ? `switchyard: could not resolve ${host}`
          : byGate.has(refusal)
            ? `switchyard: ${refusal.reason}`
            : refusal.reason.includes("is not in this session's network policy")
              ? `switchyard: egress to ${host} denied by this session's network policy`
              : `switchyard: egress to ${host} denied: ${refusal.reason}`,
      onAttempt: (attempt) => {
        attempts.push(attempt);
        if (attempts.length > MAX_ATTEMPTS) attempts.splice(0, attempts.length - MAX_ATTEMPTS);
      },
    });
    this.logger.debug(`session ${sessionId}: egress proxy for ${policy.allow.join(', ')} (within ${bound})`);
    return { policy, proxy, dir, attempts };
  }
}
