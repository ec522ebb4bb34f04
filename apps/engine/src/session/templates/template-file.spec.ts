import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseTemplateFile, TemplateFileError } from './template-file';

const TINY = `
description = "tiny"
[debian]
packages = ["jq", "libgomp1=12.2.0-14"]
[pip]
packages = ["six==1.16.0", "requests[socks]>=2.31,<3", "numpy"]
[npm]
packages = ["is-number@7.0.0", "@types/node@^20", "left-pad"]
[env]
MPLBACKEND = "Agg"
GREETING = "hello \\"world\\" $HOME"
`;

describe('parseTemplateFile', () => {
  it('reads packages, env and the description', () => {
    expect(parseTemplateFile('tiny', TINY)).toEqual({
      name: 'tiny',
      description: 'tiny',
      packages: {
        debian: ['jq', 'libgomp1=12.2.0-14'],
        pip: ['six==1.16.0', 'requests[socks]>=2.31,<3', 'numpy'],
        npm: ['is-number@7.0.0', '@types/node@^20', 'left-pad'],
      },
      env: { MPLBACKEND: 'Agg', GREETING: 'hello "world" $HOME' },
    });
  });

  it('takes empty tables and an image used as is', () => {
    expect(parseTemplateFile('empty', '')).toEqual({
      name: 'empty',
      description: '',
      packages: { debian: [], pip: [], npm: [] },
      env: {},
    });
    expect(
      parseTemplateFile('team', 'image = "registry.example/team/sandbox:1.2"\n[env]\nA = "1"'),
    ).toMatchObject({
      image: 'registry.example/team/sandbox:1.2',
      env: { A: '1' },
    });
  });

  it('reads the shipped data-science template', () => {
    const file = path.join(__dirname, '../../../../../docker/templates/data-science.toml');
    const def = parseTemplateFile('data-science', fs.readFileSync(file, 'utf8'));
    expect(def.packages.pip).toEqual(
      expect.arrayContaining(['numpy==2.1.3', 'pandas==2.2.3', 'matplotlib==3.9.2']),
    );
    // Every Python package pinned, so a rebuild gives the same versions.
    for (const p of def.packages.pip) expect(p).toMatch(/^[A-Za-z0-9._-]+==[0-9.]+$/);
    expect(def.env).toEqual({ MPLBACKEND: 'Agg' });
  });

  it.each([
    ['Bad_Name', '', /name "Bad_Name"/],
    ['x', 'description = ', /not valid TOML/],
    ['x', 'packages = ["jq"]', /unknown key "packages"/],
    ['x', '[pip]\npkgs = ["six"]', /unknown key "pkgs" in \[pip\]/],
    ['x', '[debian]\npackages = "jq"', /debian.packages must be an array/],
    ['x', `[debian]\npackages = ["jq; rm -rf /"]`, /not a debian package spec/],
    ['x', `[pip]\npackages = ["six --index-url http://evil"]`, /not a pip package spec/],
    ['x', `[pip]\npackages = ["-r requirements.txt"]`, /not a pip package spec/],
    ['x', `[npm]\npackages = ["$(id)"]`, /not a npm package spec/],
    ['x', `[pip]\npackages = [1]`, /not a pip package spec/],
    ['x', `image = "a/b:1"\n[pip]\npackages = ["six"]`, /image template is used as is.*\[pip\]/],
    ['x', `image = "no spaces allowed"`, /image must be an image reference/],
    ['x', `[env]\nPATH = "/evil"`, /env.PATH: .*not allowed/],
    ['x', `[env]\nLD_PRELOAD = "/x.so"`, /env.LD_PRELOAD/],
    ['x', `[env]\nPYTHONPATH = "/x"`, /env.PYTHONPATH/],
    ['x', `[env]\nA = "two\\nlines"`, /env.A must be one line/],
    ['x', `[env]\nA = 1`, /env.A must be a string/],
    ['x', `description = "a\\tb"`, /description must be one line/],
  ])('refuses %s: %s', (name, text, message) => {
    expect(() => parseTemplateFile(name, text)).toThrow(TemplateFileError);
    expect(() => parseTemplateFile(name, text)).toThrow(message);
  });
});
