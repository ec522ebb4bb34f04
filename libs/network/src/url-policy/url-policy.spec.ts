import {
  AllowlistEntryError,
  canonicalHost,
  type HostResolver,
  parseAllowlist,
  UrlPolicy,
  type UrlVerdict,
} from './url-policy';

/** A resolver with fixed answers that counts its lookups. */
class FakeResolver implements HostResolver {
  readonly calls: string[] = [];
  constructor(private readonly answers: Record<string, string[] | Error>) {}

  async lookup(hostname: string): Promise<{ address: string; family: number }[]> {
    this.calls.push(hostname);
    const a = this.answers[hostname];
    if (a === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    if (a instanceof Error) throw a;
    return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  }
}

const DNS: Record<string, string[]> = {
  'public.example': ['93.184.216.34', '2606:2800:220:1::1'],
  'metadata.example': ['169.254.169.254'],
  'mixed.example': ['93.184.216.34', '10.0.0.5'],
  'mapped.example': ['::ffff:169.254.169.254'],
  'intranet.corp': ['10.1.2.3'],
  'db.corp.example': ['192.168.7.7'],
  'lab.example': ['172.16.5.5'],
};

const refusedCode = (v: UrlVerdict | undefined) => (v && !v.allowed ? v.refusal.code : undefined);

describe('UrlPolicy', () => {
  let resolver: FakeResolver;
  let policy: UrlPolicy;

  beforeEach(() => {
    resolver = new FakeResolver(DNS);
    policy = new UrlPolicy({ resolver, allowlistSetting: 'SWITCHYARD_BROWSER_ALLOWLIST' });
  });

  describe('schemes', () => {
    it.each([
      'file:///etc/passwd',
      'FILE:///etc/passwd',
      'FiLe:///etc/passwd',
      '  file:///etc/passwd',
      '\tfile:///etc/passwd',
      '\nfile:///etc/passwd',
      'fi\tle:///etc/passwd',
      'fi\nle:///etc/passwd',
      'file://localhost/etc/passwd',
      'file:/etc/passwd',
      'view-source:http://127.0.0.1/',
      'VIEW-SOURCE:https://example.org/',
      'view-source:file:///etc/passwd',
      'chrome://settings',
      'CHROME://version',
      'chrome-extension://abc/x.html',
      'devtools://devtools/bundled/inspector.html',
      'about:blank',
      'data:text/html,<script>alert(1)</script>',
      'DATA:text/html;base64,PGgxPg==',
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      ' javascript:alert(1)',
      'java\tscript:alert(1)',
      'blob:http://example.org/uuid',
      'ftp://example.org/',
      'ws://example.org/',
      'filesystem:http://example.org/temporary/x',
    ])('refuses %j without DNS', async (url) => {
      expect(refusedCode(policy.checkStatic(url))).toBe('URL_SCHEME');
      expect(refusedCode(await policy.checkUrl(url))).toBe('URL_SCHEME');
      expect(resolver.calls).toEqual([]);
    });

    it('says why', () => {
      const v = policy.checkStatic('file:///etc/passwd');
      expect(v).toEqual({
        allowed: false,
        refusal: {
          code: 'URL_SCHEME',
          reason: 'only http and https URLs may be opened; file: URLs are refused',
        },
      });
    });

    it.each(['not a url', '', 'http://', '//example.org/x', 'http://exa mple.org/'])(
      'calls %j invalid',
      (url) => {
        expect(refusedCode(policy.checkStatic(url))).toBe('URL_INVALID');
      },
    );
  });

  describe('address literals (no DNS)', () => {
    it.each([
      ['http://127.0.0.1/', 'loopback'],
      ['http://127.1/', 'loopback'],
      ['http://127.0.1/', 'loopback'],
      ['http://2130706433/', 'loopback'],
      ['http://0x7f000001/', 'loopback'],
      ['http://0x7F.1/', 'loopback'],
      ['http://0177.0.0.1/', 'loopback'],
      ['http://017700000001/', 'loopback'],
      ['http://127.000.000.001/', 'loopback'],
      ['http://[::1]/', 'loopback'],
      ['http://[0:0:0:0:0:0:0:1]/', 'loopback'],
      ['http://[::ffff:127.0.0.1]/', 'loopback'],
      ['http://[::ffff:7f00:1]/', 'loopback'],
      ['http://[::127.0.0.1]/', 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'link-local'],
      ['http://2852039166/', 'link-local'],
      ['http://0xa9fea9fe/', 'link-local'],
      ['http://0251.0376.0251.0376/', 'link-local'],
      ['http://169.254.43518/', 'link-local'],
      ['http://[::ffff:169.254.169.254]/', 'link-local'],
      ['http://[::ffff:a9fe:a9fe]/', 'link-local'],
      ['http://[64:ff9b::a9fe:a9fe]/', 'link-local'],
      ['http://[2002:a9fe:a9fe::]/', 'link-local'],
      ['http://[fe80::1]/', 'link-local'],
      ['http://10.0.0.1/', 'private'],
      ['http://172.16.0.1/', 'private'],
      ['http://192.168.0.1/', 'private'],
      ['http://100.64.0.1/', 'carrier-grade NAT'],
      ['http://0.0.0.0/', 'unspecified'],
      ['http://0/', 'unspecified'],
      ['http://[::]/', 'unspecified'],
      ['http://[fc00::1]/', 'unique-local'],
      ['http://[fd00:ec2::254]/', 'unique-local'],
      ['http://224.0.0.1/', 'multicast'],
      ['http://255.255.255.255/', 'broadcast'],
      ['https://127.0.0.1:8443/', 'loopback'],
      ['http://user:pass@127.0.0.1/', 'loopback'],
      ['http://127.0.0.1./', 'loopback'],
      ['HTTP://127.1/', 'loopback'],
    ])('refuses %s (%s)', async (url, why) => {
      const v = policy.checkStatic(url);
      expect(refusedCode(v)).toBe('ADDRESS_REFUSED');
      expect(v && !v.allowed && v.refusal.reason).toContain(why);
      expect(v && !v.allowed && v.refusal.reason).toContain('not on SWITCHYARD_BROWSER_ALLOWLIST');
      expect(refusedCode(await policy.checkUrl(url))).toBe('ADDRESS_REFUSED');
      expect(resolver.calls).toEqual([]);
    });

    it('explains wrapped forms by the address they carry', () => {
      const v = policy.checkStatic('http://[::ffff:a9fe:a9fe]/');
      expect(v).toMatchObject({
        allowed: false,
        refusal: {
          reason:
            '::ffff:a9fe:a9fe carries 169.254.169.254, a link-local address (cloud metadata lives here) (169.254.0.0/16); not on SWITCHYARD_BROWSER_ALLOWLIST',
        },
      });
    });

    it('allows public addresses', async () => {
      expect(policy.checkStatic('http://8.8.8.8/')).toMatchObject({ allowed: true, addresses: ['8.8.8.8'] });
      expect(policy.checkStatic('https://[2606:4700::1111]/')).toMatchObject({ allowed: true });
      expect(await policy.checkUrl('http://[::ffff:8.8.8.8]/')).toMatchObject({ allowed: true });
    });

    it('treats localhost names as loopback whatever DNS says', async () => {
      for (const url of [
        'http://localhost/',
        'http://LOCALHOST:3000/',
        'http://a.b.localhost/',
        'http://localhost./',
      ]) {
        expect(refusedCode(policy.checkStatic(url))).toBe('ADDRESS_REFUSED');
        expect(refusedCode(await policy.checkUrl(url))).toBe('ADDRESS_REFUSED');
      }
      expect(resolver.calls).toEqual([]);
    });
  });

  describe('names (resolved with the injected resolver)', () => {
    it('allows a name whose every address is public', async () => {
      expect(policy.checkStatic('https://public.example/')).toBeUndefined();
      expect(await policy.checkUrl('https://public.example/path')).toMatchObject({
        allowed: true,
        host: 'public.example',
        addresses: ['93.184.216.34', '2606:2800:220:1::1'],
      });
    });

    it('refuses a name that resolves to a refused address', async () => {
      const v = await policy.checkUrl('http://metadata.example/latest');
      expect(v).toEqual({
        allowed: false,
        refusal: {
          code: 'ADDRESS_REFUSED',
          reason:
            'metadata.example resolves to 169.254.169.254, a link-local address (cloud metadata lives here) (169.254.0.0/16); not on SWITCHYARD_BROWSER_ALLOWLIST',
        },
      });
    });

    it('refuses when any one address is refused', async () => {
      expect(refusedCode(await policy.checkUrl('http://mixed.example/'))).toBe('ADDRESS_REFUSED');
      expect(refusedCode(await policy.checkUrl('http://mapped.example/'))).toBe('ADDRESS_REFUSED');
    });

    it('fails (not refuses) names that do not resolve, and lookups that hang', async () => {
      expect(await policy.checkUrl('http://nowhere.example/')).toMatchObject({
        allowed: false,
        refusal: { code: 'DNS_FAILED', reason: expect.stringContaining('ENOTFOUND') },
      });
      const slow = new UrlPolicy({
        resolver: { lookup: () => new Promise(() => undefined) },
        lookupTimeoutMs: 20,
      });
      expect(await slow.checkUrl('http://slow.example/')).toMatchObject({
        allowed: false,
        refusal: { code: 'DNS_FAILED', reason: expect.stringContaining('timed out') },
      });
    });

    it('canonicalizes names like the browser (case, trailing dot, punycode)', async () => {
      expect(await policy.checkUrl('http://PUBLIC.Example./')).toMatchObject({
        allowed: true,
        host: 'public.example',
      });
      await policy.checkUrl('http://bücher.example/');
      expect(resolver.calls).toContain('xn--bcher-kva.example');
    });

    it('reuses a resolution for its TTL, then asks again', async () => {
      let now = 0;
      const p = new UrlPolicy({
        resolver,
        cacheTtlMs: 1000,
        clock: { now: () => new Date(now), monotonic: () => now },
      });
      await p.checkUrl('http://public.example/a');
      await p.checkUrl('http://public.example/b');
      expect(resolver.calls).toEqual(['public.example']);
      now = 1500;
      await p.checkUrl('http://public.example/c');
      expect(resolver.calls).toEqual(['public.example', 'public.example']);
    });
  });

  describe('allowlist', () => {
    const withList = (entries: string[]) => new UrlPolicy({ resolver, allowlist: parseAllowlist(entries) });

    it('an address entry allows that address in every spelling, and nothing next to it', async () => {
      const p = withList(['127.0.0.2']);
      for (const url of [
        'http://127.0.0.2:8080/',
        'http://2130706434/',
        'http://0x7f000002/',
        'http://[::ffff:7f00:2]/',
      ]) {
        expect(await p.checkUrl(url)).toMatchObject({ allowed: true });
      }
      for (const url of [
        'http://127.0.0.1/',
        'http://127.1/',
        'http://localhost/',
        'http://[::1]/',
        'http://127.0.0.3/',
      ]) {
        expect(refusedCode(await p.checkUrl(url))).toBe('ADDRESS_REFUSED');
      }
    });

    it('a CIDR entry allows its range, for literals and for resolved names', async () => {
      const p = withList(['10.0.0.0/8', 'fd00::/8']);
      expect(await p.checkUrl('http://10.9.8.7/')).toMatchObject({ allowed: true });
      expect(await p.checkUrl('http://intranet.corp/')).toMatchObject({
        allowed: true,
        addresses: ['10.1.2.3'],
      });
      expect(await p.checkUrl('http://[fd00::5]/')).toMatchObject({ allowed: true });
      expect(refusedCode(await p.checkUrl('http://192.168.1.1/'))).toBe('ADDRESS_REFUSED');
      // mixed.example has a public and a 10/8 address: both are now fine.
      expect(await p.checkUrl('http://mixed.example/')).toMatchObject({ allowed: true });
    });

    it('a loopback CIDR does not cover ::1, so localhost needs both', async () => {
      expect(refusedCode(await withList(['127.0.0.0/8']).checkUrl('http://localhost/'))).toBe(
        'ADDRESS_REFUSED',
      );
      expect(await withList(['127.0.0.0/8', '::1']).checkUrl('http://localhost/')).toMatchObject({
        allowed: true,
      });
    });

    it('a hostname entry allows that name (and only it) whatever it resolves to', async () => {
      const p = withList(['intranet.corp', '*.corp.example']);
      expect(await p.checkUrl('http://intranet.corp/')).toMatchObject({
        allowed: true,
        addresses: ['10.1.2.3'],
      });
      expect(await p.checkUrl('http://INTRANET.corp./')).toMatchObject({ allowed: true });
      expect(await p.checkUrl('http://db.corp.example/')).toMatchObject({ allowed: true });
      expect(refusedCode(await p.checkUrl('http://lab.example/'))).toBe('ADDRESS_REFUSED');
      expect(refusedCode(await p.checkUrl('http://10.1.2.3/'))).toBe('ADDRESS_REFUSED');
      expect(refusedCode(await p.checkUrl('http://corp.example.evil/'))).toBe('DNS_FAILED');
    });

    it('hands back the allowed addresses for a proxy to pin', async () => {
      expect(await withList(['172.16.0.0/12']).checkHost('lab.example')).toEqual({
        allowed: true,
        host: 'lab.example',
        addresses: ['172.16.5.5'],
      });
      expect(await policy.checkHost('[::ffff:a9fe:a9fe]')).toMatchObject({ allowed: false });
      expect(await policy.checkHost('0x7f.1')).toMatchObject({ allowed: false, host: '127.0.0.1' });
    });

    it('parses entries and names the bad one', () => {
      const a = parseAllowlist([' 127.0.0.2 ', '10.0.0.0/8', 'Intranet.Corp', '*.corp.example', '::1', '']);
      expect([...a.hosts]).toEqual(['intranet.corp']);
      expect(a.suffixes).toEqual(['.corp.example']);
      expect(a.cidrs.map((c) => c.prefix)).toEqual([32, 8, 128]);
      for (const bad of ['10.0.0.0/33', 'http://x', 'a b', '*.', 'exa_mple..com', ':::']) {
        expect(() => parseAllowlist([bad])).toThrow(AllowlistEntryError);
      }
      expect(new UrlPolicy({ allowlist: a }).describeAllowlist()).toEqual([
        'intranet.corp',
        '*.corp.example',
        '127.0.0.2/32',
        '10.0.0.0/8',
        '::1/128',
      ]);
    });
  });
});

describe('canonicalHost', () => {
  it.each([
    ['127.1', '127.0.0.1'],
    ['[::1]', '::1'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['Example.ORG.', 'example.org'],
    ['0x7f000001', '127.0.0.1'],
  ])('%s → %s', (raw, host) => {
    expect(canonicalHost(raw)).toBe(host);
  });

  it('rejects what is not a host', () => {
    expect(canonicalHost('a b')).toBeUndefined();
    expect(canonicalHost('')).toBeUndefined();
  });
});
