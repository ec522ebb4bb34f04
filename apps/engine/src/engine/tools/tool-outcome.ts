import type { ModelImageType } from './tool-images';

/** A section of a tool's text answer (`[stdout]\n…`, a file's content, an error). */
export interface ToolText {
  type: 'text';
  text: string;
}

/** An image the answer attaches, where its API takes images. */
export interface ToolImage {
  type: 'image';
  /** What the text says of it (`[image]\nplot.png: image/png, 27.1 KiB`); it comes just before the image. */
  text: string;
  mimeType: ModelImageType;
  /** Base64. */
  data: string;
  /** Where it is kept, for an answer that can only name it: `the workspace file plot.png`, `output.results[0] of …`. */
  where: string;
}

export type ToolPart = ToolText | ToolImage;

/** What a tool call answers, before it takes the shape of the call's API: text sections and images, in order. */
export interface ToolOutcome {
  parts: ToolPart[];
  is_error: boolean;
}

/** A run of text sections, or one image, as the answer's blocks will be. */
export type ToolBlock = { type: 'text'; text: string } | ToolImage;

const NO_OUTPUT = '(no output)';

/** An outcome of text alone. */
export const textOutcome = (text: string, is_error: boolean): ToolOutcome => ({
  parts: [{ type: 'text', text }],
  is_error,
});

export const hasImages = (outcome: ToolOutcome): boolean => outcome.parts.some((p) => p.type === 'image');

/** What an answer that carries text only says in an image's place. */
export const imageAsText = (image: ToolImage): string =>
  `${image.text}; not shown (this tool result takes text only): it is ${image.where}`;

/**
 * The answer as text alone, sections joined by a newline: exactly the text answer of a call without images; an
 * image is its text and where it is.
 */
export function textOf(outcome: ToolOutcome): string {
  const text = outcome.parts.map((p) => (p.type === 'text' ? p.text : imageAsText(p))).join('\n');
  return text || NO_OUTPUT;
}

/**
 * The answer as blocks in order: the text sections between two images joined by a newline into one text block
 * (never an empty one: Anthropic refuses those), each image after the text that names it.
 */
export function blocksOf(outcome: ToolOutcome): ToolBlock[] {
  const blocks: ToolBlock[] = [];
  let run: string[] = [];
  const flush = (): void => {
    if (run.length > 0 && run.join('\n') !== '') blocks.push({ type: 'text', text: run.join('\n') });
    run = [];
  };
  for (const part of outcome.parts) {
    if (part.type === 'text') {
      run.push(part.text);
    } else {
      run.push(part.text);
      flush();
      blocks.push(part);
    }
  }
  flush();
  return blocks.length > 0 ? blocks : [{ type: 'text', text: NO_OUTPUT }];
}
