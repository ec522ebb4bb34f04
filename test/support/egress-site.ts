import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Stand-ins for the internet, on this machine's loopback only (port 80 of their own addresses): a package index
 * serving a wheel built here, a git repository over HTTP ("dumb" protocol: static files), a plain site, and a host
 * that redirects to the cloud metadata address. The engine reaches them under names mapped by
 * `SWITCHYARD_EGRESS_RESOLVE` (a test-only setting; loopback is otherwise refused).
 */
export class EgressSite {
  static readonly PACKAGE = 'hello-switchyard';
  static readonly MODULE = 'hello_switchyard';
  static readonly HOSTS = {
    'pypi.test': '127.0.0.11',
    'git.test': '127.0.0.12',
    'other.test': '127.0.0.13',
    'redirect.test': '127.0.0.14',
  } as const;

  private constructor(
    private readonly servers: http.Server[],
    private readonly dir: string,
    readonly requests: string[],
  ) {}

  /** `SWITCHYARD_EGRESS_RESOLVE` for the engine under test. */
  static get resolveSetting(): string {
    return Object.entries(EgressSite.HOSTS)
      .map(([name, address]) => `${name}=${address}`)
      .join(',');
  }

  static async start(): Promise<EgressSite> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-egress-site-'));
    const wheel = buildWheel(dir);
    const repo = buildRepo(dir);
    const requests: string[] = [];
    const wheelName = path.basename(wheel);
    const sha = createHash('sha256').update(fs.readFileSync(wheel)).digest('hex');
    const handlers: Record<keyof typeof EgressSite.HOSTS, http.RequestListener> = {
      'pypi.test': (req, res) => {
        if (req.url === `/simple/${EgressSite.PACKAGE}/`) {
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end(`<html><body><a href="/files/${wheelName}#sha256=${sha}">${wheelName}</a></body></html>`);
        } else if (req.url === `/files/${wheelName}`) {
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          res.end(fs.readFileSync(wheel));
        } else if (req.url === '/simple/') {
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end(`<a href="/simple/${EgressSite.PACKAGE}/">${EgressSite.PACKAGE}</a>`);
        } else {
          res.writeHead(404).end('not here\n');
        }
      },
      'git.test': (req, res) => {
        const rel = decodeURIComponent((req.url ?? '/').split('?')[0]).replace(/^\/repo\.git/, '');
        const file = path.join(repo, rel);
        if (!file.startsWith(repo) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200).end(fs.readFileSync(file));
      },
      'other.test': (_req, res) => res.writeHead(200).end('other site\n'),
      'redirect.test': (_req, res) =>
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end(),
    };
    const servers: http.Server[] = [];
    for (const [name, address] of Object.entries(EgressSite.HOSTS)) {
      const handler = handlers[name as keyof typeof EgressSite.HOSTS];
      const server = http.createServer((req, res) => {
        requests.push(`${name} ${req.method} ${req.url}`);
        handler(req, res);
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(80, address, () => resolve());
      });
      servers.push(server);
    }
    return new EgressSite(servers, dir, requests);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A pure-python wheel, written with the host's python3 (zipfile): `hello_switchyard.greet()`. */
export function buildWheel(dir: string): string {
  const script = `
import base64, hashlib, sys, zipfile
out = sys.argv[1]
files = {
  "hello_switchyard/__init__.py": "def greet():\\n    return 'hello from a wheel'\\n",
  "hello_switchyard-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: hello-switchyard\\nVersion: 0.1\\n",
  "hello_switchyard-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: switchyard-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(out, "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append("hello_switchyard-0.1.dist-info/RECORD,,")
    z.writestr("hello_switchyard-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")
`;
  const wheel = path.join(dir, 'hello_switchyard-0.1-py3-none-any.whl');
  execFileSync('/usr/bin/python3', ['-c', script, wheel]);
  return wheel;
}

/** A bare repository with one commit, prepared for the dumb HTTP protocol. */
function buildRepo(dir: string): string {
  const work = path.join(dir, 'work');
  const bare = path.join(dir, 'repo.git');
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, {
      cwd,
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@t',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@t',
      },
    });
  fs.mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(work, 'README.md'), 'cloned through the egress proxy\n');
  git(work, 'add', '.');
  git(work, 'commit', '-q', '-m', 'first');
  git(dir, 'clone', '-q', '--bare', work, bare);
  git(bare, 'update-server-info');
  return bare;
}
