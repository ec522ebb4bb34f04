import { parseMountInfo } from './host-mounts';

describe('parseMountInfo', () => {
  it('reads mount points, decodes octal escapes and sees the shared flag', () => {
    const text = [
      '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
      '42 27 254:0 /var/lib/docker /var/lib/docker rw,relatime shared:1 - ext4 /dev/vda rw',
      '50 27 254:0 /tmp/pool /tmp/pool rw,relatime shared:7 master:3 - ext4 /dev/vda rw',
      '51 50 254:0 /tmp/ws /tmp/pool/with\\040space rw,relatime shared:9 - ext4 /dev/vda rw',
      'garbage',
      '',
    ].join('\n');
    expect(parseMountInfo(text)).toEqual([
      { target: '/', shared: false },
      { target: '/var/lib/docker', shared: true },
      { target: '/tmp/pool', shared: true },
      { target: '/tmp/pool/with space', shared: true },
    ]);
  });
});
