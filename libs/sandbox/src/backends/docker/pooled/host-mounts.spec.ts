import { isSelfBind, parseMountInfo } from './host-mounts';

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
      { id: '27', parent: '1', device: '254:0', root: '/', target: '/', shared: false },
      {
        id: '42',
        parent: '27',
        device: '254:0',
        root: '/var/lib/docker',
        target: '/var/lib/docker',
        shared: true,
      },
      { id: '50', parent: '27', device: '254:0', root: '/tmp/pool', target: '/tmp/pool', shared: true },
      {
        id: '51',
        parent: '50',
        device: '254:0',
        root: '/tmp/ws',
        target: '/tmp/pool/with space',
        shared: true,
      },
    ]);
  });
});

describe('isSelfBind', () => {
  const entries = parseMountInfo(
    [
      '27 1 254:0 / / rw - ext4 /dev/vda rw',
      '30 27 0:40 / /tmp rw - tmpfs tmpfs rw',
      // A bind of /srv/pool onto itself (what ensureSharedRoot makes), and a second one stacked on it.
      '50 27 254:0 /srv/pool /srv/pool rw shared:7 - ext4 /dev/vda rw',
      '51 50 254:0 /srv/pool /srv/pool rw shared:7 - ext4 /dev/vda rw',
      // The same on a tmpfs mounted at /tmp: its root is the path inside that filesystem.
      '60 30 0:40 /pool /tmp/pool rw shared:8 - tmpfs tmpfs rw',
      // A filesystem an operator mounted there, and a bind of another directory.
      '70 27 8:16 / /data/pool rw - xfs /dev/sdb rw',
      '80 27 254:0 /elsewhere /mnt/pool rw - ext4 /dev/vda rw',
    ].join('\n'),
  );
  const at = (id: string) => entries.find((e) => e.id === id)!;

  it('recognises a directory bound onto itself, on any filesystem and stacked', () => {
    for (const id of ['50', '51', '60'])
      expect({ id, self: isSelfBind(at(id), entries) }).toEqual({ id, self: true });
  });

  it('never takes another filesystem or another directory for one', () => {
    for (const id of ['27', '30', '70', '80'])
      expect({ id, self: isSelfBind(at(id), entries) }).toEqual({ id, self: false });
  });
});
