import { base64Bytes, formatSize, imageTypeOfBase64 } from './tool-images';
import type { ToolPart } from './tool-outcome';

/**
 * The parts that say and attach one image: an image part when a model API can take it (PNG, JPEG, GIF or WebP by
 * its bytes, within the cap), else a text part saying why not and where it is.
 */

/** A workspace file to attach as an image, read from the workspace when the answer is built. */
export interface ToolImageFile {
  type: 'image-file';
  /** Workspace-relative. */
  path: string;
  /** The section header (`[image]`, `[display image/png]`). */
  header: string;
  /** What the line says before the type (`plot.png: `) and after it (`640x480, `). */
  lead: string;
  dims: string;
  /** The type it was saved as (its bytes tell when it is read). */
  declared: string;
  /** Its size when known beforehand (a browser artifact, a result written to a file). */
  bytes?: number;
}

/** A part of an answer being built: its image files are read before it is answered. */
export type DraftPart = ToolPart | ToolImageFile;

export interface ImageSource {
  /** The section header: `[image]`, `[display image/png]`, `[result image/png]`. */
  header: string;
  /** What the line says before the type (`plot.png: `) and after it, before the size (`640x480, `). */
  lead: string;
  dims?: string;
  /** What the bytes were declared as (a MIME bundle's key), when they were. */
  declared?: string;
  /** Where it is kept: `the workspace file plot.png`, `output.results[0] of action act_1 (GET …)`. */
  where: string;
}

export const CAP_SETTING = 'SWITCHYARD_TOOL_IMAGE_MAX_BYTES';

/** Base64 without the line breaks some encoders put in (the data is the same image). */
const compact = (data: string): string => (/\s/.test(data) ? data.replace(/\s+/g, '') : data);

/** The parts for base64 image `data` from `source`: the image and the line naming it, or a line saying why not. */
export function imageParts(data: string, source: ImageSource, maxBytes: number): ToolPart[] {
  const clean = compact(data);
  const bytes = base64Bytes(clean);
  const detected = imageTypeOfBase64(clean);
  const text = (line: string): ToolPart[] => [{ type: 'text', text: `${source.header}\n${line}` }];
  if (!detected) {
    const kind = source.declared ? `${source.declared}, ` : '';
    return text(
      `${source.lead}${kind}${formatSize(bytes)}; not attached: not a PNG, JPEG, GIF or WebP image (what model ` +
        `APIs take); it is ${source.where}`,
    );
  }
  const line = `${source.lead}${detected}, ${source.dims ?? ''}${formatSize(bytes)}`;
  if (bytes > maxBytes) {
    return text(
      `${line}; not attached: over the ${formatSize(maxBytes)} image cap (${CAP_SETTING}); it is ${source.where}`,
    );
  }
  return [
    {
      type: 'image',
      text: `${source.header}\n${line}`,
      mimeType: detected,
      data: clean,
      where: source.where,
    },
  ];
}

/** What an image file too big to attach says, without reading it. */
export function fileOverCap(file: ToolImageFile, bytes: number, maxBytes: number): ToolPart {
  return {
    type: 'text',
    text:
      `${file.header}\n${file.lead}${file.declared}, ${file.dims}${formatSize(bytes)}; not attached: over the ` +
      `${formatSize(maxBytes)} image cap (${CAP_SETTING}); it is the workspace file ${file.path}`,
  };
}
