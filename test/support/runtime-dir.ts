import * as path from 'node:path';

const REPO = path.join(__dirname, '..', '..');

/** Where the scripts keep what they install and run (`SWITCHYARD_RUNTIME_DIR`, default `<repo>/.runtime`). */
export const RUNTIME_DIR = process.env.SWITCHYARD_RUNTIME_DIR
  ? path.resolve(process.env.SWITCHYARD_RUNTIME_DIR)
  : path.join(REPO, '.runtime');

/** The `bin` directory of a pinned tools venv the scripts make (`contract-venv`, `client-venv`, `generator-venv`). */
export const venvBin = (venv: 'contract-venv' | 'client-venv' | 'generator-venv'): string =>
  path.join(RUNTIME_DIR, venv, 'bin');
