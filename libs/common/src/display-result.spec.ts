import { displayResult } from './display-result';

describe('displayResult', () => {
  it('keeps a well-formed bundle as it is', () => {
    const raw = {
      data: { 'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure>', 'application/json': { a: [1] } },
      metadata: { 'image/png': { width: 2, height: 3 } },
      isMainResult: true,
      files: [{ mimeType: 'text/html', path: '.switchyard/results/cell-1-0-abcdef.html', bytes: 9 }],
    };
    expect(displayResult(raw)).toEqual(raw);
  });

  it('drops what is not a MIME entry, fills text/plain, and keeps only well-formed file entries', () => {
    expect(
      displayResult({
        data: { 'not a mime': 'x', 'text/html': 42, 'text/markdown': '# t' },
        metadata: {},
        isMainResult: 'yes',
        files: [{ mimeType: 'image/png', path: null, bytes: 5, error: 'ENOSPC' }, { path: 'x' }, 'junk'],
      }),
    ).toEqual({
      data: { 'text/markdown': '# t', 'text/plain': '' },
      files: [{ mimeType: 'image/png', path: null, bytes: 5, error: 'ENOSPC' }],
    });
  });

  it('is undefined without a data object', () => {
    expect(displayResult({ data: ['text/plain'] })).toBeUndefined();
    expect(displayResult({})).toBeUndefined();
  });
});
