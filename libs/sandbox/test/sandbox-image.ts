import * as path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/**
 * Where the container tiers' integration specs find the sandbox image, as the engine's configuration does:
 * `SWITCHYARD_SANDBOX_IMAGE`, else the tag `npm run sandbox:image` wrote to `.runtime/sandbox-image.tag`.
 *
 * @internal
 */
export const TEST_IMAGE_SOURCE: { image?: string; imageTagFile: string } = {
  image: process.env.SWITCHYARD_SANDBOX_IMAGE || undefined,
  imageTagFile: path.join(REPO_ROOT, '.runtime', 'sandbox-image.tag'),
};
