import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { rootCertificates } from 'node:tls';
import { ConfigError } from '../config/config-error';
import { sandboxCaFiles, writeSandboxCa } from './sandbox-ca';

describe('sandbox CA files', () => {
  let dir: string;
  // Any real certificate stands in for an operator's CA.
  const operatorCa = rootCertificates[0];
  const problem = (fn: () => void): string => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ConfigError) return `${err.problems[0].variable}: ${err.problems[0].message}`;
      throw err;
    }
    throw new Error('expected a ConfigError');
  };

  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-sandbox-ca-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('are none without an operator file, and under the data dir otherwise', () => {
    expect(sandboxCaFiles('/data', undefined)).toBeUndefined();
    expect(sandboxCaFiles('/data', '/etc/corp/ca.pem')).toEqual({
      bundle: '/data/sandbox-ca/ca-bundle.pem',
      extra: '/data/sandbox-ca/extra-ca.pem',
    });
  });

  it("write the operator's certificates alone, and the system bundle followed by them, readable by any uid", () => {
    const system = path.join(dir, 'system.pem');
    fs.writeFileSync(system, 'SYSTEM ROOTS\n');
    const caFile = path.join(dir, 'corp.pem');
    fs.writeFileSync(caFile, `a comment the tools would not need\n${operatorCa}\n`);
    const files = sandboxCaFiles(path.join(dir, 'data'), caFile)!;
    writeSandboxCa(caFile, files, [path.join(dir, 'absent.pem'), system]);
    expect(fs.readFileSync(files.extra, 'utf8')).toBe(`${operatorCa}\n`);
    expect(fs.readFileSync(files.bundle, 'utf8')).toBe(`SYSTEM ROOTS\n${operatorCa}\n`);
    expect(fs.statSync(files.bundle).mode & 0o777).toBe(0o644);
    expect(fs.statSync(path.dirname(files.bundle)).mode & 0o777).toBe(0o755);
  });

  it("fall back to Node's roots when the host has no system bundle", () => {
    const caFile = path.join(dir, 'corp.pem');
    fs.writeFileSync(caFile, operatorCa);
    const files = sandboxCaFiles(dir, caFile)!;
    writeSandboxCa(caFile, files, [path.join(dir, 'absent.pem')]);
    const bundle = fs.readFileSync(files.bundle, 'utf8');
    expect(bundle.startsWith(rootCertificates[0])).toBe(true);
    expect(bundle.endsWith(`${operatorCa}\n`)).toBe(true);
  });

  it('stop start-up naming the variable for a missing file, no certificate, or one that cannot be read', () => {
    const files = sandboxCaFiles(dir, '/x')!;
    expect(problem(() => writeSandboxCa(path.join(dir, 'absent.pem'), files))).toMatch(
      /^SWITCHYARD_SANDBOX_CA_FILE: .*absent\.pem: ENOENT/,
    );
    const empty = path.join(dir, 'empty.pem');
    fs.writeFileSync(empty, 'no certificate here\n');
    expect(problem(() => writeSandboxCa(empty, files))).toContain('holds no PEM certificate');
    const broken = path.join(dir, 'broken.pem');
    fs.writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nnot base64 der\n-----END CERTIFICATE-----\n');
    expect(problem(() => writeSandboxCa(broken, files))).toContain('certificate 1 cannot be read');
    expect(fs.existsSync(files.bundle)).toBe(false);
  });
});
