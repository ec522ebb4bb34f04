import { createHash } from 'node:crypto';

/**
 * How scripts/sandbox-templates.mjs tags a template image; the engine computes the same tag to know which image a
 * template's file and base image call for. Keep `TEMPLATE_RECIPE` equal to the script's (a unit test runs both).
 */
export const TEMPLATE_RECIPE = 'switchyard-template-recipe/1';
export const TEMPLATE_REPOSITORY_PREFIX = 'switchyard/sandbox-';

/**
 * `switchyard/sandbox-<name>:<12 hex>`: sha256 over the recipe version, the name, the base image reference and the
 * template file's exact bytes. Any edit of the file (comments included) or a new base image gives a new tag.
 */
export function templateTag(name: string, base: string, fileBytes: Buffer): { hash: string; tag: string } {
  const hash = createHash('sha256')
    .update(`${TEMPLATE_RECIPE}\0${name}\0${base}\0`)
    .update(fileBytes)
    .digest('hex');
  return { hash, tag: `${TEMPLATE_REPOSITORY_PREFIX}${name}:${hash.slice(0, 12)}` };
}

/** The repository of a template's images, for matching an older build. */
export const templateRepository = (name: string): string => `${TEMPLATE_REPOSITORY_PREFIX}${name}`;
