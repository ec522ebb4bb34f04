import { randomBytes } from 'node:crypto';
import { constants as C } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { CheckpointError } from '../workspace.errors';
import type { Checkpoint } from './checkpoint.types';
import { isCheckpointId, removeRecord, scanRecords, writeRecord } from './checkpoint-records';
import { CheckpointVault } from './checkpoint-vault';

/**
 * Checkpoints on the engine's own disk: `<dir>/<sessionId>/<checkpointId>` (the tar) beside its record
 * `<checkpointId>.json`, written last (the tar is synced and renamed into place first): whole or absent, and what a
 * crash left half made goes at the next `list`. Engine-private: files 0600, directories 0700, never a link followed.
 */
export class DiskCheckpointVault extends CheckpointVault {
  constructor(private readonly dir: string) {
    super();
  }

  async put(checkpoint: Checkpoint, tar: Buffer): Promise<void> {
    const file = this.tarOf(checkpoint.sessionId, checkpoint.id);
    const dir = path.dirname(file);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const partial = `${file}~partial~${randomBytes(4).toString('hex')}`;
    try {
      const h = await open(partial, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
      try {
        await h.writeFile(tar);
        await h.sync(); // before its record names it
      } finally {
        await h.close();
      }
      await rename(partial, file);
      await writeRecord(dir, checkpoint);
    } catch (err) {
      await rm(partial, { force: true });
      await rm(file, { force: true });
      throw err;
    }
  }

  async get(sessionId: string, id: string): Promise<Buffer> {
    const file = this.tarOf(sessionId, id);
    // A tar without its record is half made (or half deleted): not there.
    const recorded = await lstat(`${file}.json`).then(
      (s) => s.isFile(),
      () => false,
    );
    const h = recorded ? await open(file, C.O_RDONLY | C.O_NOFOLLOW).catch(absent) : undefined;
    if (!h) throw notFound(sessionId, id);
    try {
      return await h.readFile();
    } finally {
      await h.close();
    }
  }

  async list(sessionId: string): Promise<Checkpoint[]> {
    const dir = this.sessionDir(sessionId);
    const { checkpoints, strays } = await scanRecords(dir, sessionId);
    for (const name of strays) await rm(path.join(dir, name), { recursive: true, force: true });
    return checkpoints;
  }

  async remove(sessionId: string, id: string): Promise<void> {
    const file = this.tarOf(sessionId, id);
    await removeRecord(path.dirname(file), id);
    await rm(file, { force: true });
  }

  async forget(sessionId: string): Promise<void> {
    await rm(this.sessionDir(sessionId), { recursive: true, force: true });
  }

  async sweep(known: ReadonlySet<string>): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const gone = names.filter((name) => !known.has(name));
    for (const name of gone) await this.forget(name);
    return gone;
  }

  private tarOf(sessionId: string, id: string): string {
    if (!isCheckpointId(id)) throw new Error(`not a checkpoint id: ${JSON.stringify(id)}`);
    return path.join(this.sessionDir(sessionId), id);
  }

  /** A session id as one path component (the service has validated it; no path is built otherwise). */
  private sessionDir(sessionId: string): string {
    if (!sessionId || sessionId === '.' || sessionId === '..' || /[/\0]/.test(sessionId)) {
      throw new Error(`not a session id: ${JSON.stringify(sessionId)}`);
    }
    return path.join(this.dir, sessionId);
  }
}

/** ENOENT as `undefined`; any other failure stands. */
function absent(err: NodeJS.ErrnoException): undefined {
  if (err.code === 'ENOENT') return undefined;
  throw err;
}

function notFound(sessionId: string, id: string): CheckpointError {
  return new CheckpointError('CHECKPOINT_NOT_FOUND', `checkpoint ${id} not found in session ${sessionId}`, {
    sessionId,
    checkpointId: id,
  });
}
