import { EgressSite } from '../support/egress-site';
import { containerStartedAhead } from '../support/host-probes';
import { EngineHarness } from '../support/engine-harness';
import { LOOPBACK_ONLY, NETWORK_PROBE, probed } from '../support/network-probe';
import { SANDBOX_BACKENDS } from '../support/sandbox-backends';

jest.setTimeout(120_000);

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

  it('refuses a target that is not one strict host:port, and a Host header naming another host, recording each', async () => {
    const sid = await engine.createSession({ network: { allow: ['*.example.test', 'pypi.test'] } });
    const seen = site.requests.length;
    const r = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'pooled',
      timeoutMs: 60_000,
      code: [
        'import socket',
        'def ask(req):',
        "    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)",
        '    s.sendall(req.encode())',
        "    line = s.recv(4096).decode('latin1').split('\\r\\n')[0]",
        '    s.close()',
        '    return line',
        // The policy matched the raw text (`*.example.test`), the resolution read the address before the `/`.
        "for t in ['127.0.0.11/.example.test:80', '127.0.0.11?.example.test:80', 'pypi.test/.example.test:80', 'user@pypi.test:80']:",
        "    print('CONNECT', ask(f'CONNECT {t} HTTP/1.1\\r\\nHost: {t}\\r\\n\\r\\n'))",
        "print('FRONTED', ask('GET http://pypi.test/simple/ HTTP/1.1\\r\\nHost: other.test\\r\\nConnection: close\\r\\n\\r\\n'))",
        "print('PLAIN', ask('GET http://pypi.test/simple/ HTTP/1.1\\r\\nHost: pypi.test\\r\\nConnection: close\\r\\n\\r\\n'))",
      ].join('\n'),
    });
    expect(r.status).toBe('succeeded');
    const lines = r.stdout.trim().split('\n');
    expect(lines.filter((l: string) => l.startsWith('CONNECT HTTP/1.1 400 '))).toHaveLength(4);
    expect(lines.find((l: string) => l.startsWith('FRONTED'))).toMatch(
      /^FRONTED HTTP\/1\.1 400 .*Host header/,
    );
    expect(lines).toContain('PLAIN HTTP/1.1 200 OK');
    expect(r.egress).toEqual([
      expect.objectContaining({ host: '127.0.0.11/.example.test:80', port: 0, allowed: false }),
      expect.objectContaining({ host: '127.0.0.11?.example.test:80', port: 0, allowed: false }),
      expect.objectContaining({ host: 'pypi.test/.example.test:80', port: 0, allowed: false }),
      expect.objectContaining({ host: 'user@pypi.test:80', port: 0, allowed: false }),
      expect.objectContaining({ host: 'pypi.test', port: 80, allowed: false }),
      expect.objectContaining({ host: 'pypi.test', port: 80, allowed: true }),
    ]);
    expect(r.egress[0].reason).toContain('bad proxy request');
    expect(r.egress[4].reason).toContain('Host header');
    // Only the consistent request reached a site, carrying the host that was checked.
    expect(site.requests.slice(seen)).toEqual(['pypi.test GET /simple/']);
  });

  it("applies every layer's host rules when the connection is made, whatever the code's text names", async () => {
    const tenantPolicy = '/v1/tenants/open/policy';
    const put = await engine.request('PUT', tenantPolicy, {
      rules: [{ effect: 'deny', match: { host: 'pypi.test' }, reason: 'no package index for this tenant' }],
    });
    expect(put.status).toBe(200);
    try {
      const sid = await engine.createSession({
        network: { allow: ['pypi.test', 'git.test', 'other.test'] },
        policy: { rules: [{ effect: 'deny', match: { host: 'git.test' } }] },
      });
      const seen = site.requests.length;
      // The hosts are spelled so that no text scan can see them.
      const r = await run(
        sid,
        'h=pypi; curl -sS http://$h.test/simple/; echo; curl -sS https://$h.test/ 2>&1; echo; ' +
          'g=git; curl -sS http://$g.test/repo.git/HEAD; echo; o=other; curl -sS http://$o.test/',
      );
      expect(r.status).toBe('succeeded');
      expect(r.stdout).toContain('switchyard: egress to pypi.test is blocked by the tenant policy');
      expect(r.stdout).toContain('no package index for this tenant');
      expect(r.stdout).toMatch(/CONNECT tunnel failed, response 403/);
      expect(r.stdout).toContain('switchyard: egress to git.test is blocked by the session policy');
      expect(r.stdout).toContain('other site');
      expect(r.egress.map((e: any) => [e.host, e.port, e.allowed])).toEqual([
        ['pypi.test', 80, false],
        ['pypi.test', 443, false],
        ['git.test', 80, false],
        ['other.test', 80, true],
      ]);
      expect(r.egress[0].reason).toContain('tenant policy');
      expect(site.requests.slice(seen)).toEqual(['other.test GET /']);
    } finally {
      await engine.request('DELETE', tenantPolicy);
    }
  });

  it("applies a plan's host rules to the connections its steps open, and only while they run", async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test', 'other.test'] } });
    const seen = site.requests.length;
    const plan = await engine.request('POST', `/v1/sessions/${sid}/plans`, {
      wait: true,
      waitTimeoutMs: 60_000,
      policy: {
        rules: [{ effect: 'deny', match: { host: 'pypi.test' }, reason: 'this plan builds offline' }],
      },
      steps: [
        {
          id: 'fetch',
          // The host is spelled so that no text scan can see it: only the proxy knows where the step connects.
          action: {
            type: 'code',
            language: 'bash',
            tier: 'pooled',
            timeoutMs: 60_000,
            code: 'h=pypi; curl -sS http://$h.test/simple/; echo; o=other; curl -sS http://$o.test/',
          },
        },
      ],
    });
    expect(plan.status).toBe(200);
    expect(plan.body.status).toBe('succeeded');
    const step = (await engine.request('GET', `/v1/sessions/${sid}/actions?limit=10`)).body.actions.find(
      (a: any) => a.type === 'code',
    );
    const r = (await engine.request('GET', `/v1/sessions/${sid}/actions/${step.id}`)).body;
    expect(r.stdout).toContain('switchyard: egress to pypi.test is blocked by the plan policy');
    expect(r.stdout).toContain('this plan builds offline');
    expect(r.stdout).toContain('other site');
    expect(site.requests.slice(seen)).toEqual(['other.test GET /']);
    // Outside the plan, the same session reaches the host.
    const after = await run(sid, 'h=pypi; curl -sS -o /dev/null -w "%{http_code}" http://$h.test/simple/');
    expect(after.stdout).toBe('200');
  });

  it('holds a connection a rule asks about until a person decides, and remembers an approval for the session', async () => {
    const sid = await engine.createSession({
      network: { allow: ['other.test', 'git.test'] },
      policy: {
        rules: [
          { effect: 'ask', match: { host: 'other.test' }, reason: 'a person looks at this host' },
          { effect: 'ask', match: { host: 'git.test' } },
        ],
      },
    });
    /** The waiting approval of a connection of this session to `target`, once listed. */
    const waiting = async (target: string): Promise<any> => {
      for (let i = 0; i < 400; i++) {
        const list = (await engine.request('GET', '/v1/approvals')).body.approvals as any[];
        const found = list.find((a) => a.sessionId === sid && a.summary === `connect to ${target}`);
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`no approval for ${target}`);
    };
    const approved = run(
      sid,
      'o=other; curl -sS --max-time 50 http://$o.test/; echo; curl -sS http://$o.test/',
    );
    const approval = await waiting('other.test:80');
    expect(approval).toMatchObject({ type: 'egress', tool: 'egress', layer: 'session' });
    expect(approval.actionId).toMatch(/^egress_/);
    expect(approval.reasons.join(' ')).toContain('a person looks at this host');
    const ok = await engine.request('POST', `/v1/sessions/${sid}/actions/${approval.actionId}/approve`, {
      reason: 'expected',
    });
    expect(ok).toMatchObject({ status: 200, body: { decision: 'approved' } });
    const r = await approved;
    // The second connection went through on the same approval, without asking again.
    expect(r.stdout.match(/other site/g)).toHaveLength(2);
    expect(r.egress.map((e: any) => [e.host, e.allowed])).toEqual([
      ['other.test', true],
      ['other.test', true],
    ]);

    const rejected = run(sid, 'g=git; curl -sS --max-time 50 http://$g.test/repo.git/HEAD');
    const ask = await waiting('git.test:80');
    await engine.request('POST', `/v1/sessions/${sid}/actions/${ask.actionId}/reject`, {
      reason: 'not today',
    });
    const no = await rejected;
    expect(no.stdout).toContain(`egress to git.test:80 was rejected by`);
    expect(no.stdout).toContain('not today');
    expect(no.egress).toEqual([expect.objectContaining({ host: 'git.test', allowed: false })]);
  });

  it('reaches an allowed host from a one-off container that has only lo and no route, through the proxy socket', async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test'] } });
    const seen = site.requests.length;
    /** The container's interfaces and routes, then a request to the allowed host through the proxy. */
    const reach = [
      NETWORK_PROBE,
      'import urllib.request',
      "print('status', urllib.request.urlopen('http://pypi.test/simple/', timeout=20).status)",
    ];
    const r = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      timeoutMs: 60_000,
      code: [
        ...reach,
        // Anything but loopback is out of reach without the proxy: there is no route.
        'import errno',
        'try:',
        "    socket.create_connection(('192.0.2.1', 80), timeout=2); print('DIRECT CONNECTED')",
        'except OSError as e: print("direct", errno.errorcode.get(e.errno, type(e).__name__))',
      ].join('\n'),
    });
    expect([r.status, r.tier, r.stderr]).toEqual(['succeeded', 'container', '']);
    const [probe, status, direct] = r.stdout.trim().split('\n');
    expect(probed(probe)).toEqual(LOOPBACK_ONLY);
    expect(status).toBe('status 200');
    // runc answers ENETUNREACH (no route at all), gVisor EHOSTUNREACH.
    expect(direct).toMatch(/^direct E(NET|HOST)UNREACH$/);
    expect(r.egress).toEqual([expect.objectContaining({ host: 'pypi.test', allowed: true })]);
    expect(site.requests.slice(seen)).toEqual([expect.stringMatching(/^pypi\.test/)]);

    // From the session's second one-off action on, its next container is started ahead: the third runs in it, and its
    // forwarder relays the same way.
    const second = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      timeoutMs: 60_000,
      code: reach.join('\n'),
    });
    expect(second).toMatchObject({ status: 'succeeded' });
    const ahead = await containerStartedAhead(sid);
    const again = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      timeoutMs: 60_000,
      code: reach.join('\n'),
    });
    expect([again.status, again.stderr]).toEqual(['succeeded', '']);
    expect(
      (await engine.request('GET', `/v1/sessions/${sid}/actions/${again.id}`)).body.sandbox,
    ).toMatchObject({
      containerId: ahead,
    });
    const [aheadProbe, aheadStatus] = again.stdout.trim().split('\n');
    expect(probed(aheadProbe)).toEqual(LOOPBACK_ONLY);
    expect(aheadStatus).toBe('status 200');
    expect(again.egress).toEqual([expect.objectContaining({ host: 'pypi.test', allowed: true })]);
  });

  it("keeps the one-off tier's egress when its code opens more connections than the forwarder relays", async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test'] } });
    // One process holds 200 connections at once (its own open-files limit is 256), past the forwarder's bound.
    const r = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      timeoutMs: 90_000,
      code: [
        'import collections, json, socket, time, urllib.error, urllib.request',
        "REQ = b'GET http://pypi.test/simple/ HTTP/1.1\\r\\nHost: pypi.test\\r\\n\\r\\n'",
        'socks, lines = [], []',
        'for _ in range(200):',
        '    try:',
        "        socks.append(socket.create_connection(('127.0.0.1', 3128), timeout=20))",
        '    except OSError as e:',
        "        lines.append('connect failed ' + type(e).__name__)",
        'for s in socks:',
        '    try:',
        "        s.sendall(REQ); lines.append(s.recv(4096).split(b'\\r\\n')[0].decode('latin1'))",
        '    except OSError as e:',
        "        lines.append('failed ' + type(e).__name__)",
        'for s in socks: s.close()',
        "counts, busy = collections.Counter(), ''",
        'for line in lines:',
        "    counts[line[:12] if line.startswith('HTTP/1.1 ') else line] += 1",
        "    busy = line if line.startswith('HTTP/1.1 503') else busy",
        // The relays end as the proxy closes its side of each: egress is back within moments, not for good lost.
        'after = None',
        'for _ in range(50):',
        '    try:',
        "        after = urllib.request.urlopen('http://pypi.test/simple/', timeout=20).status; break",
        '    except urllib.error.HTTPError as e:',
        '        after = e.code; time.sleep(0.1)',
        "print(json.dumps({'counts': counts, 'busy': busy, 'after': after}))",
      ].join('\n'),
    });
    expect([r.status, r.stderr]).toEqual(['succeeded', '']);
    const { counts, busy, after } = JSON.parse(r.stdout.trim().split('\n').pop());
    // Some were relayed, the rest refused with a 503 that says why; none failed outright.
    expect(counts['HTTP/1.1 200']).toBeGreaterThan(0);
    expect(counts['HTTP/1.1 503']).toBeGreaterThan(0);
    expect(counts['HTTP/1.1 200'] + counts['HTTP/1.1 503']).toBe(200);
    expect(busy).toContain("too many connections through this sandbox's egress forwarder");
    expect(after).toBe(200);
  });

  it('installs with a plain `pip install` (no flags) into the session, for a later action of the same tier', async () => {
    const sid = await engine.createSession({ network: { allow: ['pypi.test'] } });
    // The index is the caller's environment, as a pip.conf would be: the command itself has no flag at all.
    const index = { PIP_INDEX_URL: 'http://pypi.test/simple', PIP_TRUSTED_HOST: 'pypi.test' };
    const pip = await run(sid, `pip install ${EgressSite.PACKAGE} 2>&1`, { env: index });
    expect(pip).toMatchObject({ status: 'succeeded' });
    expect(pip.stdout).toContain('Successfully installed hello-switchyard-0.1');
    expect(pip.stdout).not.toContain('externally-managed-environment');
    // The user site under the session's HOME, not the (read-only) system.
    const use = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'pooled',
      code: `import os, ${EgressSite.MODULE}\nprint(${EgressSite.MODULE}.greet())\nprint(${EgressSite.MODULE}.__file__.startswith(os.environ['HOME']))`,
    });
    expect(use).toMatchObject({ status: 'succeeded', stdout: 'hello from a wheel\nTrue\n' });
    // `--user` asks for the same place, and works too.
    const user = await run(sid, `pip install --user --force-reinstall ${EgressSite.PACKAGE} 2>&1 | tail -1`, {
      env: index,
    });
    expect(user).toMatchObject({ status: 'succeeded' });
    expect(user.stdout).toContain('Successfully installed hello-switchyard-0.1');
  });

  it("answers `pip install` in a session without network with the no-network hint, not PEP 668's refusal", async () => {
    const sid = await engine.createSession();
    const pip = await run(sid, 'pip install requests');
    expect(pip.status).toBe('failed');
    expect(`${pip.stdout}${pip.stderr}`).not.toContain('externally-managed-environment');
    expect(pip.hints?.[0]).toContain('this session has no network');
  });
});

/**
 * The core cases on every sandbox backend: the proxy and its policy are the engine's own, the way to it differs (a
 * Docker container's mounted socket; a Kubernetes pod's runner, over its attach stream: the pod has no network). The
 * other cases above run on Docker only, the default backend, as they test the proxy, not the way to it.
 */
describe.each(SANDBOX_BACKENDS.map((b) => [b.name, b] as const))(
  'egress by session policy, core (%s)',
  (_name, backend) => {
    let engine: EngineHarness;
    let site: EgressSite;
    const run = (sid: string, code: string, extra: Record<string, unknown> = {}): Promise<any> =>
      engine.action(sid, {
        type: 'code',
        language: 'bash',
        code,
        tier: 'pooled',
        timeoutMs: 60_000,
        ...extra,
      });

    beforeAll(async () => {
      site = await EgressSite.start();
      engine = await EngineHarness.start({
        ...(await backend.env()),
        SWITCHYARD_EGRESS_ALLOWED: 'pypi.test,git.test,redirect.test,*',
        SWITCHYARD_EGRESS_RESOLVE: EgressSite.resolveSetting,
      });
    });
    afterAll(async () => {
      await engine?.stop();
      await site?.stop();
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
  },
);
