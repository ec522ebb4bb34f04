import { formatAuthority, parseAuthority, parseProxyTarget } from './authority';

describe('parseAuthority (a CONNECT target)', () => {
  it.each([
    ['example.org:443', { host: 'example.org', port: 443, kind: 'name' }],
    ['Example.ORG.:443', { host: 'example.org', port: 443, kind: 'name' }],
    ['bücher.example.test:443', { host: 'xn--bcher-kva.example.test', port: 443, kind: 'name' }],
    ['under_score.test:80', { host: 'under_score.test', port: 80, kind: 'name' }],
    ['127.0.0.1:1', { host: '127.0.0.1', port: 1, kind: 'ipv4' }],
    ['[::1]:8080', { host: '::1', port: 8080, kind: 'ipv6' }],
    ['[0:0:0:0:0:FFFF:7F00:1]:443', { host: '::ffff:7f00:1', port: 443, kind: 'ipv6' }],
    // Number forms are read as a resolver would read them: the address is what gets checked.
    ['127.1:80', { host: '127.0.0.1', port: 80, kind: 'ipv4' }],
    ['2852039166:80', { host: '169.254.169.254', port: 80, kind: 'ipv4' }],
    ['0xa9fea9fe:80', { host: '169.254.169.254', port: 80, kind: 'ipv4' }],
  ])('%s', (authority, expected) => {
    expect(parseAuthority(authority)).toEqual(expected);
  });

  it.each([
    // The host confusion: a path, query or fragment after an address, with an allowed suffix.
    '93.184.216.34/.example.test:443',
    '93.184.216.34?.example.test:443',
    '93.184.216.34#.example.test:443',
    '93.184.216.34\\.example.test:443',
    'user@example.test:443',
    'example.test@93.184.216.34:443',
    'exa mple.test:443',
    'example.test:',
    'example.test',
    'example.test:0',
    'example.test:70000',
    'example.test:+80',
    'example.test:80:80',
    '::1:80',
    '[::1]',
    '[::1]x:80',
    '[fe80::1%25eth0]:80',
    '[v1.fe80::1]:80',
    'ex%61mple.test:443',
    'a..b.test:443',
    '.a.test:443',
    'a.test..:443',
    'a!b.test:443',
    'a\u0000b.test:443',
    'ｅｘａｍｐｌｅ．ｔｅｓｔ／ｘ:443',
    `${'a'.repeat(64)}.test:443`,
    '',
  ])('refuses %j', (authority) => {
    const parsed = parseAuthority(authority);
    expect(parsed).toEqual({ reason: expect.any(String) });
  });

  it('takes a default port only when one is given (a Host header, not a tunnel)', () => {
    expect(parseAuthority('example.test', 80)).toEqual({ host: 'example.test', port: 80, kind: 'name' });
    expect(parseAuthority('example.test')).toEqual({ reason: expect.stringContaining('no port') });
  });
});

describe('parseProxyTarget (an absolute-form request)', () => {
  it.each([
    ['http://pypi.test/simple/', { scheme: 'http:', host: 'pypi.test', port: 80, path: '/simple/' }],
    ['HTTP://PyPI.Test.:8080', { scheme: 'http:', host: 'pypi.test', port: 8080, path: '/' }],
    ['http://pypi.test?q=1', { scheme: 'http:', host: 'pypi.test', port: 80, path: '/?q=1' }],
    ['http://pypi.test/a?b=[1]#frag', { scheme: 'http:', host: 'pypi.test', port: 80, path: '/a?b=[1]' }],
    ['http://[::1]:81/x', { scheme: 'http:', host: '::1', port: 81, path: '/x' }],
  ])('%s', (raw, expected) => {
    expect(parseProxyTarget(raw, ['http:'])).toMatchObject(expected);
  });

  it.each([
    ['/relative', 'absolute URL'],
    ['ftp://pypi.test/x', 'only http://'],
    ['http://user:pw@pypi.test/', 'userinfo'],
    ['http://93.184.216.34\\.example.test/', 'not a host name'],
    ['http://pypi.test:/', 'port'],
    ['http://pypi.test/a b', 'percent-encode'],
    ['http:///x', 'no host'],
  ])('refuses %j', (raw, why) => {
    expect(parseProxyTarget(raw, ['http:'])).toEqual({ reason: expect.stringContaining(why) });
  });

  it('formats host:port with IPv6 in brackets', () => {
    expect(formatAuthority('::1', 80)).toBe('[::1]:80');
    expect(formatAuthority('pypi.test', 443)).toBe('pypi.test:443');
  });
});
