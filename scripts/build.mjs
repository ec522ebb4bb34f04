// Builds the engine into dist/, the web console into dist/console/ and the client package into packages/client/dist/, and stamps them with a hash of
// their sources. With --if-changed (what `npm start` runs) it builds only when the sources changed since the last build: a rebuild wipes `dist/` first, so
// rebuilding on every start would break another engine already running from the same checkout.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import * as path from 'node:path';
import { buildConsole } from './build-console.mjs';
import { buildPodTools } from './build-pod-tools.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const stamp = path.join(root, 'dist', '.build-hash');
const inputs = [
  'apps',
  'libs',
  'bench',
  'packages',
  'tsconfig.json',
  'tsconfig.build.json',
  'nest-cli.json',
  'package-lock.json',
];

/** Every file under the build's inputs, by path, size and content. */
function hashInputs() {
  const hash = createHash('sha256');
  const walk = (p) => {
    const st = statSync(p);
    if (st.isDirectory()) {
      // A package's own build output and links are not inputs.
      for (const name of readdirSync(p).sort())
        if (name !== 'dist' && name !== 'node_modules') walk(path.join(p, name));
    } else {
      hash.update(`${path.relative(root, p)}\0${st.size}\0`);
      hash.update(readFileSync(p));
    }
  };
  for (const i of inputs) if (existsSync(path.join(root, i))) walk(path.join(root, i));
  return hash.digest('hex');
}

/**
 * The Python files under apps/ and libs/ (tools a module reads next to itself and runs with `python3 -c`, such as
 * libs/workspace/src/checkpoints/tree_tool.py), copied beside the compiled modules: tsc emits only JavaScript.
 */
function copyPythonSources() {
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'dist' || entry.name === 'node_modules') continue;
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.isFile() && entry.name.endsWith('.py')) {
        const out = path.join(root, 'dist', path.relative(root, p));
        mkdirSync(path.dirname(out), { recursive: true });
        copyFileSync(p, out);
      }
    }
  };
  for (const dir of ['apps', 'libs']) if (existsSync(path.join(root, dir))) walk(path.join(root, dir));
}

const current = hashInputs();
const previous = existsSync(stamp) ? readFileSync(stamp, 'utf8').trim() : '';
const entry = path.join(root, 'dist', 'apps', 'engine', 'src', 'main.js');
const clientEntry = path.join(root, 'packages', 'client', 'dist', 'cli.js');
const consoleEntry = path.join(root, 'dist', 'console', 'console.js');
const podToolEntry = path.join(root, 'dist', 'pod', 'workspace-tool.js');
if (
  process.argv.includes('--if-changed') &&
  current === previous &&
  existsSync(entry) &&
  existsSync(clientEntry) &&
  existsSync(consoleEntry) &&
  existsSync(podToolEntry)
) {
  console.log('[build] sources unchanged since the last build: dist/ is used as it is');
} else {
  execFileSync(path.join(root, 'node_modules', '.bin', 'nest'), ['build', 'engine'], {
    cwd: root,
    stdio: 'inherit',
  });
  copyPythonSources();
  execFileSync(
    path.join(root, 'node_modules', '.bin', 'tsc'),
    ['-p', path.join('packages', 'client', 'tsconfig.build.json')],
    { cwd: root, stdio: 'inherit' },
  );
  await buildConsole();
  // The workspace tool the Kubernetes backend runs in session pods (dist/pod/workspace-tool.js).
  await buildPodTools(root, { quiet: true });
  writeFileSync(stamp, `${current}\n`);
}
