import { randomBytes } from 'node:crypto';
import { constants as C } from 'node:fs';
import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import type { Checkpoint } from './checkpoint.types';

/** Checkpoint ids: what the engine makes, and the only names a store ever builds a path from. */
const CHECKPOINT_ID = /^chk_[0-9a-f]{24}$/;

export const newCheckpointId = (): string => `chk_${randomBytes(12).toString('hex')}`;

export const isCheckpointId = (id: unknown): id is string => typeof id === 'string' && CHECKPOINT_ID.test(id);

/**
 * A checkpoint's record (`<id>.json` beside its tree), written last: a checkpoint without one is half made. Written
 * to a temporary name, synced, renamed into place and the directory synced, so that after a crash it is whole or
 * absent.
 */
export async function writeRecord(dir: string, checkpoint: Checkpoint): Promise<void> {
  const tmp = path.join(dir, `.${checkpoint.id}.json~${randomBytes(4).toString('hex')}`);
  const h = await open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
  try {
    await h.writeFile(`${JSON.stringify(checkpoint)}\n`);
    await h.sync();
  } finally {
    await h.close();
  }
  await rename(tmp, path.join(dir, `${checkpoint.id}.json`));
  const d = await open(dir, C.O_RDONLY | C.O_DIRECTORY);
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

/** Deletes the record first: from then on the checkpoint is not listed, whatever happens to its tree. */
export async function removeRecord(dir: string, id: string): Promise<void> {
  await rm(path.join(dir, `${id}.json`), { force: true });
}

/**
 * What `dir` holds: the records of whole checkpoints (with a tree named by their id), and the names that belong to
 * none (trees without a record, records without a tree, temporary files): leftovers of an interrupted create or
 * delete, for the caller to remove.
 */
export async function scanRecords(
  dir: string,
  sessionId: string,
): Promise<{ checkpoints: Checkpoint[]; strays: string[] }> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const present = new Set(names);
  const checkpoints: Checkpoint[] = [];
  for (const name of names) {
    const id = name.slice(0, -'.json'.length);
    if (!name.endsWith('.json') || !isCheckpointId(id) || !present.has(id)) continue;
    const record = await readRecord(path.join(dir, name), id, sessionId);
    if (record) checkpoints.push(record);
  }
  const whole = new Set(checkpoints.flatMap((c) => [c.id, `${c.id}.json`]));
  const strays = names.filter((name) => !whole.has(name));
  checkpoints.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  return { checkpoints, strays };
}

async function readRecord(file: string, id: string, sessionId: string): Promise<Checkpoint | undefined> {
  try {
    const c = JSON.parse(await readFile(file, 'utf8')) as Checkpoint;
    // A fork's image carries its source's records until they are dropped: only the session's own count.
    return c.id === id && c.sessionId === sessionId ? c : undefined;
  } catch {
    return undefined; // torn or foreign: a stray
  }
}
