/**
 * Injection token of the `SystemRoot` the subprocess tier runs its sandboxes on. Provided by a backend that can turn
 * an image into a directory (the Docker backend's `ImageRootsModule`); without one the tier binds the host's system
 * directories.
 */
export const SYSTEM_ROOT = Symbol('switchyard:sandbox:system-root');

/** An image's root filesystem as a directory on the engine host, or why there is none. */
export interface SystemRootAnswer {
  /** Absolute host path of the image's extracted root (read-only for everyone but its exporter). */
  dir?: string;
  /** The image reference the root was made from. */
  image?: string;
  /** The image's content id (the directory is named by it). */
  imageId?: string;
  /** Why there is no root (no image configured or built yet, Docker not answering, the export failed). */
  problem?: string;
}

/**
 * Port: the root filesystem of a sandbox image, so that the subprocess tier runs the same system (interpreters,
 * packages, configuration) as the container tiers instead of the engine host's.
 */
export abstract class SystemRoot {
  /**
   * The root of `image`, or of the default sandbox image when none is named: made on first use, reused after.
   * Never throws; an answer without `dir` carries the `problem`.
   */
  abstract root(image?: string): Promise<SystemRootAnswer>;
}
