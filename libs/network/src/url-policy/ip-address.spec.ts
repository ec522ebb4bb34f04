import {
  cidrContains,
  classifyIp,
  embeddedIpv4,
  formatIp,
  parseCidr,
  parseIp,
  parseIpv4,
  parseIpv6,
} from './ip-address';

const fmt = (text: string): string | undefined => {
  const ip = parseIp(text);
  return ip && formatIp(ip);
};

describe('parseIpv4', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['127.0.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['0X7F000001', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['017700000001', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['0x7f.0.0.0x1', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['169.254.169.254', '169.254.169.254'],
    ['2852039166', '169.254.169.254'],
    ['0xa9fea9fe', '169.254.169.254'],
    ['0251.0376.0251.0376', '169.254.169.254'],
    ['169.254.43518', '169.254.169.254'],
    ['0', '0.0.0.0'],
    ['0x', '0.0.0.0'],
    ['4294967295', '255.255.255.255'],
  ])('%s is %s', (text, expected) => {
    expect(formatIp(parseIpv4(text)!)).toBe(expected);
  });

  it.each([
    '256.0.0.1',
    '1.2.3.4.5',
    '4294967296',
    '1.2.3.256',
    '08',
    '0x1g',
    '1..2',
    '',
    'a.b.c.d',
    '1.2.3.-1',
  ])('rejects %j', (text) => {
    expect(parseIpv4(text)).toBeUndefined();
  });
});

describe('parseIpv6', () => {
  it.each([
    ['::1', '::1'],
    ['[::1]', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['::', '::'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['::ffff:7f00:1', '::ffff:7f00:1'],
    ['FE80::1', 'fe80::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['64:ff9b::169.254.169.254', '64:ff9b::a9fe:a9fe'],
  ])('%s is %s', (text, expected) => {
    expect(formatIp(parseIpv6(text)!)).toBe(expected);
  });

  it.each([
    'fe80::1%eth0',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    ':::1',
    '::ffff:1.2.3.256',
    '12345::',
    'g::1',
    '1.2.3.4',
  ])('rejects %j', (text) => {
    expect(parseIpv6(text)).toBeUndefined();
  });
});

describe('classifyIp', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.192', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['2001:db8::1', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fec0::1', 'site-local'],
    ['2001::1', 'reserved'],
    ['::2', 'reserved'],
    ['100::1', 'discard'],
    ['64:ff9b:1::1', 'translation'],
    ['8.8.8.8', 'public'],
    ['172.32.0.1', 'public'],
    ['100.128.0.1', 'public'],
    ['2606:4700::1111', 'public'],
  ])('%s is %s', (text, category) => {
    expect(classifyIp(parseIp(text)!).category).toBe(category);
  });

  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', '127.0.0.1', 'loopback'],
    ['::ffff:a9fe:a9fe', '169.254.169.254', 'link-local'],
    ['::ffff:0:a9fe:a9fe', '169.254.169.254', 'link-local'],
    ['::7f00:1', '127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', '169.254.169.254', 'link-local'],
    ['64:ff9b::10.0.0.1', '10.0.0.1', 'private'],
    ['2002:a9fe:a9fe::1', '169.254.169.254', 'link-local'],
    ['2002:7f00:1::', '127.0.0.1', 'loopback'],
    ['::ffff:8.8.8.8', '8.8.8.8', 'public'],
    ['64:ff9b::8.8.8.8', '8.8.8.8', 'public'],
  ])('judges %s by the IPv4 it carries (%s, %s)', (text, inner, category) => {
    const c = classifyIp(parseIp(text)!);
    expect(c).toMatchObject({ category, embedded: inner });
  });

  it('names the deciding range', () => {
    expect(classifyIp(parseIp('169.254.169.254')!)).toEqual({
      category: 'link-local',
      range: '169.254.0.0/16',
    });
    expect(classifyIp(parseIp('8.8.8.8')!)).toEqual({ category: 'public' });
  });
});

describe('CIDRs', () => {
  it('parses ranges and bare addresses', () => {
    expect(parseCidr('10.0.0.0/8')).toMatchObject({ prefix: 8 });
    expect(parseCidr('127.0.0.2')).toMatchObject({ prefix: 32 });
    expect(parseCidr('fd00::/8')).toMatchObject({ prefix: 8 });
    expect(parseCidr('::1')).toMatchObject({ prefix: 128 });
    for (const bad of ['10.0.0.0/33', '::/129', '10.0.0.0/x', 'host/8', '10.0.0.0/']) {
      expect(parseCidr(bad)).toBeUndefined();
    }
  });

  it('contains what it should, at odd prefix lengths and across families', () => {
    const c = parseCidr('100.64.0.0/10')!;
    expect(cidrContains(c, parseIp('100.64.0.0')!)).toBe(true);
    expect(cidrContains(c, parseIp('100.127.255.255')!)).toBe(true);
    expect(cidrContains(c, parseIp('100.128.0.0')!)).toBe(false);
    expect(cidrContains(c, parseIp('::ffff:100.64.0.1')!)).toBe(false);
    expect(cidrContains(parseCidr('fc00::/7')!, parseIp('fdff::1')!)).toBe(true);
    expect(cidrContains(parseCidr('fc00::/7')!, parseIp('fe00::1')!)).toBe(false);
    expect(cidrContains(parseCidr('0.0.0.0/0')!, parseIp('8.8.8.8')!)).toBe(true);
  });

  it('unwraps only wrapper forms', () => {
    expect(embeddedIpv4(parseIp('::1')!)).toBeUndefined();
    expect(embeddedIpv4(parseIp('::')!)).toBeUndefined();
    expect(embeddedIpv4(parseIp('2001:db8::1')!)).toBeUndefined();
    expect(embeddedIpv4(parseIp('127.0.0.1')!)).toBeUndefined();
    expect(fmt('::ffff:1.2.3.4')).toBe('::ffff:102:304');
  });
});
