import { base64Bytes, formatSize, imageTypeOf, imageTypeOfBase64 } from './tool-images';

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

describe('imageTypeOf', () => {
  it('tells PNG, JPEG, GIF and WebP by their signatures', () => {
    expect(imageTypeOf(bytes([0x89], 'PNG\r\n\x1a\n', [0, 0, 0, 13]))).toBe('image/png');
    expect(imageTypeOf(bytes([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(imageTypeOf(bytes('GIF89a', [1, 0]))).toBe('image/gif');
    expect(imageTypeOf(bytes('GIF87a'))).toBe('image/gif');
    expect(imageTypeOf(bytes('RIFF', [36, 0, 0, 0], 'WEBPVP8 '))).toBe('image/webp');
  });

  it('tells nothing else: SVG, a RIFF that is not WebP, BMP, text, a cut signature', () => {
    expect(imageTypeOf(bytes('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeUndefined();
    expect(imageTypeOf(bytes('RIFF', [36, 0, 0, 0], 'WAVEfmt '))).toBeUndefined();
    expect(imageTypeOf(bytes('BM', [0, 0, 0, 0]))).toBeUndefined();
    expect(imageTypeOf(bytes('hello'))).toBeUndefined();
    expect(imageTypeOf(bytes([0x89], 'PN'))).toBeUndefined();
    expect(imageTypeOf(new Uint8Array())).toBeUndefined();
  });
});

describe('imageTypeOfBase64', () => {
  it('decodes only the first bytes', () => {
    const png = bytes([0x89], 'PNG\r\n\x1a\n', 'x'.repeat(1000)).toString('base64');
    expect(imageTypeOfBase64(png)).toBe('image/png');
    // What follows the head does not matter, even when it is not base64.
    expect(imageTypeOfBase64(`${png.slice(0, 16)}!!!not base64`)).toBe('image/png');
    expect(imageTypeOfBase64(bytes('GIF89a').toString('base64'))).toBe('image/gif');
    expect(imageTypeOfBase64('')).toBeUndefined();
  });
});

describe('base64Bytes', () => {
  it('is the decoded size, padding counted', () => {
    for (const n of [0, 1, 2, 3, 4, 100, 1001]) {
      expect(base64Bytes(Buffer.alloc(n, 7).toString('base64'))).toBe(n);
    }
  });
});

describe('formatSize', () => {
  it('says bytes in binary units', () => {
    expect(formatSize(8)).toBe('8 B');
    expect(formatSize(1536)).toBe('1.5 KiB');
    expect(formatSize(3.75 * 2 ** 20)).toBe('3.75 MiB');
    expect(formatSize(27_781)).toBe('27.13 KiB');
  });
});
