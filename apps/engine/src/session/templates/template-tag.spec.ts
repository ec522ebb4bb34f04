import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { templateTag } from './template-tag';

const SCRIPT = path.join(__dirname, '../../../../../scripts/sandbox-image.mjs');

describe('templateTag', () => {
  const bytes = Buffer.from('[pip]\npackages = ["six==1.16.0"]\n');

  it('is switchyard/sandbox-<name>:<12 hex> of the recipe, name, base and file bytes', () => {
    const { tag, hash } = templateTag('tiny', 'switchyard/sandbox:aaaaaaaaaaaa', bytes);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(tag).toBe(`switchyard/sandbox-tiny:${hash.slice(0, 12)}`);
    expect(templateTag('tiny', 'switchyard/sandbox:aaaaaaaaaaaa', Buffer.from(bytes)).tag).toBe(tag);
  });

  it('changes with the file (even a comment), the base image and the name', () => {
    const { tag } = templateTag('tiny', 'switchyard/sandbox:aaaaaaaaaaaa', bytes);
    const others = [
      templateTag('tiny', 'switchyard/sandbox:aaaaaaaaaaaa', Buffer.concat([bytes, Buffer.from('# note\n')])),
      templateTag('tiny', 'switchyard/sandbox:bbbbbbbbbbbb', bytes),
      templateTag('tiny2', 'switchyard/sandbox:aaaaaaaaaaaa', bytes),
    ].map((t) => t.tag.split(':')[1]);
    for (const other of others) expect(other).not.toBe(tag.split(':')[1]);
  });

  describe('agrees with the builder (scripts/sandbox-image.mjs)', () => {
    let dir: string;
    beforeAll(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-templates-'));
    });
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

    const script = (name: string, base: string) =>
      spawnSync(process.execPath, [SCRIPT, '--print-tag', '--template', name], {
        encoding: 'utf8',
        env: { ...process.env, SWITCHYARD_TEMPLATES_DIR: dir, SWITCHYARD_SANDBOX_IMAGE: base },
      });

    it.each([
      ['tiny', '[debian]\npackages = ["jq"]\n[pip]\npackages = ["six==1.16.0"]\n[env]\nA = "b \\"c\\" $d"\n'],
      ['other-one', '# only a comment\ndescription = "ü ✓"\n'],
    ])('on the tag of %s', (name, text) => {
      fs.writeFileSync(path.join(dir, `${name}.toml`), text);
      const base = 'registry.example/team/sandbox:1.2';
      const r = script(name, base);
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe(templateTag(name, base, Buffer.from(text)).tag);
    });

    it('on an image template (used as is) and on a file it refuses', () => {
      fs.writeFileSync(path.join(dir, 'team.toml'), 'image = "registry.example/team/py:3"\n');
      expect(script('team', 'x/y:1').stdout.trim()).toBe('registry.example/team/py:3');
      fs.writeFileSync(path.join(dir, 'bad.toml'), '[pip]\npackages = ["six; rm -rf /"]\n');
      const r = script('bad', 'x/y:1');
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`${path.join(dir, 'bad.toml')}: pip.packages`);
    });
  });
});
