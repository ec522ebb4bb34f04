/**
 * Python that reports what network a sandbox has, as one JSON line: the interfaces the kernel lists (/proc/net/dev
 * and `if_nameindex`), its IPv4 and IPv6 routes other than loopback's, whether `localhost` resolves (/etc/hosts) and
 * whether loopback carries a connection. The sandbox image has no `ip`; /proc/net is what `ip` itself reads.
 */
export const NETWORK_PROBE = [
  'import json, socket',
  'def lines(path):',
  '    try:',
  '        with open(path) as f: return f.read().splitlines()',
  '    except OSError: return []',
  "ifaces = sorted(l.split(':')[0].strip() for l in lines('/proc/net/dev')[2:])",
  'routes4 = [l for l in lines("/proc/net/route")[1:] if l.strip()]',
  // IPv6 routes through lo (the local and multicast table entries) are loopback's own; any other interface is a way out.
  'routes6 = [l for l in lines("/proc/net/ipv6_route") if l.split()[-1] != "lo"]',
  'srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()',
  'socket.create_connection(srv.getsockname(), timeout=5).close()',
  'print(json.dumps({"ifaces": ifaces, "names": sorted(n for _, n in socket.if_nameindex()),',
  '    "routes4": routes4, "routes6": routes6, "localhost": socket.gethostbyname("localhost"), "loopback": True}))',
].join('\n');

/** What `NETWORK_PROBE` prints for a sandbox whose only interface is loopback and which has no route out. */
export const LOOPBACK_ONLY = {
  ifaces: ['lo'],
  names: ['lo'],
  routes4: [],
  routes6: [],
  localhost: '127.0.0.1',
  loopback: true,
};

/** The probe's JSON line (the last line of `stdout`). */
export function probed(stdout: string): unknown {
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}');
}
