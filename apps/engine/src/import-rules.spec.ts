import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The import rules of `.dependency-cruiser.cjs` (run by `npm run lint`) catch each kind of wrong-way import: a tree
 * of fixture files in a temp dir, shaped like the project, is cruised with the project's own rule file.
 */
const ROOT = path.resolve(__dirname, '..', '..', '..');
const DEPCRUISE = path.join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

function violations(files: Record<string, string>): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-import-rules-'));
  try {
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { baseUrl: '.', paths: { '@switchyard/*': ['libs/*/src'] } } }),
    );
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
    const tops = [...new Set(Object.keys(files).map((f) => f.split('/')[0]))];
    const run = spawnSync(
      process.execPath,
      [DEPCRUISE, ...tops, '--config', path.join(ROOT, '.dependency-cruiser.cjs'), '--output-type', 'json'],
      { cwd: dir, encoding: 'utf8' },
    );
    if (run.status !== 0 && !run.stdout) throw new Error(`dependency-cruiser failed: ${run.stderr}`);
    const result = JSON.parse(run.stdout) as { summary: { violations: Violation[] } };
    return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const E = 'apps/engine/src';

describe('import rules (.dependency-cruiser.cjs)', () => {
  it('lets a layer import the layers below it, and the composition root import any layer', () => {
    expect(
      violations({
        [`${E}/platform/config/a.ts`]: 'export const a = 1;\n',
        [`${E}/state/b.ts`]: "import { a } from '../platform/config/a';\nexport const b = a;\n",
        [`${E}/session/c.ts`]: "import { b } from '../state/b';\nexport const c = b;\n",
        [`${E}/gates/d.ts`]: "import { c } from '../session/c';\nexport const d = c;\n",
        [`${E}/engine/e.ts`]: "import { d } from '../gates/d';\nexport const e = d;\n",
        [`${E}/edge/f.ts`]: "import { e } from '../engine/e';\nexport const f = e;\n",
        [`${E}/app.module.ts`]: "import { f } from './edge/f';\nexport const g = f;\n",
      }),
    ).toEqual([]);
  });

  it('fails an import running back up a layer, type-only imports included', () => {
    expect(
      violations({
        [`${E}/edge/api.ts`]: 'export type Api = { x: number };\n',
        [`${E}/engine/run.ts`]: 'export const run = 1;\n',
        [`${E}/session/s.ts`]: "import type { Api } from '../edge/api';\nexport type S = Api;\n",
        [`${E}/state/store.ts`]: "import { run } from '../engine/run';\nexport const store = run;\n",
      }),
    ).toEqual([
      `engine-layer-session: ${E}/session/s.ts -> ${E}/edge/api.ts`,
      `engine-layer-state: ${E}/state/store.ts -> ${E}/engine/run.ts`,
    ]);
  });

  it('fails a layer importing the composition root, and a file outside the layer folders', () => {
    expect(
      violations({
        [`${E}/bootstrap.ts`]: 'export const boot = 1;\n',
        [`${E}/edge/x.ts`]: "import { boot } from '../bootstrap';\nexport const x = boot;\n",
        [`${E}/misc/y.ts`]: "import { boot } from '../bootstrap';\nexport const y = boot;\n",
      }),
    ).toEqual([
      `engine-composition-root: ${E}/edge/x.ts -> ${E}/bootstrap.ts`,
      `engine-composition-root: ${E}/misc/y.ts -> ${E}/bootstrap.ts`,
      `engine-layer-folders: ${E}/misc/y.ts -> ${E}/bootstrap.ts`,
    ]);
  });

  it('fails a circle, even inside one layer', () => {
    expect(
      violations({
        [`${E}/engine/a.ts`]: "import type { B } from './b';\nexport type A = { b?: B };\n",
        [`${E}/engine/b.ts`]: "import type { A } from './a';\nexport type B = { a?: A };\n",
      }),
    ).toEqual([`no-circular: ${E}/engine/a.ts -> ${E}/engine/b.ts`]);
  });

  it('keeps libraries off the apps, off each other’s insides, and sandbox backends apart', () => {
    expect(
      violations({
        [`${E}/platform/p.ts`]: 'export const p = 1;\n',
        'libs/common/src/index.ts': "export { inner } from './inner';\n",
        'libs/common/src/inner.ts': 'export const inner = 1;\n',
        'libs/sandbox/src/index.ts': 'export const s = 1;\n',
        'libs/sandbox/src/app-user.ts': `import { p } from '../../../${E}/platform/p';\nexport const u = p;\n`,
        'libs/sandbox/src/deep.ts':
          "import { inner } from '../../common/src/inner';\nexport const d = inner;\n",
        'libs/sandbox/src/through-index.ts':
          "import { inner } from '@switchyard/common';\nexport const t = inner;\n",
        'libs/sandbox/src/backends/docker/box.ts': 'export const box = 1;\n',
        'libs/sandbox/src/backends/kubernetes/pod.ts':
          "import { box } from '../docker/box';\nexport const pod = box;\n",
        'libs/sandbox/src/core/lease.ts':
          "import { box } from '../backends/docker/box';\nexport const lease = box;\n",
      }),
    ).toEqual([
      `libs-not-apps: libs/sandbox/src/app-user.ts -> ${E}/platform/p.ts`,
      'libs-through-index: libs/sandbox/src/deep.ts -> libs/common/src/inner.ts',
      'sandbox-backends-apart: libs/sandbox/src/backends/kubernetes/pod.ts -> libs/sandbox/src/backends/docker/box.ts',
      'sandbox-core-not-backends: libs/sandbox/src/core/lease.ts -> libs/sandbox/src/backends/docker/box.ts',
    ]);
  });

  it('finds no violation in the project itself', () => {
    const run = spawnSync(
      process.execPath,
      [
        DEPCRUISE,
        'apps',
        'libs',
        'packages',
        'test',
        'bench',
        '--config',
        '.dependency-cruiser.cjs',
        '--output-type',
        'err',
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(run.stdout).toContain('no dependency violations found');
    expect(run.status).toBe(0);
  });
});
