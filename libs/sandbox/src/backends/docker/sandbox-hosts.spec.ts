import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SANDBOX_HOSTS, SandboxHostsFile } from './sandbox-hosts';

describe('SandboxHostsFile', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-spec-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes the loopback names into the given directory, readable by every user, and keeps it on close', () => {
    const hosts = new SandboxHostsFile(dir);
    const file = hosts.path();
    expect(file).toBe(path.join(dir, 'sandbox-hosts'));
    expect(fs.readFileSync(file, 'utf8')).toBe(SANDBOX_HOSTS);
    expect(SANDBOX_HOSTS.split('\n')).toContain('127.0.0.1\tlocalhost');
    expect(fs.statSync(file).mode & 0o777).toBe(0o644);
    hosts.close();
    expect(fs.existsSync(file)).toBe(true);
    expect(fs.readdirSync(dir)).toEqual(['sandbox-hosts']); // no temporary file left
  });

  it('rewrites a file that was changed or removed', () => {
    const hosts = new SandboxHostsFile(dir);
    const file = hosts.path();
    fs.writeFileSync(file, '10.0.0.1 localhost\n');
    expect(fs.readFileSync(new SandboxHostsFile(dir).path(), 'utf8')).toBe(SANDBOX_HOSTS);
    fs.rmSync(file);
    expect(fs.readFileSync(hosts.path(), 'utf8')).toBe(SANDBOX_HOSTS);
  });

  it('without a directory, makes a private one and removes it on close', () => {
    const hosts = new SandboxHostsFile();
    const file = hosts.path();
    expect(path.dirname(file).startsWith(path.join(os.tmpdir(), 'switchyard-hosts-'))).toBe(true);
    hosts.close();
    expect(fs.existsSync(path.dirname(file))).toBe(false);
  });
});
