import { InvalidInputError, systemClock } from '@switchyard/common';
import type { DockerClient } from '@switchyard/sandbox';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Session } from '../../state/sessions/session.model';
import { SessionTemplates } from './session-templates';
import { TemplateRegistry } from './template-registry';
import { templateTag } from './template-tag';

/** Knows the images the test says were built; `down` makes it fail like an unreachable engine. */
class FakeDocker {
  readonly images = new Set<string>();
  down = false;
  imageExists(ref: string): Promise<boolean> {
    if (this.down) return Promise.reject(new Error('connect ENOENT /var/run/docker.sock'));
    return Promise.resolve(this.images.has(ref));
  }
}

const TINY = '[debian]\npackages = ["jq"]\n[env]\nTINY = "1"\n';
const BASE = 'switchyard/sandbox:base00000000';

describe('TemplateRegistry and SessionTemplates', () => {
  let root: string;
  let dir: string;
  let docker: FakeDocker;
  let registry: TemplateRegistry;
  let templates: SessionTemplates;
  const session = (template?: string): Session =>
    ({ id: 'ses_1', network: { allow: [] }, ...(template && { template }) }) as unknown as Session;
  const tagOf = (text: string, base = BASE) => templateTag('tiny', base, Buffer.from(text)).tag;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-session-templates-'));
    dir = path.join(root, 'templates');
    fs.mkdirSync(dir);
    fs.mkdirSync(path.join(root, 'state'));
    fs.writeFileSync(path.join(dir, 'tiny.toml'), TINY);
    fs.writeFileSync(path.join(root, 'sandbox-image.tag'), `${BASE}\n`);
    docker = new FakeDocker();
    const config = {
      sandbox: { imageTagFile: path.join(root, 'sandbox-image.tag') },
      templates: {
        dir,
        stateDir: path.join(root, 'state'),
        buildCommand: (name: string) => `build ${name}`,
      },
      kubernetes: { backend: 'docker' },
    } as unknown as EngineConfig;
    registry = new TemplateRegistry(config, docker as unknown as DockerClient, systemClock);
    templates = new SessionTemplates(registry, config);
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('leaves a session without a template alone', () => {
    expect(templates.routing(session())).toEqual({});
    expect(templates.routing(session(), 'container')).toEqual({ minTier: 'container' });
  });

  it('raises every session to the pooled floor on the Kubernetes backend (its workspace is in its pod)', () => {
    const k8s = new SessionTemplates(registry, {
      kubernetes: { backend: 'kubernetes' },
    } as unknown as EngineConfig);
    expect(k8s.routing(session())).toEqual({
      minTier: 'pooled',
      floorReason: expect.stringContaining('own pod'),
    });
    expect(k8s.routing(session(), 'subprocess').minTier).toBe('pooled');
    expect(k8s.routing(session(), 'container')).toEqual({ minTier: 'container' });
  });

  it('hands every tier the image its file calls for, with the env, and no floor of its own', () => {
    const routing = templates.routing(session('tiny'));
    expect(routing).toEqual({ template: 'tiny', image: { ref: tagOf(TINY), env: { TINY: '1' } } });
    // A retry's floor stays, and is the retry's to explain.
    const retry = templates.routing(session('tiny'), 'container');
    expect(retry.minTier).toBe('container');
    expect(retry.floorReason).toBeUndefined();
  });

  it('says missing, ready, stale as Docker and the last build say', async () => {
    const entry = () => registry.entry('tiny')!;
    expect(await registry.view(entry())).toMatchObject({
      name: 'tiny',
      kind: 'packages',
      state: 'missing',
      image: tagOf(TINY),
      build: 'build tiny',
      packages: { debian: ['jq'], pip: [], npm: [] },
      env: { TINY: '1' },
    });
    docker.images.add(tagOf(TINY));
    fs.writeFileSync(path.join(root, 'state', 'tiny.tag'), `${tagOf(TINY)}\n`);
    const ready = await registry.view(entry());
    expect(ready.state).toBe('ready');
    expect(ready.build).toBeUndefined();

    const edited = `${TINY}# edited\n`;
    fs.writeFileSync(path.join(dir, 'tiny.toml'), edited);
    expect(await registry.view(entry())).toMatchObject({
      state: 'stale',
      image: tagOf(edited),
      builtImage: tagOf(TINY),
      build: 'build tiny',
    });
    const denial = await templates.notReady(templates.routing(session('tiny')));
    expect(denial).toMatchObject({ class: 'policy', code: 'TEMPLATE_NOT_READY' });
    expect(denial!.message).toContain('changed since the last build');
    expect(denial!.message).toContain('`build tiny`');

    docker.down = true;
    expect(await registry.view(entry())).toMatchObject({ state: 'unknown' });
    // Docker not answering is the tier's to refuse (TIER_UNAVAILABLE), not a template problem.
    expect(await templates.notReady(templates.routing(session('tiny')))).toBeUndefined();
  });

  it('follows the default image: a new base calls for a new build', async () => {
    docker.images.add(tagOf(TINY));
    expect(await templates.notReady(templates.routing(session('tiny')))).toBeUndefined();
    fs.writeFileSync(path.join(root, 'sandbox-image.tag'), 'switchyard/sandbox:base11111111\n');
    expect(templates.routing(session('tiny')).image!.ref).toBe(
      tagOf(TINY, 'switchyard/sandbox:base11111111'),
    );
    expect(await templates.notReady(templates.routing(session('tiny')))).toMatchObject({
      code: 'TEMPLATE_NOT_READY',
    });
  });

  it('refuses the actions of a session whose template file is gone or broken', async () => {
    fs.writeFileSync(path.join(dir, 'tiny.toml'), '[pip]\npackages = ["six; id"]\n');
    expect(await registry.view(registry.entry('tiny')!)).toMatchObject({ state: 'invalid', image: null });
    expect(templates.routing(session('tiny')).denial).toMatchObject({ code: 'TEMPLATE_NOT_READY' });
    fs.rmSync(path.join(dir, 'tiny.toml'));
    const gone = templates.routing(session('tiny'));
    expect(gone.minTier).toBeUndefined();
    expect(gone.denial!.message).toContain('its file is gone');
  });

  it('uses an image template as is', async () => {
    fs.writeFileSync(path.join(dir, 'team.toml'), 'image = "registry.example/team/sb:1.2"\n');
    expect(templates.routing(session('team')).image!.ref).toBe('registry.example/team/sb:1.2');
    expect(await registry.view(registry.entry('team')!)).toMatchObject({
      kind: 'image',
      state: 'missing',
      build: 'docker pull registry.example/team/sb:1.2',
    });
  });

  it('lets sessions name only a usable template (400 on `template`)', () => {
    expect(registry.require('tiny').name).toBe('tiny');
    for (const name of ['nope', '../tiny', 'TINY']) {
      try {
        registry.require(name);
        throw new Error('accepted');
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidInputError);
        expect((err as InvalidInputError).field).toBe('template');
        expect((err as Error).message).toContain('"tiny"');
      }
    }
    expect(registry.names()).toEqual(['tiny']);
  });
});
