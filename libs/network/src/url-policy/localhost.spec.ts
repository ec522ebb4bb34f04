import { isLocalhost } from './localhost';
import { parseAllowlist, UrlPolicy } from './url-policy';

describe('isLocalhost: which hosts name the machine itself (a browser reads them as its session’s sandbox)', () => {
  it.each([
    ['localhost'],
    ['LOCALHOST'],
    ['LocalHost.'],
    ['localhost.'],
    ['app.localhost'],
    ['a.b.localhost.'],
    ['127.0.0.1'],
    ['127.0.0.1.'],
    // inet_aton and WHATWG number forms of 127.0.0.1: the same address, however it is typed.
    ['127.1'],
    ['2130706433'],
    ['0x7f000001'],
    ['0x7f.1'],
    ['0177.0.0.1'],
    ['0177.1'],
    ['::1'],
    ['[::1]'],
    ['[0:0:0:0:0:0:0:1]'],
    // IPv4-mapped: what a dual-stack socket calls an IPv4 peer on this machine.
    ['[::ffff:127.0.0.1]'],
    ['::ffff:7f00:1'],
    // The unspecified address: Linux connects it to the machine itself, and servers print it.
    ['0.0.0.0'],
    ['0'],
    ['[::]'],
    ['[::ffff:0.0.0.0]'],
  ])('%s is this machine', (host) => {
    expect(isLocalhost(host)).toBe(true);
  });

  it.each([
    // Other loopback addresses: a tunnel to a session's port reaches 127.0.0.1, not them.
    ['127.0.0.2'],
    ['127.255.255.255'],
    ['0x7f000002'],
    ['0.0.0.1'],
    // Wrappers that lead elsewhere than this machine.
    ['[::127.0.0.1]'],
    ['[64:ff9b::7f00:1]'],
    ['[2002:7f00:1::]'],
    ['[::ffff:0:7f00:1]'],
    // Names that only contain the word, or resolve to loopback somewhere.
    ['localhost.example'],
    ['notlocalhost'],
    ['localhostx'],
    ['localhost..'],
    ['xn--localhost'],
    ['169.254.169.254'],
    ['10.0.0.1'],
    ['[fe80::1]'],
    ['example.com'],
    [''],
    ['[::1'],
    ['local host'],
  ])('%s is not', (host) => {
    expect(isLocalhost(host)).toBe(false);
  });
});

describe('UrlPolicy.allowlisted: the allowlist naming a host itself', () => {
  const policy = new UrlPolicy({
    allowlist: parseAllowlist(['127.0.0.2', 'intranet.example', '*.corp.example']),
  });

  it('covers an allowlisted address in every spelling, and names, but not what a name resolves to', () => {
    expect(policy.allowlisted('127.0.0.2')).toBe(true);
    expect(policy.allowlisted('0x7f000002')).toBe(true);
    expect(policy.allowlisted('[::ffff:127.0.0.2]')).toBe(true);
    expect(policy.allowlisted('INTRANET.example.')).toBe(true);
    expect(policy.allowlisted('a.corp.example')).toBe(true);
    expect(policy.allowlisted('127.0.0.1')).toBe(false);
    expect(policy.allowlisted('localhost')).toBe(false);
    expect(policy.allowlisted('[::1]')).toBe(false);
    expect(policy.allowlisted('not a host')).toBe(false);
  });
});
