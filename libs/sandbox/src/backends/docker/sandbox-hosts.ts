import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The /etc/hosts of one-off containers. They are created with `NetworkDisabled`, which skips Docker's network setup
 * (the cheapest way to a network namespace holding only `lo`, about 100 ms less per run than `NetworkMode: none`)
 * but leaves /etc/hosts empty: `localhost` would not resolve, and code that names it (a server on `localhost`, a
 * proxy setting) would fail. This file, bound read-only over it, names loopback as Docker's own file does.
 */
export const SANDBOX_HOSTS = [
  '127.0.0.1\tlocalhost',
  '::1\tlocalhost ip6-localhost ip6-loopback',
  'fe00::0\tip6-localnet',
  'ff00::0\tip6-mcastprefix',
  'ff02::1\tip6-allnodes',
  'ff02::2\tip6-allrouters',
  '',
].join('\n');

export const HOSTS_TARGET = '/etc/hosts';

/**
 * Keeps the hosts file on the host, where the Docker daemon binds it from: in `dir` when given (a directory the daemon
 * sees at the same path, as it sees the workspaces), else in a private directory made under the OS temp dir and
 * removed by `close`. Written once, on first use, by renaming a complete file into place, so engines sharing `dir`
 * never bind a half-written one.
 */
export class SandboxHostsFile {
  private file?: string;
  private ownDir?: string;

  constructor(private readonly dir?: string) {}

  /** The file's host path, written if missing or different. Throws when it cannot be written. */
  path(): string {
    if (this.file !== undefined && fs.existsSync(this.file)) return this.file;
    const dir = this.dir ?? (this.ownDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-hosts-')));
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'sandbox-hosts');
    if (readOrUndefined(file) !== SANDBOX_HOSTS) {
      const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
      fs.writeFileSync(tmp, SANDBOX_HOSTS);
      fs.chmodSync(tmp, 0o644); // whatever the umask: the sandbox user reads it
      fs.renameSync(tmp, file);
    }
    this.file = file;
    return file;
  }

  /** Removes the private directory, if one was made. */
  close(): void {
    if (this.ownDir !== undefined) fs.rmSync(this.ownDir, { recursive: true, force: true });
    this.ownDir = undefined;
    this.file = undefined;
  }
}

function readOrUndefined(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
