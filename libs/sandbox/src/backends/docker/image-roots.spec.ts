import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import type { ContainerCreateOptions } from 'dockerode';
import {
  DockerClient,
  type ContainerExit,
  type ContainerState,
  type ContainerStreams,
  type ContainerSummary,
} from './docker-client';
import { DockerUnavailableError } from './docker.errors';
import { ImageRoots } from './image-roots';

const ID_A = `sha256:${'a'.repeat(64)}`;
const ID_B = `sha256:${'b'.repeat(64)}`;

/** A Docker engine with images (ref or id → id) whose export is a real tar of a small tree. */
class ExportingDocker extends DockerClient {
  readonly endpoint = 'unix:///fake/docker.sock';
  images = new Map<string, string>();
  created: ContainerCreateOptions[] = [];
  removed: string[] = [];
  down = false;
  /** What the export streams: a tar of this tree, or a broken stream. */
  constructor(private readonly tarOf: (id: string) => Buffer | Error) {
    super();
  }
  override async imageId(ref: string): Promise<string | undefined> {
    if (this.down) throw new DockerUnavailableError('imageId', this.endpoint, 'connect ENOENT');
    return this.images.get(ref);
  }
  async createContainer(spec: ContainerCreateOptions): Promise<string> {
    this.created.push(spec);
    return `c${this.created.length}`;
  }
  override async exportContainer(id: string): Promise<Readable> {
    const image = this.created[Number(id.slice(1)) - 1].Image!;
    const tar = this.tarOf(image);
    if (tar instanceof Error) {
      return new Readable({
        read() {
          this.destroy(tar);
        },
      });
    }
    return Readable.from([tar]);
  }
  async remove(id: string): Promise<void> {
    this.removed.push(id);
  }
  async ping(): Promise<void> {}
  async imageExists(): Promise<boolean> {
    return true;
  }
  attach(): Promise<ContainerStreams> {
    throw new Error('not expected');
  }
  start(): Promise<void> {
    throw new Error('not expected');
  }
  wait(): Promise<ContainerExit> {
    throw new Error('not expected');
  }
  kill(): Promise<void> {
    throw new Error('not expected');
  }
  inspect(): Promise<ContainerState> {
    throw new Error('not expected');
  }
  listByLabel(): Promise<ContainerSummary[]> {
    throw new Error('not expected');
  }
}

/** A tar as `docker export` writes it: member names without a leading slash, device dir included. */
function imageTar(marker: string): Buffer {
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'image-tree-'));
  fs.mkdirSync(path.join(tree, 'usr/bin'), { recursive: true });
  fs.mkdirSync(path.join(tree, 'dev'));
  fs.writeFileSync(path.join(tree, 'usr/bin/python3'), marker, { mode: 0o755 });
  fs.symlinkSync('usr/bin', path.join(tree, 'bin'));
  const tar = execFileSync('tar', ['-c', '-C', tree, 'usr', 'bin', 'dev']);
  fs.rmSync(tree, { recursive: true, force: true });
  return tar;
}

describe('ImageRoots', () => {
  let dir: string;
  let now: number;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'image-roots-'));
    now = 1_000_000;
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const make = (docker: DockerClient, image?: string) =>
    new ImageRoots(docker, { dir: path.join(dir, 'rootfs'), image, recheckMs: 10_000 }, () => now);

  it('exports an image once into a directory named by its id, whole, and removes the export container', async () => {
    const docker = new ExportingDocker((id) => imageTar(id));
    docker.images.set('sandbox:1', ID_A);
    const roots = make(docker, 'sandbox:1');
    const [a, b] = await Promise.all([roots.root(), roots.root()]);
    expect(a).toEqual({ image: 'sandbox:1', imageId: ID_A, dir: path.join(dir, 'rootfs', 'a'.repeat(64)) });
    expect(b).toEqual(a);
    expect(docker.created).toHaveLength(1);
    expect(docker.created[0]).toMatchObject({ Image: ID_A, NetworkDisabled: true });
    expect(docker.removed).toEqual(['c1']);
    expect(fs.readFileSync(path.join(a.dir!, 'usr/bin/python3'), 'utf8')).toBe(ID_A);
    expect(fs.readlinkSync(path.join(a.dir!, 'bin'))).toBe('usr/bin');
    // Only the finished root: no temporary directory is left beside it.
    expect(fs.readdirSync(path.join(dir, 'rootfs'))).toEqual(['a'.repeat(64)]);
    await roots.settled();
  });

  it('gives a rebuilt tag a new root once its id is checked again, and prunes roots of images Docker dropped', async () => {
    const docker = new ExportingDocker((id) => imageTar(id));
    docker.images.set('sandbox:dev', ID_A).set(ID_A, ID_A);
    const roots = make(docker, 'sandbox:dev');
    const first = await roots.root();
    await roots.settled();
    docker.images.clear();
    docker.images.set('sandbox:dev', ID_B).set(ID_B, ID_B);
    expect(await roots.root()).toEqual(first); // trusted within recheckMs
    now += 10_001;
    // Past it, the root in hand still serves while Docker is asked again; the next call has the new one.
    expect(await roots.root()).toEqual(first);
    await roots.settled();
    const second = await roots.root();
    expect(second.imageId).toBe(ID_B);
    expect(fs.readFileSync(path.join(second.dir!, 'usr/bin/python3'), 'utf8')).toBe(ID_B);
    // A new process prunes once: A is gone from Docker, so its root goes; B stays.
    const next = make(docker, 'sandbox:dev');
    await next.root();
    await next.settled();
    expect(fs.readdirSync(path.join(dir, 'rootfs'))).toEqual(['b'.repeat(64)]);
  });

  it('says why there is no root: no image named, image not built, Docker down', async () => {
    const docker = new ExportingDocker((id) => imageTar(id));
    expect((await make(docker).root()).problem).toMatch(/no sandbox image is configured or built yet/);
    expect(await make(docker, 'sandbox:none').root()).toEqual({
      image: 'sandbox:none',
      problem: 'image sandbox:none is not in the Docker engine (unix:///fake/docker.sock)',
    });
    docker.down = true;
    expect((await make(docker, 'sandbox:none').root()).problem).toMatch(
      /cannot export the root of sandbox:none: .*not answering/,
    );
  });

  it('keeps a root it made while Docker stops answering', async () => {
    const docker = new ExportingDocker((id) => imageTar(id));
    docker.images.set('sandbox:1', ID_A);
    const roots = make(docker, 'sandbox:1');
    const made = await roots.root();
    // Pruning asks Docker for the image's id; a root this process handed out stays even though Docker forgot it.
    await roots.settled();
    expect(fs.existsSync(made.dir!)).toBe(true);
    docker.down = true;
    now += 60_000;
    expect(await roots.root()).toEqual(made);
    await roots.settled();
    expect(await roots.root()).toEqual(made);
  });

  it('leaves nothing behind when the export fails, and tries again on the next call', async () => {
    let broken = true;
    const docker = new ExportingDocker((id) => (broken ? new Error('connection reset') : imageTar(id)));
    docker.images.set('sandbox:1', ID_A);
    const roots = make(docker, 'sandbox:1');
    const failed = await roots.root();
    expect(failed.dir).toBeUndefined();
    expect(failed.problem).toMatch(/cannot export the root of sandbox:1: .*connection reset/);
    expect(fs.readdirSync(path.join(dir, 'rootfs'))).toEqual([]);
    expect(docker.removed).toEqual(['c1']);
    broken = false;
    now += 10_001;
    expect((await roots.root()).dir).toBe(path.join(dir, 'rootfs', 'a'.repeat(64)));
  });
});
