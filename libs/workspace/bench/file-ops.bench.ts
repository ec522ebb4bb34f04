// Latency of the file API itself (no HTTP, no graph): `FileOperations.execute` against a real temp dir.
// Run: npx ts-node -r tsconfig-paths/register --transpile-only \
//   libs/workspace/bench/file-ops.bench.ts [iterations=3000] [clients=16] [dir=os.tmpdir()]
// Prints, for a 5-byte write and a read of it: the median and p99 of one caller in a loop, then the
// throughput and median latency with `clients` concurrent callers, each on its own workspace (the shape
// of the engine bench). `--files=N` pre-fills each workspace with N small files, to show what a usage
// walk per write would cost on a workspace that is not empty.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileOperations, resolveWorkspaceOptions } from '../src';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const flags = new Map(
  process.argv
    .slice(2)
    .filter((a) => a.startsWith('--'))
    .map((a) => a.slice(2).split('=') as [string, string]),
);
const iterations = Number(args[0] ?? 3000);
const clients = Number(args[1] ?? 16);
const baseDir = args[2] ?? tmpdir();
const prefill = Number(flags.get('files') ?? 0);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fmt = (n: number) => `${(n * 1000).toFixed(0).padStart(5)} µs`;

async function main(): Promise<void> {
  const root = mkdtempSync(join(baseDir, 'fileops-bench-'));
  const ops = new FileOperations(resolveWorkspaceOptions({ root, sandboxUid: null }));
  const workspace = (i: number) => {
    const ws = join(root, `s${i}`);
    mkdirSync(ws, { mode: 0o700 });
    for (let f = 0; f < prefill; f++) {
      if (f % 100 === 0) mkdirSync(join(ws, `d${f / 100}`));
      writeFileSync(join(ws, `d${Math.floor(f / 100)}`, `f${f}`), 'x'.repeat(100));
    }
    return ws;
  };
  try {
    // 1. One caller: write then read, each timed on its own.
    const ws = workspace(0);
    const writes: number[] = [];
    const reads: number[] = [];
    for (let i = 0; i < iterations; i++) {
      let t0 = performance.now();
      await ops.execute(ws, { op: 'write', path: 'a.txt', content: 'hello' });
      writes.push(performance.now() - t0);
      t0 = performance.now();
      const r = await ops.execute(ws, { op: 'read', path: 'a.txt' });
      reads.push(performance.now() - t0);
      if (r.output.content !== 'hello') throw new Error('read back the wrong content');
    }
    const skip = Math.min(200, iterations >> 2); // JIT warm-up
    const w = writes.slice(skip);
    const r = reads.slice(skip);
    console.log(
      `one caller, ${iterations} write+read pairs${prefill ? `, ${prefill} files in the workspace` : ''}`,
    );
    console.log(`  write  median ${fmt(median(w))}   p99 ${fmt(pct(w, 99))}`);
    console.log(`  read   median ${fmt(median(r))}   p99 ${fmt(pct(r, 99))}`);

    // 2. `clients` concurrent callers alternating write and read, each on its own workspace.
    const spaces = Array.from({ length: clients }, (_, i) => workspace(i + 1));
    const lat: { write: number[]; read: number[] } = { write: [], read: [] };
    const perClient = Math.max(1, Math.floor(iterations / 2));
    const t0 = performance.now();
    await Promise.all(
      spaces.map(async (space, c) => {
        for (let n = 0; n < perClient; n++) {
          const op =
            n % 2 === 0
              ? ({ op: 'write', path: `f${c}.txt`, content: `v${n}` } as const)
              : ({ op: 'read', path: `f${c}.txt` } as const);
          const s = performance.now();
          await ops.execute(space, op);
          lat[op.op].push(performance.now() - s);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const total = clients * perClient;
    console.log(`${clients} concurrent callers, ${total} actions`);
    console.log(`  throughput ${(total / seconds).toFixed(0)} actions/s`);
    console.log(`  write  median ${fmt(median(lat.write))}   p99 ${fmt(pct(lat.write, 99))}`);
    console.log(`  read   median ${fmt(median(lat.read))}   p99 ${fmt(pct(lat.read, 99))}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
