// Throughput of the embedded graph with durable (synchronous=FULL) commits: N concurrent clients, each
// looping start + complete. Run: npx ts-node -r tsconfig-paths/register --transpile-only \
//   libs/context-graph/bench/group-commit.bench.ts [clients=16] [seconds=5] [dir=os.tmpdir()]
// Prints group commit against one transaction per write (maxBatchSize 1); compare the ratio, not the numbers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteContextGraph } from '../src';

const [clients = 16, seconds = 5] = process.argv.slice(2, 4).map(Number);
const baseDir = process.argv[4] ?? tmpdir();

async function run(maxBatchSize: number): Promise<{ perSecond: number; meanBatch: number }> {
  const dir = mkdtempSync(join(baseDir, 'graph-bench-'));
  const graph = new SqliteContextGraph({ sqlitePath: join(dir, 'graph.sqlite'), maxBatchSize });
  await graph.init();
  const stdout = 'x'.repeat(1024);
  let actions = 0;
  const deadline = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const sessionId = `s${c}`;
      await graph.recordSession({
        id: sessionId,
        tenant: 'bench',
        createdAt: new Date().toISOString(),
        metadata: {},
      });
      for (let i = 0; Date.now() < deadline; i++) {
        const id = `${sessionId}-a${i}`;
        const startedAt = new Date().toISOString();
        const risk = { score: 5, level: 'low' as const, reasons: [] };
        await graph.recordActionStarted({
          ...{ id, sessionId, type: 'code', operation: 'python', tier: 'subprocess', risk, startedAt },
          ...{ input: { code: `print(${i})` }, inputSummary: `print(${i})`, inputHash: 'f'.repeat(64) },
        });
        const endedAt = new Date().toISOString();
        await graph.recordActionCompleted(id, {
          ...{ status: 'succeeded', endedAt, durationMs: 1, tier: 'subprocess', risk, exitCode: 0 },
          ...{ outputExcerpt: stdout.slice(0, 256), files: [{ path: `out${i % 10}.txt`, access: 'write' }] },
          result: {
            ...{ id, sessionId, type: 'code', status: 'succeeded', exitCode: 0, stdout, stderr: '' },
            ...{ truncated: { stdout: false, stderr: false }, durationMs: 1, startedAt, endedAt },
            ...{ tier: 'subprocess', risk },
          },
        });
        actions++;
      }
    }),
  );
  const { transactions, writes } = graph.writeStats();
  await graph.close();
  rmSync(dir, { recursive: true, force: true });
  return { perSecond: actions / seconds, meanBatch: writes / transactions };
}

async function main(): Promise<void> {
  const grouped = await run(500);
  const single = await run(1);
  const fmt = (r: { perSecond: number; meanBatch: number }): string =>
    `${Math.round(r.perSecond)} actions/s (mean batch ${r.meanBatch.toFixed(1)} writes)`;
  console.log(`${clients} clients, ${seconds}s each, synchronous=FULL, dir ${baseDir}`);
  console.log(`group commit:         ${fmt(grouped)}`);
  console.log(`one commit per write: ${fmt(single)}`);
  console.log(`ratio: ${(grouped.perSecond / single.perSecond).toFixed(1)}x`);
}

void main();
