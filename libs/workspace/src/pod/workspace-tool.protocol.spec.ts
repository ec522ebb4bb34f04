import { InvalidInputError, NotFoundError, SwitchyardError } from '@switchyard/common';
import type { WorkspaceSnapshot } from '../file-op.types';
import { toFileOpError } from '../fs-errors';
import { WorkspaceManager } from '../workspace-manager.service';
import { FileOpError, PathRejectedError } from '../workspace.errors';
import { resolveWorkspaceOptions } from '../workspace.options';
import {
  changedPaths,
  parseAnswer,
  reviveError,
  serializeError,
  snapshotFromWire,
  snapshotToWire,
  unwrapAnswer,
  type WorkspaceToolAnswer,
  WorkspaceToolError,
} from './workspace-tool.protocol';

/** Through JSON, as over the pod's stdout. */
const overTheWire = (err: unknown) => reviveError(JSON.parse(JSON.stringify(serializeError(err))));

describe('workspace tool protocol', () => {
  describe('reviveError', () => {
    const cases: [string, () => Error][] = [
      [
        'FileOpError',
        () => new FileOpError('EDIT_AMBIGUOUS', 'find text occurs 2 times', { path: 'a', occurrences: 2 }),
      ],
      [
        'FileOpError (limit)',
        () => new FileOpError('WORKSPACE_FULL', 'full', { path: 'a', usage: 5, cap: 4 }),
      ],
      [
        'FileOpError from an errno',
        () => toFileOpError(Object.assign(new Error('x'), { code: 'ENOENT' }), 'a/b') as Error,
      ],
      [
        'PathRejectedError',
        () => new PathRejectedError('to', '../x', 'PATH_ESCAPE', 'to climbs out of the workspace'),
      ],
      [
        'PathRejectedError, long path',
        () => new PathRejectedError('path', 'é'.repeat(300), 'PATH_TOO_LONG', 'too long'),
      ],
      ['InvalidInputError', () => new InvalidInputError('offset', 'offset must be an integer from 1 to 9')],
      [
        'InvalidInputError with code',
        () => new InvalidInputError('w.x', 'bad', 'SOME_CODE', { extra: [1, 'b'] }),
      ],
      ['NotFoundError', () => new NotFoundError('workspace /w does not exist', { root: '/w' })],
    ];

    it.each(cases)('gives back the same %s', (_name, make) => {
      const original = make();
      const revived = overTheWire(original);
      expect(revived.constructor).toBe(original.constructor);
      expect(revived).toBeInstanceOf(SwitchyardError);
      const seen = (e: Error) => {
        const r = e as unknown as Record<string, unknown>;
        return {
          name: e.name,
          message: e.message,
          code: r.code,
          details: r.details,
          kind: r.kind,
          errorClass: r.errorClass,
          field: r.field,
          retriable: r.retriable,
        };
      };
      expect(seen(revived)).toEqual(seen(original));
      if (original instanceof PathRejectedError) expect(revived).toBeInstanceOf(InvalidInputError);
    });

    it('turns anything else into a plain Error carrying its code and where it came from', () => {
      const revived = overTheWire(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }));
      expect(revived.constructor).toBe(Error);
      expect(revived).toMatchObject({ message: 'EIO: i/o error, read', code: 'EIO' });
      expect(revived.stack).toContain('in the workspace tool');
      expect(overTheWire('a string')).toMatchObject({ message: 'a string', code: 'INTERNAL' });
      expect(overTheWire(new WorkspaceToolError('BAD_REQUEST', 'no'))).toBeInstanceOf(WorkspaceToolError);
    });

    it('takes the answer or its error', () => {
      const err = serializeError(new FileOpError('ENOENT', 'a does not exist', { path: 'a' }));
      expect(reviveError({ ok: false, error: err })).toBeInstanceOf(FileOpError);
      expect(() => unwrapAnswer<'usage'>({ ok: false, error: err })).toThrow(FileOpError);
      const ok: WorkspaceToolAnswer<'usage'> = { ok: true, bytes: 1, files: 1, partial: false };
      expect(unwrapAnswer(ok)).toBe(ok);
    });
  });

  describe('parseAnswer', () => {
    it('accepts one answer and refuses anything else', () => {
      expect(parseAnswer('{"ok":true,"bytes":0,"files":0,"partial":false}\n')).toMatchObject({ ok: true });
      for (const bad of ['', 'Segmentation fault', '[1]', '{"ok":"yes"}', '{"ok":false}', '{}\n{}']) {
        expect(() => parseAnswer(bad)).toThrow(WorkspaceToolError);
      }
    });
  });

  describe('changedPaths', () => {
    const manager = new WorkspaceManager(resolveWorkspaceOptions({ root: '/nonexistent' }));
    const snap = (partial: boolean, ...entries: [string, string][]): WorkspaceSnapshot => ({
      entries: new Map(entries),
      partial,
    });

    it('is WorkspaceManager.changedPaths, on maps and on wire snapshots', () => {
      const before = snap(false, ['a', '1'], ['b/c', '1'], ['b/d', '1'], ['e', '1']);
      const pairs: [WorkspaceSnapshot, WorkspaceSnapshot][] = [
        [before, snap(false, ['a', '2'], ['b/c', '1'], ['b/x', '1'], ['e', '1'], ['f', '1'])],
        [before, snap(true, ['a', '1'], ['b/c', '2'])],
        [snap(true, ['a', '1'], ['b/c', '1']), snap(false, ['a', '1'], ['b/d', '1'], ['z', '1'])],
        [snap(true, ['b/c', '1']), snap(true, ['a', '2'], ['b/c', '1'], ['b/d', '1'])],
        [snap(false), snap(false, ['a-b', '1'], ['a/b', '1'], ['a.b', '1'])],
        [snap(true), snap(false, ['x', '1'])],
      ];
      for (const [b, a] of pairs) {
        const want = manager.changedPaths(b, a);
        expect(changedPaths(b, a)).toEqual(want);
        expect(changedPaths(snapshotToWire(b), snapshotToWire(a))).toEqual(want);
        expect(snapshotFromWire(JSON.parse(JSON.stringify(snapshotToWire(a))))).toEqual(a);
      }
    });
  });
});
