import type { Stats } from 'node:fs';
import type { CreateAs } from './fd-opens';

/** What a new file and a new directory are created as. */
export interface EntryPolicy {
  file: CreateAs;
  dir: CreateAs;
}

/**
 * New entries take their permission bits and (when the engine is root) their owner from the workspace
 * root (`st`, its lstat), so whatever `WorkspaceManager.create` arranged for the sandbox uid holds for
 * files the engine makes too.
 */
export function newEntryPolicy(st: Stats): EntryPolicy {
  const owner = ownerAsRoot(st);
  return { dir: { mode: st.mode & 0o777, owner }, file: { mode: st.mode & 0o666, owner } };
}

/** An overwritten file keeps its mode (minus setuid/setgid) and, as root, its owner. */
export function keepAs(st: Stats): CreateAs {
  return { mode: st.mode & 0o777, owner: ownerAsRoot(st) };
}

// Only root can give a file away; anyone else creates files as themselves.
function ownerAsRoot(st: Stats): CreateAs['owner'] {
  return process.getuid?.() === 0 ? { uid: st.uid, gid: st.gid } : undefined;
}
