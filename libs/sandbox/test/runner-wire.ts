import { PassThrough } from 'node:stream';
import { RunnerConnection, type RunnerConnectionOptions } from '../src/core/runner/runner-connection';

/**
 * Both ends of a runner connection whose runner is the test: what the engine wrote (each non-empty line, parsed),
 * and ways to answer as the runner (`reply` a message, `write` raw text).
 */
export function runnerWire(options?: RunnerConnectionOptions) {
  const toRunner = new PassThrough();
  const fromRunner = new PassThrough();
  let close!: () => void;
  const closed = new Promise<void>((resolve) => (close = resolve));
  const sent: Array<Record<string, unknown>> = [];
  let buffered = '';
  toRunner.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) if (line) sent.push(JSON.parse(line) as Record<string, unknown>);
  });
  const connection = new RunnerConnection(
    { stdin: toRunner, stdout: fromRunner, closed, close: () => close() },
    options,
  );
  const reply = (message: Record<string, unknown>) => fromRunner.write(`${JSON.stringify(message)}\n`);
  const write = (text: string) => fromRunner.write(text);
  const settle = () => new Promise((r) => setImmediate(r));
  /** The first message the engine sent that matches, waiting up to a second for it. */
  const until = async (match: (m: Record<string, unknown>) => boolean) => {
    for (let i = 0; i < 500; i++) {
      const found = sent.find(match);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 2));
    }
    throw new Error(`the engine never sent it; it sent ${JSON.stringify(sent)}`);
  };
  return { connection, sent, reply, write, settle, until, close, toRunner, fromRunner };
}
