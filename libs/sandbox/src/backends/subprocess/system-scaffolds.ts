import * as fs from 'node:fs';
import type { Logger } from '@nestjs/common';
import { SandboxUnavailableError } from '../../core/sandbox.errors';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import type { SystemRoot } from '../../core/system-root.port';
import { buildScaffold, type Scaffold } from './sandbox-scaffold';

/** What the default image's sandboxes last ran on, and why the host's system when it was that (`/health`). */
export type SubprocessSystem =
  { root: 'image'; image: string; imageId: string } | { root: 'host'; reason: string };

/**
 * The scaffolds the subprocess tier's sandboxes are built from, one per system: an image's exported root (the
 * `SystemRoot` port), or the host's system directories when the default image has no root yet.
 */
export class SystemScaffolds {
  private readonly scaffolds = new Map<string, Scaffold>();
  private current: SubprocessSystem;

  constructor(
    private readonly options: ResolvedSandboxOptions,
    private readonly logger: Logger,
    /** The sandbox images' roots; without it every sandbox runs the host's system directories. */
    private readonly systemRoot?: SystemRoot,
  ) {
    this.current = {
      root: 'host',
      reason: systemRoot ? 'no sandbox has started yet' : 'no image roots are configured (no Docker client)',
    };
  }

  /** What the default image's sandboxes run on now. */
  get system(): SubprocessSystem {
    return { ...this.current };
  }

  /**
   * The scaffold a sandbox for `image` (the default image when none) is built from, made once per system: the
   * image's root when there is one. Only the default image falls back to the host's system (no image built yet,
   * Docker not answering), and `system` says so; a session's own image (a template's) never does.
   */
  async scaffold(image?: string): Promise<Scaffold> {
    if (!this.systemRoot) return this.on(undefined);
    const answer = await this.systemRoot.root(image);
    if (answer.dir !== undefined) {
      const scaffold = this.on(answer);
      if (image === undefined && scaffold.system.kind === 'image') {
        const { image: ref, imageId } = scaffold.system;
        if (this.current.root !== 'image' || this.current.imageId !== imageId) {
          this.logger.log(`subprocess tier runs the root of ${ref} (${imageId.slice(7, 19)})`);
        }
        this.current = { root: 'image', image: ref, imageId };
      }
      return scaffold;
    }
    const problem = answer.problem ?? 'no root';
    if (image !== undefined) {
      throw new SandboxUnavailableError(
        `subprocess tier: the session's image ${image} has no root: ${problem}`,
      );
    }
    if (this.current.root !== 'host' || this.current.reason !== problem) {
      this.logger.warn(`subprocess tier runs the host's system directories: ${problem}`);
    }
    this.current = { root: 'host', reason: problem };
    return this.on(undefined);
  }

  /** Removes every scaffold's temporary directory (shutdown). */
  dispose(): void {
    for (const scaffold of this.scaffolds.values())
      fs.rmSync(scaffold.tempDir, { recursive: true, force: true });
    this.scaffolds.clear();
  }

  private on(root: { dir?: string; image?: string; imageId?: string } | undefined): Scaffold {
    const key = root?.dir ?? 'host';
    let scaffold = this.scaffolds.get(key);
    if (!scaffold) {
      scaffold = buildScaffold(this.options, root);
      this.scaffolds.set(key, scaffold);
    }
    return scaffold;
  }
}
