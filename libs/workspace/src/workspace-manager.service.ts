import { constants as C } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, stat } from 'node:fs/promises';
import * as path from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { InvalidInputError, SESSION_HOME_NAME } from '@switchyard/common';
import type { WorkspaceSnapshot } from './file-op.types';
import { errno } from './fs-errors';
import { realRootOf } from './path-guard';
import { changedPaths } from './snapshot-diff';
import { diskUsage, removeEntry, walk, type WalkState } from './workspace-fs';
import { NoWorkspaceQuota, WorkspaceQuota } from './workspace-quota';
import { WorkspaceUsage } from './workspace-usage';
import { WORKSPACE_OPTIONS, type WorkspaceOptions } from './workspace.options';

const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;
/** Top-level names a snapshot leaves out: the session's home. */
const SNAPSHOT_SKIPS: ReadonlySet<string> = new Set([SESSION_HOME_NAME]);

/**
 * Owns the per-session workspace directories under `root`.
 *
 * Permissions: sandboxed code runs as an unprivileged uid (65534 by default) and must write its
 * workspace. When the engine runs as root, each session directory is chowned to `sandboxUid:sandboxGid`
 * with `dirMode` (default 0o700), so only that uid (and root) can enter it. Otherwise the directory keeps
 * the engine's uid and gets `dirMode`; an operator whose sandboxes run as another uid sets 0o777, which
 * is tolerable only because `root` itself is held at 0o711 (others may traverse it, never list it).
 * Files the file API creates inherit owner and bits from the session directory (see `FileOperations`).
 *
 * Usage: the file API checks its workspace cap against a running count of each workspace's bytes, which
 * only its own writes keep current. Whatever else changes a workspace must say so with `markUsageStale`;
 * `snapshot`, which the engine takes before and after every code action, does so itself.
 */
@Injectable()
export class WorkspaceManager implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(WorkspaceManager.name);
  private readonly usage: WorkspaceUsage;

  constructor(
    @Inject(WORKSPACE_OPTIONS) private readonly options: WorkspaceOptions,
    // Shared with `FileOperations` in `WorkspaceModule`; a standalone instance keeps its own.
    @Optional() usage?: WorkspaceUsage,
    @Optional() quota?: WorkspaceQuota,
  ) {
    this.usage = usage ?? new WorkspaceUsage();
    this.quota = quota ?? new NoWorkspaceQuota();
  }

  private readonly quota: WorkspaceQuota;

  /**
   * Finishes what a previous engine left under the data dir (mounts, half-done deletions, loop devices) before any
   * workspace is created; `create` and `remove` wait for it too, whichever module starts first.
   */
  async onModuleInit(): Promise<void> {
    await this.ensureRoot();
    await this.quota.recover();
  }

  /** Unmounts capped workspaces (their data stays in the images; `create` mounts them again). */
  async onApplicationShutdown(): Promise<void> {
    await this.quota.close();
  }

  /** How workspaces are capped for code (not only the file API): `loop` images or `off`. */
  get quotaMode(): 'loop' | 'off' {
    return this.quota.mode;
  }

  /**
   * The session's workspace may have changed behind the file API's back (code ran in it, something
   * outside the engine wrote to it): its usage is re-measured before the next file API write is checked
   * against the workspace cap. Cheap; call it after anything but the file API touched the workspace.
   */
  markUsageStale(sessionId: string): void {
    this.usage.markStale(this.dirOf(sessionId));
  }

  /** Creates (idempotently) and returns the session's workspace directory. */
  async create(sessionId: string): Promise<string> {
    const dir = this.dirOf(sessionId);
    // Before the directory is made: start-up recovery removes directories of removals a crash interrupted.
    await this.quota.recover();
    await this.ensureRoot();
    try {
      await mkdir(dir, this.options.dirMode);
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
      if (!(await lstat(dir)).isDirectory())
        throw new Error(`workspace path ${dir} exists and is not a directory`);
    }
    // Before the chown below: once provisioned, the directory is the root of the workspace's own filesystem.
    await this.quota.provision(sessionId, dir, this.options.limits.maxWorkspaceBytes);
    // Through an fd opened without following links, in case the name was swapped after mkdir.
    const h = await open(dir, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
    try {
      await h.chmod(this.options.dirMode); // mkdir's mode went through the umask
      const { sandboxUid, sandboxGid } = this.options;
      if (process.getuid?.() === 0 && sandboxUid !== null)
        await h.chown(sandboxUid, sandboxGid ?? sandboxUid);
    } finally {
      await h.close();
    }
    await this.ensureHome(dir);
    this.usage.markStale(dir); // a re-created workspace is not the one counted before
    this.logger.debug(`workspace created for session ${sessionId}`);
    return dir;
  }

  /**
   * The session's home inside its workspace (`SESSION_HOME`), owned like the workspace. A workspace that already has
   * one keeps it as it is; a name that is not a plain directory there (a link the session's code made) is left alone:
   * the session's own business, never followed.
   */
  private async ensureHome(dir: string): Promise<void> {
    const home = path.join(dir, SESSION_HOME_NAME);
    try {
      await mkdir(home, this.options.dirMode);
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
      return;
    }
    const h = await open(home, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
    try {
      await h.chmod(this.options.dirMode);
      const { sandboxUid, sandboxGid } = this.options;
      if (process.getuid?.() === 0 && sandboxUid !== null)
        await h.chown(sandboxUid, sandboxGid ?? sandboxUid);
    } finally {
      await h.close();
    }
  }

  /** Absolute workspace path of a session; refuses ids that are not `[A-Za-z0-9_-]+`. */
  dirOf(sessionId: string): string {
    if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) {
      throw new InvalidInputError(
        'sessionId',
        'sessionId must be 1-128 characters of A-Z, a-z, 0-9, _ and -',
      );
    }
    return path.join(this.options.root, sessionId);
  }

  /**
   * rm -rf of the session's workspace; a missing workspace is fine. Never follows links inside it. A capped
   * workspace is unmounted and its directory gone when this resolves; its storage is freed in the background.
   */
  async remove(sessionId: string): Promise<void> {
    const dir = this.dirOf(sessionId);
    this.usage.markStale(dir);
    if (!(await this.quota.release(sessionId, dir))) await this.removeDir(sessionId, dir);
    this.logger.debug(`workspace removed for session ${sessionId}`);
  }

  /**
   * Removes the workspaces of sessions not in `known`: what a crash between making a workspace and recording its
   * session leaves (a create, a fork). Answers the ids removed.
   */
  async removeOrphans(known: ReadonlySet<string>): Promise<string[]> {
    await this.quota.recover();
    const dirs = (await readdir(this.options.root).catch(() => [] as string[])).filter((n) =>
      SESSION_ID.test(n),
    );
    const ids = new Set([...dirs, ...(await this.quota.sessionIds())]);
    const orphans = [...ids].filter((id) => !known.has(id) && SESSION_ID.test(id)).sort();
    for (const id of orphans) await this.remove(id);
    return orphans;
  }

  /** Bytes held by the session's regular files (a lower bound past `maxScanEntries`). */
  async usageBytes(sessionId: string): Promise<number> {
    return (await diskUsage(await realRootOf(this.dirOf(sessionId)), this.options.maxScanEntries)).bytes;
  }

  /**
   * A picture of every file and link (not directories) to diff later with `changedPaths`. Snapshots are
   * taken around code actions, which change the workspace behind the file API's back, so taking one also
   * marks the usage stale (`markUsageStale`).
   */
  async snapshot(sessionId: string): Promise<WorkspaceSnapshot> {
    this.markUsageStale(sessionId);
    const entries = new Map<string, string>();
    const state: WalkState = { scanned: 0, partial: false };
    // Walks verify each directory against its real path, so they must start from one.
    const start = await realRootOf(this.dirOf(sessionId));
    // The cap counts the entries recorded; walk's own bound (larger) only keeps directories-only trees finite. The
    // session's home (installed packages, caches) is left out: what an action changed there is not a file of its work,
    // and thousands of package files would crowd the cap.
    const opts = { recursive: true, maxEntries: this.options.maxScanEntries, skipTop: SNAPSHOT_SKIPS };
    for await (const e of walk(start, opts, state)) {
      if (e.type === 'dir') continue;
      if (entries.size === this.options.snapshotMaxEntries) {
        state.partial = true;
        break;
      }
      entries.set(e.rel, `${e.stat.size}:${e.stat.mtimeMs}:${e.stat.ino}`);
    }
    return { entries, partial: state.partial };
  }

  /** Paths added, modified or deleted between two snapshots, in walk order (snapshot-diff.ts). */
  changedPaths(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
    return changedPaths(before, after);
  }

  /** An uncapped workspace, file by file. */
  private async removeDir(sessionId: string, dir: string): Promise<void> {
    let root;
    try {
      root = await open(this.options.root, C.O_RDONLY | C.O_DIRECTORY);
    } catch (err) {
      if (errno(err) === 'ENOENT') return;
      throw err;
    }
    try {
      await removeEntry(root, sessionId, dir);
    } finally {
      await root.close();
    }
  }

  /** `root` exists and is 0o711/0o700 at most: other host users may traverse, never list or write. */
  private async ensureRoot(): Promise<void> {
    const root = this.options.root;
    await mkdir(root, { recursive: true, mode: 0o711 });
    const st = await stat(root); // operator's setting: a link here is the operator's choice, so followed
    if (!st.isDirectory()) throw new Error(`workspace root ${root} is not a directory`);
    if ((st.mode & 0o066) !== 0) await chmod(root, st.mode & 0o711);
  }
}
