import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { MountHelper } from './mount-helper';

// Only requests that change nothing (they fail in the kernel): real mounts are in pooled-tier.integration.spec.ts.
describe('MountHelper', () => {
  let dir: string;
  beforeAll(() => Logger.overrideLogger(false));
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-mount-helper-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('makes the syscalls and answers each request with its errno, in order', async () => {
    const helper = new MountHelper();
    try {
      expect(await helper.start()).toBe(true);
      const [notMounted, missing] = await Promise.all([
        helper.call({ op: 'umount', target: dir }),
        helper.call({ op: 'bind', source: dir, target: path.join(dir, 'missing') }),
      ]);
      expect(notMounted).toMatchObject({ ok: false, errno: 'EINVAL' });
      expect(missing).toMatchObject({ ok: false, errno: 'ENOENT', message: expect.any(String) });
    } finally {
      helper.close();
    }
  });

  it('reports that it cannot start without its interpreter, and refuses calls after close', async () => {
    const absent = new MountHelper(path.join(dir, 'no-python3'));
    expect(await absent.start()).toBe(false);
    await expect(absent.call({ op: 'umount', target: dir })).rejects.toThrow('not running');

    const closed = new MountHelper();
    expect(await closed.start()).toBe(true);
    closed.close();
    expect(await closed.start()).toBe(false);
    await expect(closed.call({ op: 'umount', target: dir })).rejects.toThrow('not running');
  });
});
