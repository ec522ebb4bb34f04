import * as fs from 'node:fs';

/**
 * Sandbox user of the image (docker/sandbox/Dockerfile): the Docker pooled tier's containers and the Kubernetes
 * tiers' pods run code as this uid and gid.
 */
export const SANDBOX_UID = 10001;

/** The tag `npm run sandbox:image` wrote to `file`, trimmed; `undefined` when there is none (yet). */
export function readImageTag(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
