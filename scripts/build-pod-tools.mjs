// Builds the tools the engine runs inside a session's pod (the Kubernetes backend) into dist/pod/:
// workspace-tool.js, the whole workspace file API (libs/workspace/src/pod/workspace-tool.ts and what it imports)
// as one self-contained CommonJS file for the sandbox image's own `node` (Debian bookworm's nodejs, 18.x), and
// file-transfer.py, the file transfer API's reads, writes and tars (copied as is too). The
// pod's runner writes it to a small tmpfs and runs it, so it must stay small: no Nest (its decorators resolve to
// no-ops, nest-shim.ts), no reflect-metadata (esbuild emits no decorator metadata), no source maps, minified.
//
//   node scripts/build-pod-tools.mjs [--out <dir>]     (default dist/pod)
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The sandbox image's node (`docker run --rm --entrypoint node <image> --version`: v18.20.4 on bookworm). */
export const POD_NODE_TARGET = 'node18';

/**
 * Bundles the pod tools of the checkout at `root` into `outDir` (default `<root>/dist/pod`). Resolves to what
 * was written: `[{ file, bytes, inputs }]`, `inputs` being the source files bundled (relative to `root`).
 */
export async function buildPodTools(
  root = REPO,
  { outDir = path.join(root, 'dist', 'pod'), quiet = false } = {},
) {
  const source = path.join(root, 'libs', 'workspace', 'src', 'pod');
  mkdirSync(outDir, { recursive: true });
  const outfile = path.join(outDir, 'workspace-tool.js');
  const result = await build({
    absWorkingDir: root,
    entryPoints: [path.join(source, 'workspace-tool.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: POD_NODE_TARGET,
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    // The `@switchyard/*` paths (and experimentalDecorators) come from the repo's tsconfig.
    tsconfig: path.join(root, 'tsconfig.json'),
    // `@nestjs/common` becomes the no-op shim; any other package would be a surprise (size, native code).
    plugins: [podImports(root, path.join(source, 'nest-shim.ts'))],
    metafile: true,
    logLevel: 'warning',
  });
  const inputs = Object.keys(result.metafile.inputs).sort();
  const bytes = statSync(outfile).size;
  if (!quiet) {
    const shown = outfile.startsWith(`${root}/`) ? path.relative(root, outfile) : outfile;
    console.log(`[build-pod-tools] ${shown}: ${(bytes / 1024).toFixed(1)} KiB (${inputs.length} modules)`);
  }
  // The file transfer API's side in the pod (reads, writes and tars streamed over an exec), copied the same way.
  const transferSource = path.join(source, 'file-transfer.py');
  const transferFile = path.join(outDir, 'file-transfer.py');
  copyFileSync(transferSource, transferFile);
  return [
    { file: outfile, bytes, inputs },
    { file: transferFile, bytes: statSync(transferFile).size, inputs: [path.relative(root, transferSource)] },
  ];
}

/** `@nestjs/common` → `shim`; Node's built-ins and `@switchyard/*` as usual; any other package an error. */
function podImports(root, shim) {
  return {
    name: 'pod-imports',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path === '@nestjs/common') return { path: shim };
        if (args.path.startsWith('node:') || args.path.startsWith('@switchyard/')) return undefined;
        if (builtinModules.includes(args.path)) return undefined;
        return {
          errors: [
            {
              text: `${args.path} (imported by ${path.relative(root, args.importer)}) is a package: the pod tools bundle none`,
            },
          ],
        };
      });
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const at = process.argv.indexOf('--out');
  await buildPodTools(REPO, at === -1 ? {} : { outDir: path.resolve(process.argv[at + 1]) });
}
