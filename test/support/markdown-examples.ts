import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/** Fence languages whose blocks are shell examples a reader would paste into a terminal. */
export const SHELL_LANGUAGES = ['sh', 'bash', 'shell', 'console'] as const;

/** `<!-- example: not run (reason) -->` on the line before a fence: the block is shown, not run, and says why. */
const NOT_RUN = /^<!-- example: not run \((.+)\) -->$/;

export interface ShellExample {
  /** Where it is, as `docs/foo.md:12` (the fence's line). */
  readonly where: string;
  readonly language: string;
  /** What bash runs: the block's text, or for a `console` block its `$ ` lines without the prompt. */
  readonly script: string;
  /** The reason given by a not-run marker; undefined when the block is to be run. */
  readonly notRun?: string;
  /** What the block's `# → …` comments show of the output. */
  readonly expected: { readonly keys: string[]; readonly strings: Array<[key: string, value: string]> };
}

/** README.md and every docs/*.md, relative to the repository root. */
export function documentationFiles(root: string): string[] {
  const docs = readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/** Markers that sit anywhere but right before a shell fence: a typo there would silently run nothing. */
export function strayMarkers(root: string, file: string): string[] {
  const lines = readFileSync(path.join(root, file), 'utf8').split('\n');
  const stray: string[] = [];
  let inFence = false;
  lines.forEach((line, i) => {
    if (line.startsWith('```')) inFence = !inFence;
    if (inFence || !line.startsWith('<!-- example')) return;
    const fence = /^```(\w*)/.exec(lines[i + 1] ?? '');
    const shell = fence && (SHELL_LANGUAGES as readonly string[]).includes(fence[1]);
    if (!NOT_RUN.test(line) || !shell) stray.push(`${file}:${i + 1}: ${line}`);
  });
  return stray;
}

export function shellExamples(root: string, file: string): ShellExample[] {
  const lines = readFileSync(path.join(root, file), 'utf8').split('\n');
  const out: ShellExample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    if (end < 0) throw new Error(`${file}:${i + 1}: unclosed fence`);
    const body = lines.slice(i + 1, end);
    if ((SHELL_LANGUAGES as readonly string[]).includes(open[1])) {
      const script =
        open[1] === 'console'
          ? body
              .filter((l) => l.startsWith('$ '))
              .map((l) => l.slice(2))
              .join('\n')
          : body.join('\n');
      out.push({
        where: `${file}:${i + 1}`,
        language: open[1],
        script,
        notRun: NOT_RUN.exec(lines[i - 1] ?? '')?.[1],
        expected: expectedOutput(body),
      });
    }
    i = end;
  }
  return out;
}

/**
 * The keys and string values a `# → {…}` comment shows. `…` stands for what varies (ids, times), so a value holding
 * one is not checked; numbers depend on the machine and the session, so only their keys are.
 */
function expectedOutput(body: string[]): ShellExample['expected'] {
  const keys = new Set<string>();
  const strings: Array<[string, string]> = [];
  for (const line of body) {
    const shown = /#\s*→\s*(.*)$/.exec(line)?.[1];
    if (!shown) continue;
    for (const m of shown.matchAll(/"(\w+)":/g)) keys.add(m[1]);
    for (const m of shown.matchAll(/"(\w+)":"((?:[^"\\]|\\.)*)"/g)) {
      if (!m[2].includes('…')) strings.push([m[1], m[2]]);
    }
  }
  return { keys: [...keys], strings };
}
