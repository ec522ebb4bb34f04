// Builds the web console (apps/console) into dist/console/: one ES module bundled by esbuild (Preact and
// Cytoscape.js included, minified), its stylesheet and its page. The engine serves that folder at /console.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const source = path.join(root, 'apps', 'console');
const out = path.join(root, 'dist', 'console');

export async function buildConsole() {
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [path.join(source, 'src', 'main.tsx')],
    outfile: path.join(out, 'console.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120', 'firefox120', 'safari17'],
    minify: true,
    sourcemap: 'linked',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    // The typed client reads these in Node; in the page it is given its URL and key.
    define: { 'process.env.SWITCHYARD_URL': 'undefined', 'process.env.SWITCHYARD_API_KEY': 'undefined' },
    legalComments: 'linked',
    logLevel: 'warning',
  });
  copyFileSync(path.join(source, 'src', 'console.css'), path.join(out, 'console.css'));
  copyFileSync(path.join(source, 'index.html'), path.join(out, 'index.html'));
}

if (import.meta.url === `file://${process.argv[1]}`) await buildConsole();
