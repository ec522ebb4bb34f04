import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { FileOp } from './file-op.types';
import * as guard from './path-guard';
import { PathRejectedError } from './workspace.errors';
import { expectRejected, useFileOpsFixture } from './file-ops/file-ops.testing';

/**
 * What holds for every op, whichever family runs it: no path leaves the workspace, by traversal, by a link or by
 * a hardlink, not even when code swaps a component while the op runs. Each family's own behaviour is in its spec
 * under `file-ops/`.
 */
describe('FileOperations', () => {
  const f = useFileOpsFixture();
  const { run, put, get } = f;

  describe('path traversal (SECURITY #9)', () => {
    const writeTo = (p: string) => run({ op: 'write', path: p, content: 'pwned' });

    it.each([
      ['../x', '../x', 'PATH_ESCAPE'],
      ['./../x', './../x', 'PATH_ESCAPE'],
      ['a/../../x', 'a/../../x', 'PATH_ESCAPE'],
      ['/etc/passwd', '/etc/passwd', 'PATH_ABSOLUTE'],
      ['a NUL byte', 'a\0b', 'PATH_NUL'],
      ['..\\..\\x', '..\\..\\x', 'PATH_BACKSLASH'],
      ['%2e%2e/x', '%2e%2e/x', 'PATH_ENCODED_TRAVERSAL'],
      ['..%2fx', '..%2fx', 'PATH_ENCODED_TRAVERSAL'],
      ['double-encoded %252e%252e%252fx', '%252e%252e%252fx', 'PATH_ENCODED_TRAVERSAL'],
      ['overlong UTF-8 %c0%ae%c0%ae/x', '%c0%ae%c0%ae/x', 'PATH_ENCODED_TRAVERSAL'],
      ['a newline', 'a\nb', 'PATH_CONTROL_CHAR'],
      ['a 5000-char path', 'x'.repeat(5000), 'PATH_TOO_LONG'],
      ['a 256-byte segment', `${'y'.repeat(256)}/f`, 'PATH_TOO_LONG'],
    ])('%s is rejected for reads and writes', async (_label, p, code) => {
      const err = await expectRejected(writeTo(p), code);
      expect(err.kind).toBe('invalid_input');
      expect(err.details.field).toBe('path');
      await expectRejected(run({ op: 'read', path: p }), code);
      expect(await fs.readdir(f.tmp)).toEqual(['outside', 'ws']);
    });

    it('accepts a/../b, and treats names that only look encoded literally', async () => {
      await writeTo('a/../b');
      expect(await get('b')).toBe('pwned');
      await writeTo('100%.txt');
      await writeTo('%41');
      expect(await get('%41')).toBe('pwned'); // not decoded to "A"
    });

    it('applies the configured path length', async () => {
      f.configure({ limits: { maxPathLength: 10 } });
      await expectRejected(writeTo('abcdefghijk'), 'PATH_TOO_LONG');
    });
  });

  describe('symlink and hardlink escapes (SECURITY #8)', () => {
    it('ln -s /etc/passwd x: read and write through x are refused', async () => {
      await fs.symlink('/etc/passwd', path.join(f.ws, 'x'));
      await expectRejected(run({ op: 'read', path: 'x' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'x', content: 'pwned' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(
        run({ op: 'edit', path: 'x', find: 'root', replace: 'pwned' }),
        'PATH_SYMLINK_ESCAPE',
      );
    });

    it('a link to an outside file the workspace can write is not followed by write/append', async () => {
      await fs.symlink(path.join(f.outside, 'secret.txt'), path.join(f.ws, 's'));
      for (const mode of ['overwrite', 'append', 'create'] as const) {
        await expect(run({ op: 'write', path: 's', content: 'pwned', mode })).rejects.toBeInstanceOf(
          PathRejectedError,
        );
      }
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    it('dangling links are refused', async () => {
      await fs.symlink('does-not-exist', path.join(f.ws, 'dangling'));
      await expectRejected(run({ op: 'read', path: 'dangling' }), 'PATH_SYMLINK_DANGLING');
      await expectRejected(run({ op: 'write', path: 'dangling', content: 'x' }), 'PATH_SYMLINK_DANGLING');
      await expect(fs.access(path.join(f.ws, 'does-not-exist'))).rejects.toThrow();
    });

    it('ln -s .. up: up/… is refused for every op', async () => {
      await fs.symlink('..', path.join(f.ws, 'up'));
      await expectRejected(run({ op: 'read', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'up/outside/new', content: 'x' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'list', path: 'up' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'grep', pattern: 'SECRET', path: 'up/outside' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'find', pattern: '**', path: 'up' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'mkdir', path: 'up/made' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'delete', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(
        run({ op: 'move', path: 'up/outside/secret.txt', to: 'stolen' }),
        'PATH_SYMLINK_ESCAPE',
      );
      await expectRejected(run({ op: 'stat', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      expect(await fs.readdir(f.outside)).toEqual(['secret.txt']);
    });

    it('a link to a link is refused, even when both stay inside', async () => {
      await put('real.txt', 'ok');
      await fs.symlink('real.txt', path.join(f.ws, 'l1'));
      await fs.symlink('l1', path.join(f.ws, 'l2'));
      expect((await run({ op: 'read', path: 'l1' })).output.content).toBe('ok');
      await expectRejected(run({ op: 'read', path: 'l2' }), 'PATH_SYMLINK_CHAIN');
    });

    it('a symlinked directory in the middle of a path: inside is followed, outside refused', async () => {
      await put('real/f.txt', 'inside');
      await fs.symlink('real', path.join(f.ws, 'alias'));
      await fs.symlink(f.outside, path.join(f.ws, 'ext'));
      const out = await run({ op: 'read', path: 'alias/f.txt' });
      expect(out.output.content).toBe('inside');
      expect(out.touched).toEqual([{ path: 'real/f.txt', access: 'read' }]); // the real file, for the graph
      await run({ op: 'write', path: 'alias/g.txt', content: 'g' });
      expect(await get('real/g.txt')).toBe('g');
      await expectRejected(run({ op: 'read', path: 'ext/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'ext/planted', content: 'x' }), 'PATH_SYMLINK_ESCAPE');
      expect(await fs.readdir(f.outside)).toEqual(['secret.txt']);
    });

    it('walks never follow links: list, find and grep do not see outside files', async () => {
      await fs.symlink(f.outside, path.join(f.ws, 'ext'));
      await fs.symlink(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'sec'));
      const listed = (await run({ op: 'list', recursive: true })).output.entries as { path: string }[];
      expect(listed.map((e) => e.path)).toEqual(['ext', 'sec']);
      expect((await run({ op: 'find', pattern: '**/secret*' })).output.paths).toEqual([]);
      expect((await run({ op: 'grep', pattern: 'SECRET' })).output.matches).toEqual([]);
    });

    it('a hardlink to an outside file is neither read nor written', async () => {
      await fs.link(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'hard'));
      const err = await expectRejected(run({ op: 'read', path: 'hard' }), 'PATH_HARDLINK');
      expect(err.message).toMatch(/2 hard links/);
      await expectRejected(run({ op: 'write', path: 'hard', content: 'pwned' }), 'PATH_HARDLINK');
      await expectRejected(
        run({ op: 'write', path: 'hard', content: 'pwned', mode: 'append' }),
        'PATH_HARDLINK',
      );
      await expectRejected(run({ op: 'edit', path: 'hard', find: 'TOP', replace: 'pwned' }), 'PATH_HARDLINK');
      expect((await run({ op: 'grep', pattern: 'SECRET' })).output.matches).toEqual([]);
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
      // Deleting the link only removes the workspace's name for it.
      await run({ op: 'delete', path: 'hard' });
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    describe('a directory swapped for a link to outside right after the path was vetted', () => {
      beforeEach(async () => {
        await put('d/secret.txt', 'inside\n');
        await fs.writeFile(path.join(f.outside, 'other.txt'), 'outside\n');
        const original = guard.realPathInside;
        let swapped = false;
        jest.spyOn(guard, 'realPathInside').mockImplementation(async (...args) => {
          const vetted = await original(...args);
          if (!swapped) {
            swapped = true;
            await fs.rename(path.join(f.ws, 'd'), path.join(f.ws, 'd.orig'));
            await fs.symlink(f.outside, path.join(f.ws, 'd'));
          }
          return vetted;
        });
      });
      afterEach(() => jest.restoreAllMocks());

      it.each<[string, FileOp]>([
        ['read', { op: 'read', path: 'd/secret.txt' }],
        ['overwrite', { op: 'write', path: 'd/secret.txt', content: 'pwned' }],
        ['append', { op: 'write', path: 'd/secret.txt', content: 'pwned', mode: 'append' }],
        ['create', { op: 'write', path: 'd/new.txt', content: 'pwned', mode: 'create' }],
        ['edit', { op: 'edit', path: 'd/secret.txt', find: 'inside', replace: 'pwned' }],
        ['mkdir', { op: 'mkdir', path: 'd/sub' }],
        ['delete', { op: 'delete', path: 'd/secret.txt' }],
        ['move', { op: 'move', path: 'd/secret.txt', to: 'moved' }],
      ])('%s is refused and nothing outside changes', async (_name, op) => {
        await expectRejected(run(op), 'PATH_SYMLINK_ESCAPE');
        expect((await fs.readdir(f.outside)).sort()).toEqual(['other.txt', 'secret.txt']);
        expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
      });
    });

    it('a final component swapped for a link after the check is not followed (O_NOFOLLOW)', async () => {
      await put('f.txt', 'inside\n');
      const original = guard.realPathInside;
      jest.spyOn(guard, 'realPathInside').mockImplementation(async (...args) => {
        const vetted = await original(...args);
        await fs.rm(path.join(f.ws, 'f.txt'));
        await fs.symlink(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'f.txt'));
        return vetted;
      });
      try {
        await expectRejected(run({ op: 'read', path: 'f.txt' }), 'PATH_SYMLINK_ESCAPE');
        await fs.rm(path.join(f.ws, 'f.txt'));
        await fs.writeFile(path.join(f.ws, 'f.txt'), 'inside\n');
        await expectRejected(
          run({ op: 'write', path: 'f.txt', content: 'pwned', mode: 'append' }),
          'PATH_SYMLINK_ESCAPE',
        );
      } finally {
        jest.restoreAllMocks();
      }
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    it('survives code swapping a directory for a link to outside while reads and writes run', async () => {
      // A racing "attacker" flips d between a real directory and a link to outside as fast as it can.
      await fs.mkdir(path.join(f.ws, 'real'));
      await fs.writeFile(path.join(f.ws, 'real/secret.txt'), 'inside\n');
      const { spawn } = await import('node:child_process');
      const script = `cd '${f.ws}'; while :; do ln -sfn '${f.outside}' d.tmp && mv -T d.tmp d; ln -sfn real d.tmp && mv -T d.tmp d; done`;
      await fs.symlink('real', path.join(f.ws, 'd'));
      // Own process group, so the kill below also reaches the ln/mv it is running at that moment.
      const racer = spawn('sh', ['-c', script], { stdio: 'ignore', detached: true });
      const exited = new Promise((resolve) => racer.once('exit', resolve));
      try {
        const seen = new Set<string>();
        for (let i = 0; i < 300; i++) {
          const r = await run({ op: 'read', path: 'd/secret.txt' }).catch((e: Error) => e);
          seen.add(r instanceof Error ? r.name : String(r.output.content));
          await run({ op: 'write', path: 'd/w.txt', content: `${i}` }).catch(() => undefined);
        }
        expect(seen.has('inside\n')).toBe(true); // the race really ran both ways
        expect(seen.has('TOP SECRET\n')).toBe(false);
        expect(await fs.readdir(f.outside)).toEqual(['secret.txt']);
      } finally {
        process.kill(-racer.pid!, 'SIGKILL');
        await exited;
      }
    });
  });
});
