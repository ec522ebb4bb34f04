import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { err, out, parse, table, UsageError } from './cli-common';
import type { SwitchyardClient } from './client';
import { Files, type TransferInfo } from './sandbox-files';

export const FILES_HELP = `usage: switchyard files cp SRC DST
       switchyard files ls SID [PATH] [-r] [--json]
       switchyard files cat SID PATH

cp copies between this machine and a session's workspace, one side written SID:PATH (PATH relative to the
workspace; "SID:" is its root). A local directory goes up as a tar and is extracted at PATH; a workspace directory
comes down as a tar extracted into the local path. A local "-" is stdin (up) or stdout (down, files only). Both
directions stream: any size up to the workspace quota. A local path with a colon is written ./like:this.
ls lists a directory (default the root; -r recursively); cat writes a file's bytes to stdout.
`;

/** `SID:path` names a workspace path; a path starting with / or . is local whatever it holds (as `docker cp`). */
function remote(arg: string): { sessionId: string; path: string } | undefined {
  if (arg.startsWith('/') || arg.startsWith('.')) return undefined;
  const match = /^([A-Za-z0-9_-]+):(.*)$/.exec(arg);
  return match ? { sessionId: match[1], path: match[2] } : undefined;
}

const describe = (info: TransferInfo): string =>
  info.kind === 'file'
    ? `${info.size} bytes`
    : `${info.files} files, ${info.directories} directories, ${info.bytes} bytes`;

export async function files(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    recursive: { type: 'boolean', short: 'r' },
    json: { type: 'boolean' },
  });
  const [sub, ...rest] = positionals;
  if (sub === 'cp' && rest.length === 2) return cp(client, rest[0], rest[1]);
  if (sub === 'ls' && (rest.length === 1 || rest.length === 2)) {
    const entries = await new Files(client, rest[0]).list(rest[1] ?? '', { recursive: values.recursive });
    if (values.json) out(`${JSON.stringify(entries, null, 2)}\n`);
    else
      out(
        table(
          ['TYPE', 'SIZE', 'PATH'],
          entries.map((e) => [e.type, String(e.size), e.path]),
        ),
      );
    return 0;
  }
  if (sub === 'cat' && rest.length === 2) {
    const body = await new Files(client, rest[0]).read(rest[1], { format: 'stream' });
    await pipeline(Readable.fromWeb(body), process.stdout, {
      end: false,
    });
    return 0;
  }
  throw new UsageError('expected "files cp SRC DST", "files ls SID [PATH]" or "files cat SID PATH"');
}

async function cp(client: SwitchyardClient, src: string, dst: string): Promise<number> {
  const from = remote(src);
  const to = remote(dst);
  if ((from === undefined) === (to === undefined))
    throw new UsageError('cp copies between a local path and SID:PATH: exactly one side is remote');
  if (to) {
    const sandboxFiles = new Files(client, to.sessionId);
    if (src === '-') {
      if (to.path === '') throw new UsageError('cp - SID:PATH needs the file path to write');
      const info = await sandboxFiles.write(to.path, process.stdin);
      err(`stdin → ${to.sessionId}:${info.path} (${info.size} bytes, sha256 ${info.sha256})\n`);
      return 0;
    }
    const info = await sandboxFiles.upload(src, to.path);
    err(`${src} → ${to.sessionId}:${info.path || '.'} (${describe(info)})\n`);
    return 0;
  }
  const source = from!;
  const sandboxFiles = new Files(client, source.sessionId);
  if (dst === '-') {
    const body = await sandboxFiles.read(source.path, { format: 'stream' });
    await pipeline(Readable.fromWeb(body), process.stdout, {
      end: false,
    });
    return 0;
  }
  const info = await sandboxFiles.download(source.path, dst);
  err(`${source.sessionId}:${source.path || '.'} → ${dst} (${describe(info)})\n`);
  return 0;
}
