// Builds the web console (apps/console) into dist/console/: its ES module bundled by esbuild (Preact and Cytoscape.js
// included, minified), the terminal pane's module (xterm.js) apart, their stylesheets and the page. The engine serves that folder at /console.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const source = path.join(root, 'apps', 'console');
const out = path.join(root, 'dist', 'console');

export async function buildConsole() {
  mkdirSync(out, { recursive: true });
  await build({
    // The page's module, and the terminal pane's xterm.js apart: it is loaded only when a terminal is shown.
    entryPoints: {
      console: path.join(source, 'src', 'main.tsx'),
      terminal: path.join(source, 'src', 'terminal', 'xterm-entry.ts'),
    },
    outdir: out,
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
  // The terminal pane's xterm.js draws with its own stylesheet.
  copyFileSync(
    path.join(root, 'node_modules', '@xterm', 'xterm', 'css', 'xterm.css'),
    path.join(out, 'xterm.css'),
  );
  copyFileSync(path.join(source, 'index.html'), path.join(out, 'index.html'));
}

if (import.meta.url === `file://${process.argv[1]}`) await buildConsole();
