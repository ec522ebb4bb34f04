import { InvalidInputError, SwitchyardError } from '@switchyard/common';
import { FileOpError, formatBytes, PathRejectedError } from './workspace.errors';

describe('workspace errors', () => {
  it('PathRejectedError is an invalid-input error carrying field and path', () => {
    const err = new PathRejectedError('to', '../x', 'PATH_ESCAPE', 'to climbs out');
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err).toMatchObject({
      code: 'PATH_ESCAPE',
      kind: 'invalid_input',
      field: 'to',
      name: 'PathRejectedError',
    });
    expect(err.details).toEqual({ field: 'to', path: '../x' });
  });

  it.each([
    ['ENOENT', 'not_found', 'validation'],
    ['EEXIST', 'conflict', 'validation'],
    ['ENOTEMPTY', 'conflict', 'validation'],
    ['EDIT_AMBIGUOUS', 'invalid_input', 'validation'],
    ['INVALID_CURSOR', 'invalid_input', 'validation'],
    ['FILE_TOO_LARGE', 'payload_too_large', 'limit'],
    ['WORKSPACE_FULL', 'payload_too_large', 'limit'],
  ] as const)('FileOpError %s is kind %s, class %s', (code, kind, errorClass) => {
    const err = new FileOpError(code, 'm', { path: 'p' });
    expect(err).toBeInstanceOf(SwitchyardError);
    expect(err).toMatchObject({ code, kind, errorClass, retriable: false, details: { path: 'p' } });
  });

  it('formats byte counts in binary units', () => {
    expect([formatBytes(10), formatBytes(1024), formatBytes(1536), formatBytes(3 * 1024 * 1024)]).toEqual([
      '10 B',
      '1 KiB',
      '1.5 KiB',
      '3 MiB',
    ]);
  });
});
