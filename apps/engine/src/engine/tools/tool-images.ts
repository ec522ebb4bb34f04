/**
 * Images a model API takes in a tool result, told by their bytes: Anthropic's image blocks, OpenAI's `input_image`
 * and MCP's `image` content all take PNG, JPEG, GIF and WebP. Anything else (SVG is text; BMP, TIFF…) is not
 * attached. Only the first bytes of base64 data are decoded, and sizes are computed from its length: telling an
 * image of megabytes costs the event loop nothing.
 */

export const MODEL_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export type ModelImageType = (typeof MODEL_IMAGE_TYPES)[number];

/** Bytes read to tell the type: WebP's signature ends at byte 12. */
const SNIFF_BYTES = 12;

/** The image type of `bytes` by its signature, or undefined when it is none of the four. */
export function imageTypeOf(bytes: Uint8Array): ModelImageType | undefined {
  const at = (offset: number, ...expected: number[]): boolean =>
    expected.every((b, i) => bytes[offset + i] === b);
  const ascii = (offset: number, text: string): boolean =>
    at(offset, ...Array.from(text, (c) => c.charCodeAt(0)));
  if (at(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png';
  if (at(0, 0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (ascii(0, 'GIF87a') || ascii(0, 'GIF89a')) return 'image/gif';
  if (ascii(0, 'RIFF') && ascii(8, 'WEBP')) return 'image/webp';
  return undefined;
}

/** The image type of base64 `data` by its first bytes (the rest is not decoded). */
export function imageTypeOfBase64(data: string): ModelImageType | undefined {
  const head = data.slice(0, Math.ceil(SNIFF_BYTES / 3) * 4);
  return imageTypeOf(Buffer.from(head, 'base64'));
}

/** The decoded size of base64 `data`, from its length and padding. */
export function base64Bytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}

/** `1536` → `1.5 KiB`, as the engine's other messages say sizes. */
export function formatSize(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : Number(n.toFixed(2))} ${units[i]}`;
}
