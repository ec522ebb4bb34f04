import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  loopsBackedBy,
  mountsBelow,
  onOwnFilesystem,
  ownMounts,
  parseMountInfo,
  topMountAt,
} from './mount-table';

describe('mount table', () => {
  it('parses mountinfo lines: device, decoded mount point, shared flag', () => {
    const text = [
      '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
      '44 27 254:0 /tmp/ws /tmp/ws rw,relatime shared:2 - ext4 /dev/vda rw',
      '51 44 7:3 / /tmp/ws/with\\040space rw,nosuid master:2 shared:9 - ext4 /dev/loop3 rw,discard',
      'garbage',
      '',
    ].join('\n');
    expect(parseMountInfo(text)).toEqual([
      { id: 27, device: '254:0', fsType: 'ext4', target: '/', shared: false },
      { id: 44, device: '254:0', fsType: 'ext4', target: '/tmp/ws', shared: true },
      { id: 51, device: '7:3', fsType: 'ext4', target: '/tmp/ws/with space', shared: true },
    ]);
  });

  it("gives btrfs mounts of a loop device the loop device's number, not btrfs's anonymous one", () => {
    const sys = mkdtempSync(path.join(tmpdir(), 'sys-block-'));
    try {
      mkdirSync(path.join(sys, 'loop12'));
      writeFileSync(path.join(sys, 'loop12', 'dev'), '7:12\n');
      const text = [
        '45 27 0:39 /ws /w rw,relatime - btrfs /dev/loop12 rw,subvol=/ws',
        '46 27 0:39 / /r rw,relatime - btrfs /dev/loop12 rw,subvolid=5',
        '47 27 0:40 / /v rw - btrfs /dev/vdb rw',
      ].join('\n');
      expect(parseMountInfo(text, sys).map((m) => [m.device, m.fsType])).toEqual([
        ['7:12', 'btrfs'],
        ['7:12', 'btrfs'],
        ['0:40', 'btrfs'],
      ]);
    } finally {
      rmSync(sys, { recursive: true, force: true });
    }
  });

  it('lists mounts strictly below a directory, deepest first', () => {
    const mounts = parseMountInfo(
      [
        '1 0 8:1 / /data rw - ext4 /dev/sda1 rw',
        '2 1 7:1 / /data/ws/a rw - ext4 /dev/loop1 rw',
        '3 1 8:1 /data/ws /data/ws rw shared:4 - ext4 /dev/sda1 rw',
        '4 3 7:2 / /data/ws/b rw - ext4 /dev/loop2 rw',
        '5 4 0:40 / /data/ws/b/deep rw - tmpfs t rw',
        '6 1 7:3 / /data/wsx rw - ext4 /dev/loop3 rw',
      ].join('\n'),
    );
    expect(mountsBelow('/data/ws', mounts)).toEqual(['/data/ws/b/deep', '/data/ws/a', '/data/ws/b']);
    expect(topMountAt('/data/ws/', mounts)?.id).toBe(3);
    expect(topMountAt('/data/none', mounts)).toBeUndefined();
    expect(ownMounts().some((m) => m.target === '/')).toBe(true);
  });

  it('finds loop devices backed by files under a directory, deleted ones included', () => {
    const sys = mkdtempSync(path.join(tmpdir(), 'ws-sysblock-'));
    try {
      const loop = (name: string, dev: string, backing?: string) => {
        mkdirSync(path.join(sys, name, 'loop'), { recursive: true });
        writeFileSync(path.join(sys, name, 'dev'), `${dev}\n`);
        if (backing !== undefined)
          writeFileSync(path.join(sys, name, 'loop', 'backing_file'), `${backing}\n`);
      };
      loop('loop0', '7:0', '/data/ws.images/a.img');
      loop('loop1', '7:1', '/data/ws.images/.trash/b~1.img (deleted)');
      loop('loop2', '7:2', '/elsewhere/c.img');
      loop('loop3', '7:3'); // not attached
      loop('sda', '8:0', '/data/ws.images/not-a-loop');
      expect(loopsBackedBy('/data/ws.images', sys)).toEqual([
        { path: '/dev/loop0', device: '7:0', backingFile: '/data/ws.images/a.img', deleted: false },
        { path: '/dev/loop1', device: '7:1', backingFile: '/data/ws.images/.trash/b~1.img', deleted: true },
      ]);
      expect(loopsBackedBy('/data/ws', sys)).toEqual([]); // a sibling with a longer name is not below
    } finally {
      rmSync(sys, { recursive: true, force: true });
    }
  });

  it('tells a directory on its own filesystem from one on its parent', () => {
    expect(onOwnFilesystem('/proc')).toBe(true);
    const dir = mkdtempSync(path.join(tmpdir(), 'ws-ownfs-'));
    try {
      expect(onOwnFilesystem(dir)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
