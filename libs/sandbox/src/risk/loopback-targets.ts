import type { Language } from '@switchyard/common';

/** `scheme://host` in code: the host, bracketed IPv6 included. */
const URL_HOST = /\b[a-z][a-z0-9+.-]*:\/\/(\[[^\]\s]*\]|[^/\s'"`:?#]*)/gi;
/** A quoted literal that is nothing but `host` or `host:port` (a socket address, a curl argument). */
const QUOTED = /(['"`])([^'"`\n]{1,255})\1/g;
const HOST_PORT =
  /^(\[[0-9a-f:.]+\]|(?:\d{1,3}\.){3}\d{1,3}|localhost|(?:[a-z0-9-]+\.)+[a-z][a-z0-9-]*)(?::\d{1,5})?$/i;
/** Shell network commands and the line after them. */
const SHELL_NET = /(?:^|[;&|({`'"]|\$\()[ \t]*(?:curl|wget|nc|ncat|netcat|socat|telnet|ping)\b([^\n;&|]*)/gm;
const DEV_TCP = /\/dev\/(?:tcp|udp)\/([^/\s]+)\//g;

/** loopback names and addresses: localhost, *.localhost, 127.0.0.0/8, ::1, and 0.0.0.0 (which a client dials locally). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return (
    h === 'localhost' ||
    h.endsWith('.localhost') ||
    /^127(?:\.\d{1,3}){3}$/.test(h) ||
    h === '::1' ||
    h === '0:0:0:0:0:0:0:1' ||
    h === '0.0.0.0'
  );
}

/**
 * The hosts code names as network targets: URL hosts, quoted `host[:port]` literals, the host-looking arguments of
 * shell network commands and `/dev/tcp/HOST/…`. Only literals: a host the code computes is not found, which is why
 * {@link targetsOnlyLoopback} needs at least one and all of them loopback.
 */
export function networkTargets(code: string, language: Language): string[] {
  const hosts: string[] = [];
  for (const m of code.matchAll(URL_HOST)) hosts.push(m[1]);
  for (const m of code.matchAll(QUOTED)) {
    const hp = HOST_PORT.exec(m[2].trim());
    if (hp) hosts.push(hp[1]);
  }
  if (language === 'bash') {
    for (const m of code.matchAll(SHELL_NET)) {
      for (const arg of m[1].split(/\s+/)) {
        const hp = HOST_PORT.exec(arg.replace(/\/.*$/, ''));
        if (hp) hosts.push(hp[1]);
      }
    }
  }
  for (const m of code.matchAll(DEV_TCP)) hosts.push(m[1]);
  return hosts;
}

/**
 * True when the only network targets the code names are loopback ones (a server of the session's own sandbox,
 * started as a background process): that reaches nothing outside the sandbox in any tier, so it does not count as
 * network use. Code that names no target at all, or any other one, does not qualify.
 */
export function targetsOnlyLoopback(code: string, language: Language): boolean {
  const hosts = networkTargets(code, language);
  return hosts.length > 0 && hosts.every(isLoopbackHost);
}
