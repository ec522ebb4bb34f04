/**
 * Terminals (issue 32): keystroke echo latency through a terminal's WebSocket, against a raw PTY in the same run.
 *
 *   - engine: a terminal of a session (its pooled container) running `stty raw -echo; cat`; one character is sent as a
 *     binary WebSocket frame and timed until it comes back in an output frame (engine → runner over the container's
 *     attached stdio → the PTY → cat → back the same way).
 *   - raw PTY: in the same container, a Python process opens a PTY (`pty.fork`) running the same command and times
 *     one character written to the master until cat's echo is read back: the floor any terminal in that sandbox has.
 *     It stays up and is asked for one sample per stdin line, so its samples interleave with the engine's.
 *
 * Prints the median, p90 and p99 of each with their run counts and the ratio; target: the engine's p99 <= 20 ms.
 * Called by `run.ts` (`BENCH_ONLY=terminals`); `node dist/bench/terminals.js` runs it alone.
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import WebSocket from 'ws';
import { startEngine } from './engine-client';
import { median, ms, pct } from './stats';

/** What runs in the terminal on both sides: every byte read is written back at once, by a process. */
const ECHO_COMMAND = 'stty raw -echo; printf READY; exec cat';
const TARGET_P99_MS = 20;

/** The raw side, inside the container: a PTY of its own, one timed keystroke per stdin line. */
const RAW_DRIVER = `
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp('bash', ['bash', '--noprofile', '--norc', '-c', ${JSON.stringify(ECHO_COMMAND)}])
seen = b''
while b'READY' not in seen:
    seen += os.read(fd, 1024)
print('ready', flush=True)
for line in sys.stdin:
    key = line.strip().encode()
    t = time.perf_counter()
    os.write(fd, key)
    got = b''
    while key not in got:
        got += os.read(fd, 1024)
    print((time.perf_counter() - t) * 1000, flush=True)
`;

/** One terminal client over `ws`: `key(c)` resolves with the ms from sending `c` to seeing it come back. */
async function engineSide(url: string): Promise<{ key(c: string): Promise<number>; close(): void }> {
  const ws = new WebSocket(url);
  let output = '';
  let waiting: (() => void) | undefined;
  ws.on('message', (data: Buffer) => {
    output += data.toString('latin1');
    waiting?.();
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const until = (ready: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      if (ready()) return resolve();
      waiting = () => {
        if (!ready()) return;
        waiting = undefined;
        resolve();
      };
    });
  await until(() => output.includes('READY'));
  return {
    key: async (c: string) => {
      output = '';
      const t0 = performance.now();
      ws.send(Buffer.from(c, 'latin1'), { binary: true });
      await until(() => output.includes(c));
      return performance.now() - t0;
    },
    close: () => ws.close(),
  };
}

/** The raw driver in the container (`docker exec -i`): `key(c)` is one sample timed inside it. */
async function rawSide(container: string): Promise<{ key(c: string): Promise<number>; close(): void }> {
  const driver = spawn('docker', ['exec', '-i', container, 'python3', '-u', '-c', RAW_DRIVER], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: driver.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error('bench: the raw PTY driver ended');
    return line.value;
  };
  if ((await next()) !== 'ready') throw new Error('bench: the raw PTY driver did not start');
  return {
    key: async (c: string) => {
      driver.stdin.write(`${c}\n`);
      return Number(await next());
    },
    close: () => driver.stdin.end(),
  };
}

export async function benchTerminals(options: { runs: number }): Promise<void> {
  const samples = Math.max(200, options.runs * 5);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-terminals-'));
  const engine = await startEngine(dataDir, { SWITCHYARD_POOL_MIN: '1' });
  try {
    console.log('\nTerminals: keystroke echo, one character to `cat` in raw mode and back');
    const pooled = await engine.health('pooled');
    if (!pooled.available) {
      console.log(`  skipped: the pooled tier is unavailable (${pooled.reason ?? 'unknown'})`);
      return;
    }
    const sid = await engine.newSession();
    const container = await engine.sandboxOf(sid, await engine.print1(sid, 'pooled'));
    const opened = await engine.call('POST', `/v1/sessions/${sid}/terminals`, { command: ECHO_COMMAND });
    if (opened?.tier !== 'pooled') throw new Error(`bench: terminal not opened: ${JSON.stringify(opened)}`);
    const base = (engine.app.getHttpServer() as { address(): { port: number } }).address().port;
    const viaEngine = await engineSide(`ws://127.0.0.1:${base}${opened.wsPath}?token=${opened.token}`);
    const raw = await rawSide(container);
    const times = { engine: [] as number[], raw: [] as number[] };
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    for (let i = 0; i < samples + 10; i++) {
      const c = letters[i % letters.length];
      const e = await viaEngine.key(c);
      const r = await raw.key(c);
      // The first ten warm both paths up (the runner's reader, the driver's loop).
      if (i < 10) continue;
      times.engine.push(e);
      times.raw.push(r);
    }
    viaEngine.close();
    raw.close();
    const line = (name: string, xs: number[]) =>
      `  ${name.padEnd(40)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;
    console.log(line('raw PTY in the container (python pty)', times.raw));
    console.log(line('through the engine (WebSocket)', times.engine));
    for (const [what, p] of [
      ['median', 50],
      ['p90', 90],
      ['p99', 99],
    ] as const) {
      const e = pct(times.engine, p);
      const r = pct(times.raw, p);
      console.log(`  ${what.padEnd(6)} engine − raw = ${ms(e - r)}   (${(e / r).toFixed(1)}x)`);
    }
    const p99 = pct(times.engine, 99);
    console.log(
      `  engine p99 = ${ms(p99)} (target <= ${TARGET_P99_MS} ms) ${p99 <= TARGET_P99_MS ? 'OK' : 'MISSED'}`,
    );
    await engine.call('DELETE', `/v1/sessions/${sid}/terminals/${opened.id}`);
    await engine.endSession(sid);
  } finally {
    await engine.app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchTerminals({ runs: Number(process.env.BENCH_RUNS ?? 40) }).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
