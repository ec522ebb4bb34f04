import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { WalSync } from './wal-sync';

describe('WalSync', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'walsync-'));
    writeFileSync(path.join(dir, 'db-wal'), 'x');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('syncs, and callers arriving during a sync share the next one', async () => {
    const wal = new WalSync(path.join(dir, 'db-wal'));
    await wal.open();
    const first = wal.sync();
    const second = wal.sync();
    const third = wal.sync();
    expect(second).toBe(third);
    expect(second).not.toBe(first);
    await Promise.all([first, second, third]);
    await wal.close();
  });

  it('refuses to sync before open or after close', async () => {
    const wal = new WalSync(path.join(dir, 'db-wal'));
    await expect(wal.sync()).rejects.toThrow('open');
    await wal.open();
    await wal.close();
    await expect(wal.sync()).rejects.toThrow('open');
  });
});
