import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { imageSystemLayout, resolveInRoot } from './image-layout';

/** A small image root: merged /usr, python behind a link chain, an /etc, the engine's /opt entry and a tool's. */
function makeRoot(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'image-layout-'));
  const mk = (p: string) => fs.mkdirSync(path.join(root, p), { recursive: true });
  const file = (p: string, mode = 0o755) => fs.writeFileSync(path.join(root, p), '', { mode });
  const link = (target: string, p: string) => fs.symlinkSync(target, path.join(root, p));
  for (const d of [
    'usr/bin',
    'usr/lib',
    'etc/alternatives',
    'opt/switchyard/runner',
    'opt/tool',
    'var/lib/dpkg',
    'var/log',
    'proc',
    'home',
  ])
    mk(d);
  link('usr/bin', 'bin');
  link('usr/lib', 'lib');
  file('usr/bin/python3.11');
  link('python3.11', 'usr/bin/python3');
  // An absolute link: it must lead into the root, never to the host's /usr/bin.
  link('/usr/bin/python3', 'etc/alternatives/python');
  link('/etc/alternatives/python', 'usr/bin/python');
  file('usr/bin/notes.txt', 0o644);
  link('/host-only/thing', 'opt/escape');
  link('loop2', 'usr/bin/loop1');
  link('loop1', 'usr/bin/loop2');
  return root;
}

describe('imageSystemLayout', () => {
  const root = makeRoot();
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
  const layout = imageSystemLayout(root);

  it('binds the image’s system dirs read-only at their places and recreates its links as links', () => {
    expect(layout.args).toEqual([
      '--ro-bind',
      path.join(root, 'usr'),
      '/usr',
      '--symlink',
      'usr/bin',
      '/bin',
      '--symlink',
      'usr/lib',
      '/lib',
      // What dpkg and pip know the image installed; not the rest of /var.
      '--ro-bind',
      path.join(root, 'var/lib'),
      '/var/lib',
      // /opt: what the image installed there, a link kept a link; the engine's own entry is left to the engine.
      '--symlink',
      '/host-only/thing',
      '/opt/escape',
      '--ro-bind',
      path.join(root, 'opt/tool'),
      '/opt/tool',
    ]);
    expect(layout.etcArgs).toEqual(['--ro-bind', path.join(root, 'etc'), '/etc']);
    expect(layout.boundDirs).toEqual(['/usr', '/var/lib', '/opt/tool', '/etc']);
  });

  it('takes every bind source from the root: nothing of the host’s system is shown', () => {
    const all = [...layout.args, ...layout.etcArgs];
    const sources = all.flatMap((a, i) => (a === '--ro-bind' ? [all[i + 1]] : []));
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) expect(source.startsWith(`${root}/`)).toBe(true);
    expect(all).not.toContain('/etc/ld.so.cache');
    expect(all.some((a) => a.includes('switchyard'))).toBe(false);
  });
});

describe('resolveInRoot', () => {
  const root = makeRoot();
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('follows relative and absolute links inside the root, through linked directories', () => {
    expect(resolveInRoot(root, '/usr/bin/python3')).toEqual({ path: '/usr/bin/python3.11' });
    expect(resolveInRoot(root, '/bin/python')).toEqual({ path: '/usr/bin/python3.11' });
    expect(resolveInRoot(root, '/usr/bin/../bin/./python3')).toEqual({ path: '/usr/bin/python3.11' });
  });

  it('says why a path is not a usable executable of the image', () => {
    expect(resolveInRoot(root, '/usr/bin/node').problem).toMatch(/not in the image/);
    expect(resolveInRoot(root, '/usr/bin/notes.txt').problem).toMatch(/not an executable file/);
    expect(resolveInRoot(root, '/usr/bin/loop1').problem).toMatch(/too many levels of links/);
    // The host has /usr/bin/env; the image does not, and the host's never counts.
    expect(resolveInRoot(root, '/usr/bin/env').problem).toMatch(/not in the image/);
  });
});
