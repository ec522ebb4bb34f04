import { SESSION_HOME_NAME } from '@switchyard/common';
import * as path from 'node:path';
import { type RealPath, realPathInside } from '../path-guard';
import { FileOpError } from '../workspace.errors';
import type { WorkspaceOptions } from '../workspace.options';

/** How a file op may name its path: the workspace root itself, an empty path, a final link followed. */
export interface PathRules {
  allowEmpty?: boolean;
  rejectRoot?: boolean;
  followFinal?: boolean;
}

/** Turns the paths a file op names into vetted real paths inside its workspace, under the configured length. */
export class OpPaths {
  constructor(private readonly options: WorkspaceOptions) {}

  resolve(ws: string, p: unknown, field: string, rules: PathRules = {}): Promise<RealPath> {
    return realPathInside(ws, p, field, { maxPathLength: this.options.limits.maxPathLength, ...rules });
  }

  /** An existing directory to walk (the workspace root when `p` is left out). */
  async directory(ws: string, p: unknown): Promise<RealPath> {
    const rp = await this.resolve(ws, p ?? '', 'path', { allowEmpty: true });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel || '.'} does not exist`, { path: rp.rel });
    if (!rp.stat.isDirectory()) {
      throw new FileOpError('ENOTDIR', `${rp.rel} is not a directory; use stat or read`, { path: rp.rel });
    }
    return rp;
  }
}

/** Parent of a root-relative path, `''` for the root itself. */
export function parentOf(rel: string): string {
  const dir = path.posix.dirname(rel);
  return dir === '.' ? '' : dir;
}

/**
 * Names a walk from the workspace root leaves out: the session's home (its installed packages and caches, not files
 * of the session's work). Named directly (`list` of `.home`, a `read` in it), it is there like any directory.
 */
export function rootSkips(rel: string): ReadonlySet<string> | undefined {
  return rel === '' ? ROOT_SKIPS : undefined;
}
const ROOT_SKIPS: ReadonlySet<string> = new Set([SESSION_HOME_NAME]);

/** `rel` (found by a walk from `base`) relative to the workspace root. */
export function joinRel(base: string, rel: string): string {
  return base ? `${base}/${rel}` : rel;
}
