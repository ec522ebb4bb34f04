import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Language } from '@switchyard/common';
import { SANDBOX_BIN } from '../../core/env-policy';
import { SandboxInternalError } from '../../core/sandbox.errors';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import type { TierJob } from '../../core/sandbox.types';
import type { SystemRootAnswer } from '../../core/system-root.port';
import {
  detectSystemLayout,
  interpreterBind,
  type ReadOnlyBind,
  SANDBOX_UID,
  type SystemLayout,
} from './bwrap-command';
import { imageSystemLayout, resolveInRoot } from './image-layout';

const EXTENSION: Record<Language, string> = { python: 'py', node: 'js', bash: 'sh' };

export interface Executable {
  /** Resolved path as the sandbox sees it (for the host's system, the host path itself). */
  path?: string;
  /** Why it cannot be used. */
  problem?: string;
}

/** Interpreters of an image root: where the container tiers find them (the image's, never the host's). */
export const IMAGE_INTERPRETERS: Readonly<Record<Language, string>> = {
  python: '/usr/bin/python3',
  node: '/usr/bin/node',
  bash: '/bin/bash',
};

/** The system a scaffold's sandboxes run: an image's root, or the engine host's own directories. */
export type ScaffoldSystem =
  { kind: 'image'; image: string; imageId: string; dir: string } | { kind: 'host' };

/**
 * What every sandbox of the subprocess tier is built from: made once per system (the host's, or an image's root),
 * under an engine-owned temp dir.
 */
export interface Scaffold {
  system: ScaffoldSystem;
  tempDir: string;
  codeDir: string;
  etc: { passwd: string; group: string; hosts: string };
  layout: SystemLayout;
  interpreters: Record<Language, Executable>;
  /** Per language: extra binds plus the interpreter's own directory when it lives outside the system dirs. */
  readOnlyBinds: Record<Language, ReadOnlyBind[]>;
  /** Interpreter paths as seen inside the sandbox. */
  sandboxInterpreters: Record<Language, string | undefined>;
  shell?: string;
}

type ScaffoldOptions = Pick<
  ResolvedSandboxOptions,
  'tempDir' | 'interpreters' | 'extraReadOnlyBinds' | 'shellPath' | 'runAs'
>;

export function resolveExecutable(p: string): Executable {
  try {
    const real = fs.realpathSync(p);
    fs.accessSync(real, fs.constants.X_OK);
    return { path: real };
  } catch (err) {
    return { problem: `${p}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
}

/**
 * Engine-owned temp dir, synthetic /etc files and the system layout: the image root's when `root` has one (its own
 * interpreters and shell, resolved inside it), else the host's (the configured interpreters).
 */
export function buildScaffold(options: ScaffoldOptions, root?: SystemRootAnswer): Scaffold {
  const base = options.tempDir ?? os.tmpdir();
  fs.mkdirSync(base, { recursive: true });
  const tempDir = fs.mkdtempSync(path.join(base, 'switchyard-sandbox-'));
  const dir = root?.dir;
  const system: ScaffoldSystem =
    dir === undefined
      ? { kind: 'host' }
      : { kind: 'image', image: root!.image ?? '', imageId: root!.imageId ?? '', dir };
  const layout = dir === undefined ? detectSystemLayout() : imageSystemLayout(dir);
  const i = dir === undefined ? options.interpreters : IMAGE_INTERPRETERS;
  const find = (p: string): Executable => (dir === undefined ? resolveExecutable(p) : resolveInRoot(dir, p));
  const interpreters = {
    python: find(i.python),
    node: find(i.node),
    bash: find(i.bash),
  };
  const binDir = path.join(tempDir, 'bin');
  const extra = [
    ...[...new Set(options.extraReadOnlyBinds)].map((d) => ({ source: d, target: d })),
    // Models type `python`: every sandbox finds it, as a link to the python3 it has.
    { source: binDir, target: SANDBOX_BIN },
  ];
  const placed = (language: Language, interp: Executable) =>
    interp.path ? interpreterBind(interp.path, layout.boundDirs, language) : undefined;
  const inSandbox = {
    python: placed('python', interpreters.python),
    node: placed('node', interpreters.node),
    bash: placed('bash', interpreters.bash),
  };
  const binds = (language: Language) => {
    const own = inSandbox[language]?.bind;
    return own ? [...extra, own] : extra;
  };
  const scaffold: Scaffold = {
    system,
    tempDir,
    codeDir: path.join(tempDir, 'code'),
    etc: {
      passwd: path.join(tempDir, 'passwd'),
      group: path.join(tempDir, 'group'),
      hosts: path.join(tempDir, 'hosts'),
    },
    layout,
    interpreters,
    readOnlyBinds: { python: binds('python'), node: binds('node'), bash: binds('bash') },
    sandboxInterpreters: {
      python: inSandbox.python?.path,
      node: inSandbox.node?.path,
      bash: inSandbox.bash?.path,
    },
    shell: find(options.shellPath).path,
  };
  writeScaffold(scaffold, options.runAs);
  fs.mkdirSync(binDir, { mode: 0o755 });
  if (scaffold.sandboxInterpreters.python)
    fs.symlinkSync(scaffold.sandboxInterpreters.python, path.join(binDir, 'python'));
  return scaffold;
}

/**
 * The code dir and a synthetic passwd/group that know only the sandbox user (not all of the host's /etc), as the
 * image's own lines have it, so `id` and `whoami` answer the same as in the containers.
 */
function writeScaffold(s: Scaffold, runAs: ScaffoldOptions['runAs']): void {
  fs.mkdirSync(s.codeDir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(s.etc.passwd, `sandbox:x:${SANDBOX_UID}:${SANDBOX_UID}::/home/sandbox:/bin/bash\n`, {
    mode: 0o644,
  });
  fs.writeFileSync(s.etc.group, `sandbox:x:${SANDBOX_UID}:\n`, { mode: 0o644 });
  fs.writeFileSync(s.etc.hosts, '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n', {
    mode: 0o644,
  });
  // bubblewrap runs as `runAs` and must reach the code files and synthetic /etc it binds.
  if (runAs) for (const dir of [s.tempDir, s.codeDir]) fs.chownSync(dir, runAs.uid, runAs.gid);
}

/** Writes the code where only this run's sandbox will see it (read-only, at `CODE_TARGET`). */
export function writeCodeFile(s: Scaffold, job: TierJob, runAs: ScaffoldOptions['runAs']): string {
  const safeId = job.actionId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40);
  const codeFile = path.join(
    s.codeDir,
    `${safeId}-${randomBytes(6).toString('hex')}.${EXTENSION[job.language]}`,
  );
  try {
    if (!fs.existsSync(s.etc.passwd)) writeScaffold(s, runAs); // someone cleaned the temp dir
    fs.writeFileSync(codeFile, job.code, { mode: 0o644, flag: 'wx' });
    return codeFile;
  } catch (err) {
    throw new SandboxInternalError('CODE_FILE', `cannot write the code file: ${(err as Error).message}`, {
      retriable: true,
      cause: err,
    });
  }
}
