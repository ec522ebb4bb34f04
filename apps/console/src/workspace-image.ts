/**
 * A picture kept in a session's workspace (a browser screenshot), read through the file API and drawn from a
 * `data:` URL: the page's policy allows no other image source, and the bytes never touch the DOM as markup.
 */
import { client } from './api';

/** Largest picture read for the page; a bigger one is named, not drawn. */
export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error ?? new Error('the image could not be read'));
    reader.readAsDataURL(blob);
  });
}

/**
 * The workspace file at `path` as a `data:` URL of type `mime` (only image types the page draws are asked for).
 * Reading it is a file download, recorded on the session like any other.
 */
export async function workspaceImage(
  sessionId: string,
  path: string,
  mime: string,
  signal?: AbortSignal,
): Promise<string> {
  const response = await client().files.download(sessionId, path, { signal });
  const length = Number(response.headers.get('content-length') ?? '0');
  if (length > MAX_IMAGE_BYTES) {
    await response.body?.cancel();
    throw new Error(`the image is ${length} bytes, over the ${MAX_IMAGE_BYTES}-byte limit of the console`);
  }
  const bytes = await response.arrayBuffer();
  if (bytes.byteLength > MAX_IMAGE_BYTES) {
    throw new Error(`the image is over the ${MAX_IMAGE_BYTES}-byte limit of the console`);
  }
  return dataUrl(new Blob([bytes], { type: mime }));
}
