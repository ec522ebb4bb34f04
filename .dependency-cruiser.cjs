// @ts-check
/**
 * The import rules of the project, checked by `npm run lint` (scripts/lint-imports.mjs) over apps, libs, packages,
 * test and bench. A wrong-way import fails CI; test/lint/dependency-rules.spec.ts shows each rule catching one.
 *
 * The engine app's layers, top to bottom (ARCHITECTURE.md):
 *   composition root (apps/engine/src/*.ts) > edge > engine > gates > session > state > platform
 * A layer imports only the layers below it (and itself); nothing imports the composition root.
 */
const SRC = '^apps/engine/src/';
const LAYERS = ['edge', 'engine', 'gates', 'session', 'state', 'platform'];

/** @type {import('dependency-cruiser').IForbiddenRuleType[]} */
const layerRules = LAYERS.slice(1).map((layer, i) => ({
  name: `engine-layer-${layer}`,
  comment: `apps/engine/src/${layer} imports only the layers below it (${LAYERS.slice(i + 2).join(', ') || 'none'}).`,
  severity: 'error',
  from: { path: `${SRC}${layer}/` },
  to: { path: `${SRC}(${LAYERS.slice(0, i + 1).join('|')})/` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import circles anywhere, type-only imports included.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'engine-composition-root',
      comment:
        'main.ts, bootstrap.ts, app.module.ts and sandbox-backend.ts compose the app: no layer imports them.',
      severity: 'error',
      from: { path: `${SRC}[^/]+/` },
      to: { path: `${SRC}[^/]+\\.ts$` },
    },
    {
      name: 'engine-layer-folders',
      comment: 'Every engine file lives in a layer folder or is part of the composition root.',
      severity: 'error',
      from: { path: `${SRC}`, pathNot: `${SRC}((${LAYERS.join('|')})/|[^/]+\\.ts$)` },
      to: {},
    },
    {
      name: 'libs-not-apps',
      comment: 'A library never imports an app.',
      severity: 'error',
      from: { path: '^libs/' },
      to: { path: '^apps/' },
    },
    {
      name: 'libs-through-index',
      comment: 'A library is imported by others only through its index.ts (@switchyard/<lib>).',
      severity: 'error',
      from: { path: '^(libs|apps|packages)/([^/]+)/' },
      to: { path: '^libs/([^/]+)/src/', pathNot: ['^libs/$2/', '^libs/[^/]+/src/index\\.ts$'] },
    },
    {
      name: 'sandbox-backends-apart',
      comment: 'A sandbox backend (subprocess, docker, kubernetes) never imports another backend.',
      severity: 'error',
      from: { path: '^libs/sandbox/src/backends/([^/]+)/' },
      to: { path: '^libs/sandbox/src/backends/', pathNot: '^libs/sandbox/src/backends/$1/' },
    },
    {
      name: 'sandbox-core-not-backends',
      comment: 'The sandbox core is shared by the backends; it never imports one.',
      severity: 'error',
      from: { path: '^libs/sandbox/src/core/' },
      to: { path: '^libs/sandbox/src/backends/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist|\\.runtime)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    combinedDependencies: false,
  },
};
