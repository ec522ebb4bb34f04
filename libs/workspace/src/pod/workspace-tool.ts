/**
 * The pod's workspace tool, entry point (bundled by `scripts/build-pod-tools.mjs` into `dist/pod/workspace-tool.js`
 * and run by the session pod's runner as `node workspace-tool.js`, as the sandbox user): reads all of stdin (one
 * JSON `WorkspaceToolRequest`), writes one JSON `WorkspaceToolAnswer` and a newline on stdout. Exit code 0
 * whenever it answered, a refused op included; anything else (a crash, a kill) means no answer. Nothing goes to
 * stderr unless it crashed. See `workspace-tool.protocol.ts`.
 *
 * Stdin and stdout are read and written with plain fd calls, not `process.stdin`/`process.stdout`: their stream
 * machinery costs a cold process a few milliseconds to load, and one request and one answer need none of it.
 */
import { readSync, writeSync } from 'node:fs';
import { handleRequest } from './workspace-tool.ops';
import { serializeError, type WorkspaceToolAnswer, WorkspaceToolError } from './workspace-tool.protocol';

const CHUNK = 64 * 1024;

/** All of fd 0 until EOF. */
function readStdin(): string {
  const chunks: Buffer[] = [];
  for (;;) {
    const buf = Buffer.allocUnsafe(CHUNK);
    let n: number;
    try {
      n = readSync(0, buf, 0, CHUNK, null);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
        waitBriefly(); // a non-blocking pipe with nothing in it yet
        continue;
      }
      if ((err as NodeJS.ErrnoException).code === 'EOF') break;
      throw err;
    }
    if (n === 0) break;
    chunks.push(buf.subarray(0, n));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** All of `text` to fd 1, however the pipe takes it. */
function writeStdout(text: string): void {
  const data = Buffer.from(text, 'utf8');
  for (let done = 0; done < data.length;) {
    try {
      done += writeSync(1, data, done, data.length - done);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      waitBriefly(); // a non-blocking pipe that is full: the reader catches up
    }
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function waitBriefly(): void {
  Atomics.wait(sleeper, 0, 0, 1);
}

async function main(): Promise<void> {
  let answer: WorkspaceToolAnswer;
  try {
    let request: unknown;
    try {
      request = JSON.parse(readStdin());
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      throw new WorkspaceToolError('BAD_REQUEST', `the request is not JSON: ${err.message}`);
    }
    answer = await handleRequest(request);
  } catch (err) {
    answer = { ok: false, error: serializeError(err) };
  }
  writeStdout(`${JSON.stringify(answer)}\n`);
}

main().catch((err: unknown) => {
  writeSync(2, `workspace tool: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
