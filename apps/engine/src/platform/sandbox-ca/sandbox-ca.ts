import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rootCertificates } from 'node:tls';
import type { TrustedCaFiles } from '@switchyard/sandbox';
import { ConfigError } from '../config/config-error';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';

const VARIABLE = 'SWITCHYARD_SANDBOX_CA_FILE';

/** Where distributions keep the system's CA bundle; the first that exists is the one sandboxes already trust. */
const SYSTEM_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
];

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * Where the sandboxes' copy of the operator's CAs lives (the same path in every tier), or `undefined` when none is
 * configured. Pure: the files are written by `writeSandboxCa`, once at boot.
 */
export function sandboxCaFiles(dataDir: string, caFile: string | undefined): TrustedCaFiles | undefined {
  if (caFile === undefined) return undefined;
  const dir = path.join(dataDir, 'sandbox-ca');
  return { bundle: path.join(dir, 'ca-bundle.pem'), extra: path.join(dir, 'extra-ca.pem') };
}

/**
 * Reads the operator's PEM file and writes the sandboxes' two files: its certificates alone (`extra`, for Node), and
 * the system bundle followed by them (`bundle`, for the tools that replace the system roots). The system bundle is
 * this host's (the first of `systemBundles` that exists), else Node's own Mozilla roots. A file that cannot be read
 * or holds no valid certificate stops start-up naming the variable.
 */
export function writeSandboxCa(
  caFile: string,
  files: TrustedCaFiles,
  systemBundles: readonly string[] = SYSTEM_BUNDLES,
): void {
  let text: string;
  try {
    text = fs.readFileSync(caFile, 'utf8');
  } catch (err) {
    throw new ConfigError([{ variable: VARIABLE, message: `${caFile}: ${(err as Error).message}` }]);
  }
  const certificates = text.match(PEM_CERTIFICATE) ?? [];
  if (certificates.length === 0) {
    throw new ConfigError([
      { variable: VARIABLE, message: `${caFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)` },
    ]);
  }
  certificates.forEach((pem, i) => {
    try {
      new X509Certificate(pem);
    } catch (err) {
      throw new ConfigError([
        {
          variable: VARIABLE,
          message: `${caFile}: certificate ${i + 1} cannot be read: ${(err as Error).message}`,
        },
      ]);
    }
  });
  const system = systemBundles.find((p) => fs.existsSync(p));
  const roots = system ? fs.readFileSync(system, 'utf8') : rootCertificates.join('\n');
  const extra = `${certificates.join('\n')}\n`;
  fs.mkdirSync(path.dirname(files.bundle), { recursive: true, mode: 0o755 });
  // The sandbox user (another uid) reads them through the data dir, which it may traverse but not list.
  fs.chmodSync(path.dirname(files.bundle), 0o755);
  writeReadable(files.extra, extra);
  writeReadable(files.bundle, `${roots.trimEnd()}\n${extra}`);
}

/** Replaces `file` whole (a sandbox never reads half of it), readable by every uid. */
function writeReadable(file: string, text: string): void {
  const temp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temp, text, { mode: 0o644 });
  fs.chmodSync(temp, 0o644);
  fs.renameSync(temp, file);
}

/** Token of the boot-time write (its value: the files sandboxes see, or `undefined` without an operator's file). */
export const SANDBOX_CA_WRITTEN = Symbol('SANDBOX_CA_WRITTEN');

/**
 * Writes the sandboxes' CA files when the engine starts: as a provider of the composition root, it runs before any
 * module's start-up hook, so before a tier launches the first sandbox that binds them.
 */
export const sandboxCaWrite = {
  provide: SANDBOX_CA_WRITTEN,
  useFactory: (config: EngineConfig): TrustedCaFiles | undefined => {
    const files = sandboxCaFiles(config.dataDir, config.network.sandboxCaFile);
    if (files) writeSandboxCa(config.network.sandboxCaFile!, files);
    return files;
  },
  inject: [ENGINE_CONFIG],
};
