import type * as fs from 'node:fs';
import {
  ARGS_FD,
  buildLauncherCommand,
  buildRunArgs,
  detectSystemLayout,
  encodeArgs,
  interpreterBind,
  STATUS_FD,
} from './bwrap-command';

const launcher = buildLauncherCommand({
  setprivPath: '/usr/bin/setpriv',
  nicePath: '/usr/bin/nice',
  prlimitPath: '/usr/bin/prlimit',
  bwrapPath: '/usr/bin/bwrap',
  rlimits: { fileSizeBytes: 100, openFiles: 64, cpuSeconds: 5, addressSpaceBytes: 1 << 30 },
  sandbox: {
    layout: {
      args: ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin'],
      etcArgs: ['--ro-bind-try', '/etc/ld.so.cache', '/etc/ld.so.cache'],
      boundDirs: ['/usr'],
    },
    etc: { passwd: '/eng/tmp/passwd', group: '/eng/tmp/group' },
    readOnlyBinds: [{ source: '/opt/node/bin', target: '/run/interpreters/node' }],
    tmpfsBytes: 1024,
  },
  argv: ['/usr/bin/python3.11', '-s', '/run/switchyard/main.py'],
});
const bwrap = launcher.args.slice(launcher.args.indexOf('/usr/bin/bwrap'));

/** `seq` appears in `args` as consecutive items. */
function hasSequence(args: string[], ...seq: string[]): boolean {
  return args.some((_, i) => seq.every((s, j) => args[i + j] === s));
}

describe('buildLauncherCommand', () => {
  it('dies with the engine, lowers its priority and applies rlimits, then execs bubblewrap', () => {
    expect(launcher.command).toBe('/usr/bin/setpriv');
    expect(launcher.args.slice(0, 16)).toEqual([
      '--pdeathsig',
      'KILL',
      '--',
      '/usr/bin/nice',
      '-n',
      '19',
      '--',
      '/usr/bin/prlimit',
      '--core=0',
      // No way back up from niceness 19.
      '--nice=0',
      '--fsize=100',
      '--nofile=64',
      '--cpu=5:6',
      `--as=${1 << 30}`,
      '--',
      '/usr/bin/bwrap',
    ]);
    expect(launcher.args.slice(-4)).toEqual(['--', '/usr/bin/python3.11', '-s', '/run/switchyard/main.py']);
  });

  it('sets no address-space limit unless asked', () => {
    const { args } = buildLauncherCommand({
      setprivPath: 's',
      nicePath: 'n',
      prlimitPath: 'p',
      bwrapPath: 'b',
      rlimits: { fileSizeBytes: 1, openFiles: 1, cpuSeconds: 1 },
      sandbox: {
        layout: { args: [], etcArgs: [], boundDirs: [] },
        etc: { passwd: 'a', group: 'b' },
        readOnlyBinds: [],
        tmpfsBytes: 1,
      },
      argv: ['x'],
    });
    expect(args.some((a) => a.startsWith('--as'))).toBe(false);
  });

  it('unshares every namespace, drops privileges and ties the sandbox to its parent', () => {
    for (const flag of [
      '--unshare-all',
      '--unshare-user',
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
    ]) {
      expect(bwrap).toContain(flag);
    }
    expect(bwrap).not.toContain('--share-net');
    expect(hasSequence(bwrap, '--cap-drop', 'ALL')).toBe(true);
    expect(hasSequence(bwrap, '--uid', '10001', '--gid', '10001')).toBe(true);
  });

  it('mounts system dirs read-only, a minimal /etc, size-capped tmpfs, and nothing else writable', () => {
    expect(hasSequence(bwrap, '--ro-bind', '/usr', '/usr')).toBe(true);
    expect(hasSequence(bwrap, '--ro-bind', '/eng/tmp/passwd', '/etc/passwd')).toBe(true);
    expect(hasSequence(bwrap, '--ro-bind', '/opt/node/bin', '/run/interpreters/node')).toBe(true);
    expect(bwrap.some((a) => a === '/etc' || a === '/etc/shadow')).toBe(false);
    expect(bwrap).not.toContain('--bind');
    expect(hasSequence(bwrap, '--size', '1024', '--tmpfs', '/tmp')).toBe(true);
    expect(hasSequence(bwrap, '--size', '1024', '--tmpfs', '/dev/shm')).toBe(true);
    expect(hasSequence(bwrap, '--json-status-fd', String(STATUS_FD))).toBe(true);
  });

  it('reads the run’s options from the args pipe after all confinement and before the root goes read-only', () => {
    const at = (flag: string, value?: string) =>
      bwrap.findIndex((a, i) => a === flag && (value === undefined || bwrap[i + 1] === value));
    const args = at('--args', String(ARGS_FD));
    expect(args).toBeGreaterThan(at('--clearenv'));
    expect(args).toBeGreaterThan(at('--tmpfs', '/tmp'));
    expect(args).toBeGreaterThan(at('--unshare-all'));
    expect(args).toBeLessThan(at('--remount-ro', '/'));
    expect(args).toBeLessThan(at('--chdir', '/workspace'));
  });
});

describe('buildRunArgs', () => {
  it('binds the workspace writable and the code read-only, and sets exactly the given environment', () => {
    expect(
      buildRunArgs({
        workspaceDir: '/srv/ws/s1',
        codeFile: '/eng/tmp/code/a.py',
        codeTarget: '/run/switchyard/main.py',
        env: { PATH: '/usr/bin:/bin', FOO: 'a b\nc' },
      }),
    ).toEqual([
      '--bind',
      '/srv/ws/s1',
      '/workspace',
      '--ro-bind',
      '/eng/tmp/code/a.py',
      '/run/switchyard/main.py',
      '--setenv',
      'PATH',
      '/usr/bin:/bin',
      '--setenv',
      'FOO',
      'a b\nc',
    ]);
  });
});

describe('helpers', () => {
  it('encodes NUL-terminated args', () => {
    expect(encodeArgs(['a', 'b c', '']).toString()).toBe('a\0b c\0\0');
  });

  it('binds an interpreter directory at a fixed path only when it is outside the system dirs', () => {
    expect(interpreterBind('/usr/bin/python3.11', ['/usr'], 'python')).toEqual({
      path: '/usr/bin/python3.11',
    });
    expect(interpreterBind('/tmp/ci/node_modules/node/bin/node', ['/usr'], 'node')).toEqual({
      path: '/run/interpreters/node/node',
      bind: { source: '/tmp/ci/node_modules/node/bin', target: '/run/interpreters/node' },
    });
    expect(interpreterBind('/usrx/bin/node', ['/usr'], 'node').bind?.source).toBe('/usrx/bin');
  });

  it('mirrors symlinked and real system dirs and skips missing ones', () => {
    const stat = (kind: 'dir' | 'link') =>
      ({ isSymbolicLink: () => kind === 'link', isDirectory: () => kind === 'dir' }) as fs.Stats;
    const layout = detectSystemLayout({
      lstat: (p) => (p === '/usr' || p === '/lib64' ? stat('dir') : p === '/bin' ? stat('link') : undefined),
      readlink: () => 'usr/bin',
    });
    expect(layout.args).toEqual([
      '--ro-bind',
      '/usr',
      '/usr',
      '--symlink',
      'usr/bin',
      '/bin',
      '--ro-bind',
      '/lib64',
      '/lib64',
    ]);
    expect(layout.boundDirs).toEqual(['/usr', '/lib64']);
  });
});

describe('system layouts in the launcher', () => {
  it('a host layout shows the loader cache and alternatives of the host, and nothing else of its /etc', () => {
    const layout = detectSystemLayout({ lstat: () => undefined, readlink: () => '' });
    expect(layout.etcArgs).toEqual([
      '--ro-bind-try',
      '/etc/ld.so.cache',
      '/etc/ld.so.cache',
      '--ro-bind-try',
      '/etc/alternatives',
      '/etc/alternatives',
    ]);
  });

  it('binds the synthetic passwd, group and hosts over the layout’s /etc, never under it', () => {
    const { args } = buildLauncherCommand({
      prlimitPath: 'p',
      bwrapPath: 'b',
      rlimits: { fileSizeBytes: 1, openFiles: 1 },
      sandbox: {
        layout: {
          args: ['--ro-bind', '/roots/abc/usr', '/usr'],
          etcArgs: ['--ro-bind', '/roots/abc/etc', '/etc'],
          boundDirs: ['/usr'],
        },
        etc: { passwd: '/eng/passwd', group: '/eng/group', hosts: '/eng/hosts' },
        readOnlyBinds: [],
        tmpfsBytes: 1,
      },
      argv: ['x'],
    });
    const etc = args.indexOf('/roots/abc/etc');
    expect(etc).toBeGreaterThan(args.indexOf('/roots/abc/usr'));
    for (const file of ['/eng/passwd', '/eng/group', '/eng/hosts']) {
      expect(args.indexOf(file)).toBeGreaterThan(etc);
    }
  });
});
