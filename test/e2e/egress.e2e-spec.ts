import { EgressSite } from '../support/egress-site';
import { EngineHarness } from '../support/engine-harness';

/**
 * Network by policy: a session's container sandboxes reach the hosts its policy allows through the engine's egress
 * proxy only, over a Unix socket; everything else is refused with a message the tools print. Local servers on
 * loopback stand in for the internet (see EgressSite); nothing leaves this machine.
 */
describe('egress by session policy', () => {
  let engine: EngineHarness;
  let site: EgressSite;
  const run = (sid: string, code: string, extra: Record<string, unknown> = {}): Promise<any> =>
    engine.action(sid, { type: 'code', language: 'bash', code, tier: 'pooled', timeoutMs: 60_000, ...extra });

  beforeAll(async () => {
    site = await EgressSite.start();
    engine = await EngineHarness.start({
      SWITCHYARD_EGRESS_ALLOWED: 'pypi.test,git.test,redirect.test,*',
      SWITCHYARD_EGRESS_RESOLVE: EgressSite.resolveSetting,
    });
  });
  afterAll(async () => {
    await engine.stop();
    await site.stop();
  });

  it('refuses a session asking beyond the engine bound, naming the hosts, and creates nothing', async () => {
    const own = await EngineHarness.start({ SWITCHYARD_EGRESS_ALLOWED: 'pypi.test' });
    try {
      const res = await own.request('POST', '/v1/sessions', {
        network: { allow: ['pypi.test', 'github.com', '*.evil.test'] },
      });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain('github.com, *.evil.test');
      expect(JSON.stringify(res.body)).toContain('network.allow');
      expect((await own.request('GET', '/v1/sessions')).body.sessions).toEqual([]);
      const bad = await own.request('POST', '/v1/sessions', { network: { allow: ['10.0.0.1'] } });
      expect(bad.status).toBe(400);
      const ok = await own.request('POST', '/v1/sessions', { network: { allow: ['pypi.test'] } });
      expect(ok).toMatchObject({ status: 201, body: { network: { allow: ['pypi.test'] } } });
    } finally {
      await own.stop();
    }
  });

  it('installs a package and clones a repository through the proxy when allowed, and keeps the install', async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test', 'git.test'] } });
    const pip = await run(
      sid,
      `pip install --index-url http://pypi.test/simple --trusted-host pypi.test ${EgressSite.PACKAGE} 2>&1 | tail -2`,
    );
    expect(pip).toMatchObject({ status: 'succeeded' });
    expect(pip.stdout).toContain('Successfully installed hello-switchyard-0.1');
    expect(pip.egress).toEqual(
      expect.arrayContaining([expect.objectContaining({ host: 'pypi.test', port: 80, allowed: true })]),
    );
    expect(pip.egress.find((e: any) => e.allowed).bytesIn).toBeGreaterThan(0);
    // What the session installed is there for its next action.
    const use = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: `import ${EgressSite.MODULE}\nprint(${EgressSite.MODULE}.greet())`,
      tier: 'pooled',
    });
    expect(use).toMatchObject({ status: 'succeeded', stdout: 'hello from a wheel\n' });
    const clone = await run(sid, 'git clone -q http://git.test/repo.git cloned && cat cloned/README.md');
    expect(clone).toMatchObject({ status: 'succeeded', stdout: 'cloned through the egress proxy\n' });
    // A kernel of the session, and the one-off tier, go through the proxy too.
    const kernel = await engine.action(sid, {
      type: 'code',
      language: 'python',
      state: 'session',
      tier: 'pooled',
      code: "import urllib.request\nurllib.request.urlopen('http://pypi.test/simple/').status",
    });
    expect(kernel.output.result).toBe('200');
    const oneOff = await run(sid, 'curl -s http://pypi.test/simple/', { tier: 'container' });
    expect(oneOff).toMatchObject({ status: 'succeeded' });
    expect(oneOff.stdout).toContain(EgressSite.PACKAGE);
  });

  it('refuses hosts outside the policy with a message the tool prints, and records every attempt', async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test'] } });
    const r = await run(
      sid,
      'curl -sS http://other.test/; echo; curl -sS https://other.test/ 2>&1; echo; curl -sS http://pypi.test/simple/ >/dev/null && echo reached',
    );
    expect(r.stdout).toContain("switchyard: egress to other.test denied by this session's network policy");
    expect(r.stdout).toContain('403');
    expect(r.stdout).toContain('reached');
    expect(r.egress).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ host: 'other.test', port: 80, allowed: false }),
        expect.objectContaining({ host: 'other.test', port: 443, allowed: false }),
        expect.objectContaining({ host: 'pypi.test', port: 80, allowed: true }),
      ]),
    );
    // pip prints the refusal of its tunnel to a host outside the policy.
    const pip = await run(
      sid,
      `pip install --retries 1 --index-url https://git.test/simple ${EgressSite.PACKAGE} 2>&1`,
    );
    expect(pip.stdout).toContain("switchyard: egress to git.test denied by this session's network policy");
    // The graph keeps the attempts with the action, for a reflection loop.
    const context = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}/context`)).body;
    expect(context.action.result.egress).toEqual(r.egress);
    expect(site.requests.some((q) => q.startsWith('other.test'))).toBe(false);
  });

  it('never reaches private, loopback or metadata addresses, redirects to them, or a refused port', async () => {
    const sid = await engine.createSession({ network: { allow: ['*', 'redirect.test'] } });
    const seenBefore = site.requests.length;
    const targets = [
      'http://localhost/',
      'http://sub.localhost/',
      'http://127.0.0.1/',
      'http://0.0.0.0/',
      'http://2852039166/',
      'http://0xa9fea9fe/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::1]/',
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://127.0.0.11/',
    ];
    const r = await run(
      sid,
      // --noproxy '': loopback names too go to the proxy (NO_PROXY would send them to the sandbox's own loopback).
      targets
        .map((t) => `curl --noproxy '' -s -o /dev/null -w '%{http_code} ${t}\\n' --max-time 5 ${t}`)
        .join('; ') +
        "; curl -s -o /dev/null -w '%{http_code} redirect\\n' -L --max-time 5 http://redirect.test/" +
        '; curl -sS --max-time 5 https://pypi.test:22/ 2>&1 | tail -1',
    );
    // The metadata address in its plain form is refused by the risk policy before anything runs (critical with
    // network code); its other spellings, and a redirect to it, are the proxy's to refuse.
    const lines = r.stdout.trim().split('\n');
    for (const t of targets) expect(lines).toContain(`403 ${t}`);
    // The redirect itself was allowed; following it to the metadata address was not.
    expect(lines).toContain('403 redirect');
    expect(r.stdout).toMatch(/CONNECT tunnel failed, response 403|403/);
    expect(r.egress.filter((e: any) => e.allowed).map((e: any) => e.host)).toEqual(['redirect.test']);
    expect(r.egress.filter((e: any) => !e.allowed).length).toBeGreaterThanOrEqual(targets.length + 2);
    expect(site.requests.slice(seenBefore).filter((q) => !q.startsWith('redirect.test'))).toEqual([]);
  });

  it('gives raw sockets and UDP no way out, and leaves the subprocess tier offline', async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test'] } });
    const raw = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'pooled',
      code: [
        'import socket',
        'for target in [("127.0.0.11", 80), ("8.8.8.8", 53)]:',
        '    try:',
        '        socket.create_connection(target, timeout=2); print("CONNECTED", target)',
        '    except OSError as e: print("tcp refused", target, type(e).__name__)',
        'try:',
        '    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("8.8.8.8", 53)); print("UDP SENT")',
        'except OSError as e: print("udp refused", type(e).__name__)',
      ].join('\n'),
    });
    expect(raw.stdout).not.toContain('CONNECTED');
    expect(raw.stdout).not.toContain('UDP SENT');
    // Nothing in the subprocess tier reaches the proxy: no proxy settings, no socket, no forwarder.
    const sub = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      tier: 'subprocess',
      code: 'echo "proxy=${HTTP_PROXY:-none}"; test -e /run/switchyard-egress && echo socket-dir || echo no-socket-dir',
    });
    expect(sub).toMatchObject({ status: 'succeeded', stdout: 'proxy=none\nno-socket-dir\n' });
  });

  it('keeps policies per session, and tells a session without network how to ask for it', async () => {
    const withNet = await engine.createSession({ network: { allow: ['pypi.test'] } });
    const without = await engine.createSession();
    expect((await run(withNet, 'curl -s http://pypi.test/simple/')).stdout).toContain(EgressSite.PACKAGE);
    const r = await run(
      without,
      'python3 -c "import urllib.request; urllib.request.urlopen(\'http://pypi.test/simple/\')"',
    );
    expect(r.status).toBe('failed');
    expect(r.egress).toBeUndefined();
    expect(r.hints?.[0]).toContain('this session has no network');
    expect(r.hints?.[0]).toContain('"network"');
  });
});
