import { inflateSync } from 'node:zlib';

/** A decoded 8-bit RGB or RGBA PNG (what Chromium's screenshots are): its size and its pixels, row by row. */
export interface PngPixels {
  width: number;
  height: number;
  /** The colour at (x, y) as `#rrggbb` (alpha ignored). */
  at(x: number, y: number): string;
  /** How many pixels have each colour, most frequent first. */
  histogram(): [colour: string, count: number][];
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Decodes a non-interlaced 8-bit truecolour PNG (colour type 2 or 6), enough to say what a screenshot shows. Throws
 * for anything else, or for bytes that are not a PNG at all.
 */
export function decodePng(png: Buffer): PngPixels {
  if (!png.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG: the signature is wrong');
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (offset < png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString('latin1', offset + 4, offset + 8);
    const data = png.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colour, , , interlace] = data.subarray(8, 13);
      if (depth !== 8 || (colour !== 2 && colour !== 6) || interlace !== 0) {
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${colour}, interlace ${interlace}`);
      }
      channels = colour === 6 ? 4 : 3;
    } else if (type === 'IDAT') {
      idat.push(data);
    } else if (type === 'IEND') {
      break;
    }
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const pixels = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const left = i >= channels ? pixels[y * stride + i - channels] : 0;
      const up = y > 0 ? pixels[(y - 1) * stride + i] : 0;
      const upLeft = y > 0 && i >= channels ? pixels[(y - 1) * stride + i - channels] : 0;
      pixels[y * stride + i] = (line[i] + predict(filter, left, up, upLeft)) & 0xff;
    }
  }
  const at = (x: number, y: number): string => {
    const p = y * stride + x * channels;
    return `#${pixels.subarray(p, p + 3).toString('hex')}`;
  };
  return {
    width,
    height,
    at,
    histogram: () => {
      const counts = new Map<string, number>();
      for (let y = 0; y < height; y++) {
        for (let x = 0; x < width; x++) counts.set(at(x, y), (counts.get(at(x, y)) ?? 0) + 1);
      }
      return [...counts.entries()].sort((a, b) => b[1] - a[1]);
    },
  };
}

/** The PNG filter's prediction of a byte from its neighbours (RFC 2083 §6). */
function predict(filter: number, left: number, up: number, upLeft: number): number {
  switch (filter) {
    case 0:
      return 0;
    case 1:
      return left;
    case 2:
      return up;
    case 3:
      return (left + up) >> 1;
    case 4: {
      const p = left + up - upLeft;
      const pa = Math.abs(p - left);
      const pb = Math.abs(p - up);
      const pc = Math.abs(p - upLeft);
      return pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
    }
    default:
      throw new Error(`unknown PNG filter ${filter}`);
  }
}
