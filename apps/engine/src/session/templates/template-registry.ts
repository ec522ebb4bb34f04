import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock, InvalidInputError } from '@switchyard/common';
import { currentImage, DOCKER_CLIENT, type DockerClient } from '@switchyard/sandbox';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import {
  type PackageKind,
  parseTemplateFile,
  TEMPLATE_EXTENSION,
  TEMPLATE_NAME,
  type TemplateDefinition,
  TemplateFileError,
} from './template-file';
import { templateTag } from './template-tag';

/** A positive "Docker has this image" is trusted this long (tags are content-addressed; a negative is never kept). */
const IMAGE_SEEN_TTL_MS = 2000;

/**
 * `ready`: Docker has the image the file calls for. `stale`: it has an older build, the file or the base image changed
 * since. `missing`: no build. `invalid`: the file was edited into one that cannot be used. `unknown`: Docker did not
 * answer.
 */
export type TemplateState = 'ready' | 'stale' | 'missing' | 'invalid' | 'unknown';

/** One template as `GET /v1/templates` shows it. */
export interface TemplateView {
  name: string;
  description: string;
  /** `packages`: built FROM the default sandbox image; `image`: an image used as is. */
  kind: 'packages' | 'image';
  /** The image sessions with the template run in; `null` while it cannot be known (no default image yet, invalid). */
  image: string | null;
  state: TemplateState;
  packages: Record<PackageKind, string[]>;
  env: Record<string, string>;
  /** What makes it ready, when it is not. */
  build?: string;
  /** `stale`: the older build Docker still has. */
  builtImage?: string;
  /** `invalid`, `unknown`: why. */
  error?: string;
}

/** A template file as last read. */
export interface TemplateEntry {
  name: string;
  file: string;
  bytes: Buffer;
  definition?: TemplateDefinition;
  /** Why the file cannot be used (it was valid at start-up, which checks every file). */
  error?: string;
}

const NO_PACKAGES: Record<PackageKind, string[]> = Object.freeze({ debian: [], pip: [], npm: [] });

/**
 * The templates of `SWITCHYARD_TEMPLATES_DIR` and their build state. Files are read again when they change (size,
 * time, inode), so an edit shows at once; the image a file calls for is computed as the builder computes it
 * (`templateTag`), and Docker says whether it exists.
 */
@Injectable()
export class TemplateRegistry {
  private readonly files = new Map<string, { key: string; entry: TemplateEntry }>();
  private readonly seen = new Map<string, number>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(DOCKER_CLIENT) private readonly docker: DockerClient,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  get dir(): string {
    return this.config.templates.dir;
  }

  /** Names of the template files, sorted. */
  names(): string[] {
    let files: string[];
    try {
      files = fs.readdirSync(this.dir);
    } catch {
      return [];
    }
    return files
      .filter((f) => f.endsWith(TEMPLATE_EXTENSION))
      .map((f) => f.slice(0, -TEMPLATE_EXTENSION.length))
      .sort();
  }

  /** The template's file as it is now, or `undefined` when there is none. */
  entry(name: string): TemplateEntry | undefined {
    if (!TEMPLATE_NAME.test(name)) return undefined;
    const file = path.join(this.dir, `${name}${TEMPLATE_EXTENSION}`);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(file);
    } catch {
      this.files.delete(name);
      return undefined;
    }
    const key = `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
    const cached = this.files.get(name);
    if (cached?.key === key) return cached.entry;
    const entry = this.read(name, file);
    this.files.set(name, { key, entry });
    return entry;
  }

  /** A template a session may name: 400 on `template` otherwise, listing those there are. */
  require(name: string): TemplateDefinition {
    const entry = this.entry(name);
    if (entry?.definition) return entry.definition;
    const known = this.names();
    throw new InvalidInputError(
      'template',
      entry
        ? `template "${name}" cannot be used: ${entry.error}`
        : `unknown template "${name}"; this engine has ${known.length > 0 ? known.map((n) => `"${n}"`).join(', ') : 'none'} ` +
            '(GET /v1/templates)',
      entry ? 'TEMPLATE_INVALID' : 'TEMPLATE_UNKNOWN',
    );
  }

  /**
   * The image a template calls for: its own `image`, or the tag the builder gives its file on the current base image
   * (`SWITCHYARD_SANDBOX_IMAGE`, else the default image's tag file). `reason` when it cannot be known yet.
   */
  expectedImage(entry: TemplateEntry): { image?: string; reason?: string } {
    const def = entry.definition;
    if (!def) return { reason: `its file cannot be used: ${entry.error}` };
    if (def.image !== undefined) return { image: def.image };
    const base = currentImage({
      image: this.config.sandbox.image,
      imageTagFile: this.config.sandbox.imageTagFile,
    });
    if (!base) return { reason: 'the default sandbox image is not built yet' };
    return { image: templateTag(entry.name, base, entry.bytes).tag };
  }

  /** Whether Docker has the image (a positive answer is reused briefly). Rejects when Docker does not answer. */
  async imageExists(ref: string): Promise<boolean> {
    const at = this.seen.get(ref);
    if (at !== undefined && this.clock.monotonic() - at < IMAGE_SEEN_TTL_MS) return true;
    const exists = await this.docker.imageExists(ref);
    if (exists) this.seen.set(ref, this.clock.monotonic());
    else this.seen.delete(ref);
    return exists;
  }

  buildCommand(entry: TemplateEntry): string {
    const image = entry.definition?.image;
    return image !== undefined ? `docker pull ${image}` : this.config.templates.buildCommand(entry.name);
  }

  /** Every template with its state. */
  async list(): Promise<TemplateView[]> {
    const entries = this.names()
      .map((n) => this.entry(n))
      .filter((e): e is TemplateEntry => e !== undefined);
    return Promise.all(entries.map((e) => this.view(e)));
  }

  async view(entry: TemplateEntry): Promise<TemplateView> {
    const def = entry.definition;
    const shown = {
      name: entry.name,
      description: def?.description ?? '',
      kind: def?.image !== undefined ? ('image' as const) : ('packages' as const),
      packages: def?.packages ?? NO_PACKAGES,
      env: def?.env ?? {},
    };
    if (!def) return { ...shown, image: null, state: 'invalid', error: entry.error };
    const { image } = this.expectedImage(entry);
    const build = this.buildCommand(entry);
    if (image === undefined) return { ...shown, image: null, state: 'missing', build };
    try {
      if (await this.imageExists(image)) return { ...shown, image, state: 'ready' };
      const older = def.image === undefined ? this.lastBuilt(entry.name) : undefined;
      if (older !== undefined && older !== image && (await this.imageExists(older))) {
        return { ...shown, image, state: 'stale', build, builtImage: older };
      }
      return { ...shown, image, state: 'missing', build };
    } catch (err) {
      return { ...shown, image, state: 'unknown', build, error: `Docker: ${(err as Error).message}` };
    }
  }

  /** The tag the builder last recorded for the template (`.runtime/templates/<name>.tag`). */
  private lastBuilt(name: string): string | undefined {
    try {
      return (
        fs.readFileSync(path.join(this.config.templates.stateDir, `${name}.tag`), 'utf8').trim() || undefined
      );
    } catch {
      return undefined;
    }
  }

  private read(name: string, file: string): TemplateEntry {
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(file);
    } catch (err) {
      return { name, file, bytes: Buffer.alloc(0), error: (err as Error).message };
    }
    try {
      return { name, file, bytes, definition: parseTemplateFile(name, bytes.toString('utf8')) };
    } catch (err) {
      if (!(err instanceof TemplateFileError)) throw err;
      return { name, file, bytes, error: err.message };
    }
  }
}
