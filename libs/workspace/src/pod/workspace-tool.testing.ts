import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  parseAnswer,
  type WorkspaceToolAnswer,
  type WorkspaceToolOp,
  type WorkspaceToolRequest,
} from './workspace-tool.protocol';

/** @internal Tests only: building and running the pod's workspace tool as the engine will. */

export const REPO_ROOT = path.resolve(__dirname, '../../../..');

export interface BuiltTool {
  file: string;
  bytes: number;
  inputs: string[];
}

/** `buildPodTools(REPO_ROOT, { outDir })` of scripts/build-pod-tools.mjs, in a child node (the script is ESM). */
export function buildTool(outDir: string): BuiltTool {
  const script = pathToFileURL(path.join(REPO_ROOT, 'scripts', 'build-pod-tools.mjs')).href;
  const code = `
    const { buildPodTools } = await import(${JSON.stringify(script)});
    const [built] = await buildPodTools(${JSON.stringify(REPO_ROOT)}, { outDir: ${JSON.stringify(outDir)}, quiet: true });
    process.stdout.write(JSON.stringify(built));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`buildPodTools failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as BuiltTool;
}

export interface ToolRun<O extends WorkspaceToolOp = WorkspaceToolOp> {
  answer: WorkspaceToolAnswer<O>;
  exitCode: number | null;
  stderr: string;
}

/** Runs the bundle once with `node` (default: the one running the tests), `input` on its stdin. */
export function runTool<O extends WorkspaceToolOp = WorkspaceToolOp>(
  file: string,
  input: WorkspaceToolRequest | string,
  node = process.execPath,
): Promise<ToolRun<O>> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [file], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (exitCode) => {
      try {
        if (!stdout.endsWith('\n') || stdout.indexOf('\n') !== stdout.length - 1) {
          throw new Error(`not one line on stdout (exit ${exitCode}): ${stdout.slice(0, 300)} ${stderr}`);
        }
        resolve({ answer: parseAnswer<O>(stdout), exitCode, stderr });
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    child.stdin.end(typeof input === 'string' ? input : JSON.stringify(input));
  });
}

/**
 * The sandbox image the container tiers use, as the engine's configuration finds it: `SWITCHYARD_SANDBOX_IMAGE`,
 * else the tag `npm run sandbox:image` wrote to `.runtime/sandbox-image.tag` (as libs/sandbox/test/sandbox-image.ts).
 */
export function sandboxImage(): string | undefined {
  if (process.env.SWITCHYARD_SANDBOX_IMAGE) return process.env.SWITCHYARD_SANDBOX_IMAGE;
  const tagFile = path.join(REPO_ROOT, '.runtime', 'sandbox-image.tag');
  return existsSync(tagFile) ? readFileSync(tagFile, 'utf8').trim() || undefined : undefined;
}

/** True when `docker` answers and has `image`. */
export function dockerHas(image: string): boolean {
  return spawnSync('docker', ['image', 'inspect', image], { stdio: 'ignore', timeout: 15_000 }).status === 0;
}
