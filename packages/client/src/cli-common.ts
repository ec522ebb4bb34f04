import { fstatSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { SwitchyardClient } from './client';

/** A command line the CLI does not accept: usage on stderr, exit 2. */
export class UsageError extends Error {}

export type Out = (text: string | Uint8Array) => void;
export const out: Out = (text) => process.stdout.write(text);
export const err: Out = (text) => process.stderr.write(text);

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T) {
  try {
    return parseArgs({
      args,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
    });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

/** Left-aligned columns separated by two spaces. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return (
    [head, ...rows]
      .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  '))
      .join('\n') + '\n'
  );
}

/** Runs `body` in the given session, or in a new one deleted afterwards. */
export async function withSession(
  client: SwitchyardClient,
  given: string | undefined,
  body: (sessionId: string) => Promise<number>,
): Promise<number> {
  if (given !== undefined) return body(given);
  const session = await client.sessions.create({ metadata: { agent: 'switchyard-cli' } });
  try {
    return await body(session.id);
  } finally {
    await client.sessions.delete(session.id).catch(() => undefined);
  }
}

/**
 * Whether our stdin is something the user gave us to read: a pipe (`echo hi | switchyard …`) or a file (`< in.txt`).
 * A terminal, /dev/null or a socket an outer program left open (a spawn's default) are not, so nothing waits on them.
 */
export function stdinIsGiven(): boolean {
  try {
    const stat = fstatSync(0);
    return stat.isFIFO() || stat.isFile();
  } catch {
    return false;
  }
}

/** All of stdin as text, refusing more than `maxBytes` (the engine caps a program's stdin too). */
export async function readStdin(maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += buffer.length;
    if (size > maxBytes)
      throw new UsageError(
        `stdin is over ${maxBytes} bytes; write the input to a file with "files cp" instead`,
      );
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
