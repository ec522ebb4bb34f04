#!/usr/bin/env node
// Builds the Switchyard sandbox image (the future `npm run sandbox:image`).
//
//   node scripts/sandbox-image.mjs               build if missing; prints the tag on stdout
//   node scripts/sandbox-image.mjs --print-tag   only compute and print the tag (no Docker needed)
//   options: --method=auto|dockerfile|debootstrap   --force (rebuild even if the tag exists)
//            --no-cache (implies --force; re-run debootstrap instead of reusing the cached rootfs,
//            e.g. to pick up newer security updates)
//   node scripts/sandbox-image.mjs --template <name>   build the template image docker/templates/<name>.toml FROM
//                                                   the default image (built first when missing); tag on stdout
//   node scripts/sandbox-image.mjs --templates         every template ("<name> <tag>" lines)
//            with --print-tag: the template's tag only; --force rebuilds the template, not the default image.
//            SWITCHYARD_TEMPLATES_DIR: another templates directory; SWITCHYARD_SANDBOX_IMAGE: another base image
//            (used as is, like the engine does). Tags: .runtime/templates/<name>.tag (see sandbox-templates.mjs).
//
// Tag: switchyard/sandbox:<first 12 hex of sha256 over every file under docker/sandbox/>, in sorted
// path order (path, executable bit and content of each), plus RECIPE below. It is also written to
// .runtime/sandbox-image.tag (and .runtime/sandbox-image.json with the sandbox uid/gid) for the engine.
//
// Build paths (see docker/README.md):
//   dockerfile   `docker build docker/sandbox`; chosen by `auto` only when the base image
//                (debian:bookworm-slim) is already present locally, since there may be no registry.
//   debootstrap  offline: debootstrap --variant=minbase --include=<packages.txt> from the Debian mirror
//                apt uses here, setup-rootfs.sh in a chroot, tar | docker import --change <the
//                Dockerfile's ENV/LABEL/USER/WORKDIR/CMD lines>. The finished rootfs tarball (without
//                runner/) is cached under .runtime/sandbox-image/ keyed by the package list, the
//                setup script, the mirror and the user ids, so a runner change only re-imports.
//
// Progress goes to stderr; stdout carries only the tag. Exit status 0 on success, 1 on failure.

import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { templateBuilder } from './sandbox-templates.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SANDBOX_DIR = path.join(REPO, 'docker', 'sandbox');
const DOCKERFILE = path.join(SANDBOX_DIR, 'Dockerfile');
const PACKAGES_FILE = path.join(SANDBOX_DIR, 'packages.txt');
const SETUP_SCRIPT = path.join(SANDBOX_DIR, 'setup-rootfs.sh');
const RUNNER_DIR = path.join(SANDBOX_DIR, 'runner');
const NPM_PIN_FILE = path.join(SANDBOX_DIR, 'npm.txt');
const RUNTIME_DIR = process.env.SWITCHYARD_RUNTIME_DIR
  ? path.resolve(process.env.SWITCHYARD_RUNTIME_DIR)
  : path.join(REPO, '.runtime');
const CACHE_DIR = path.join(RUNTIME_DIR, 'sandbox-image');
const TAG_FILE = path.join(RUNTIME_DIR, 'sandbox-image.tag');
const INFO_FILE = path.join(RUNTIME_DIR, 'sandbox-image.json');
const REPOSITORY = 'switchyard/sandbox';
const SUITE = 'bookworm';
/** Bump when this script changes how the image is assembled (changes every tag). */
const RECIPE = 'switchyard-sandbox-recipe/3';
/** The image's /etc/hosts: `localhost` resolves to the sandbox's own loopback (its background servers). */
const LOOPBACK_HOSTS = '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n';
/** Instructions `docker import --change` accepts; taken from the Dockerfile's final stage. */
const IMPORT_INSTRUCTIONS = new Set([
  'CMD',
  'ENTRYPOINT',
  'ENV',
  'EXPOSE',
  'LABEL',
  'USER',
  'VOLUME',
  'WORKDIR',
]);
const CHROOT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const log = (msg) => process.stderr.write(`[sandbox-image] ${msg}\n`);
class Failure extends Error {}
const fail = (msg) => {
  throw new Failure(msg);
};
const seconds = (t0) => `${((performance.now() - t0) / 1000).toFixed(1)}s`;

// ---------------------------------------------------------------------------------------------
// Image definition hash

function listFiles(dir, rel = '') {
  const out = [];
  for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const relPath = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...listFiles(dir, relPath));
    else out.push(relPath);
  }
  return out;
}

const byteOrder = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function definitionHash() {
  const hash = createHash('sha256');
  hash.update(`${RECIPE}\0`);
  for (const rel of listFiles(SANDBOX_DIR).sort(byteOrder)) {
    const abs = path.join(SANDBOX_DIR, rel);
    const st = fs.lstatSync(abs);
    if (st.isSymbolicLink()) {
      hash.update(`L\0${rel}\0${fs.readlinkSync(abs)}\0`);
      continue;
    }
    const content = fs.readFileSync(abs);
    hash.update(`F\0${rel}\0${st.mode & 0o111 ? 'x' : '-'}\0${content.length}\0`);
    hash.update(content);
  }
  return hash.digest('hex');
}

// ---------------------------------------------------------------------------------------------
// Dockerfile: ARG defaults, base image, and the config lines reused by `docker import --change`

function parseDockerfile() {
  const logical = [];
  let current = null;
  for (const raw of fs.readFileSync(DOCKERFILE, 'utf8').split('\n')) {
    const line = raw.replace(/\s+$/, '');
    if (current === null && (/^\s*#/.test(line) || line.trim() === '')) continue;
    const continued = line.endsWith('\\');
    const part = continued ? line.slice(0, -1) : line;
    if (current === null) current = { text: part.trim(), multiline: continued };
    else current.text += ` ${part.trim()}`;
    if (!continued) {
      logical.push(current);
      current = null;
    }
  }
  if (current) logical.push(current);

  const lastFrom = logical.findLastIndex((l) => /^FROM\s/i.test(l.text));
  if (lastFrom < 0) fail(`${DOCKERFILE}: no FROM line`);
  const baseImage = logical[lastFrom].text.split(/\s+/)[1];
  const args = {};
  const changes = [];
  for (const l of logical.slice(lastFrom + 1)) {
    const instruction = l.text.split(/\s+/, 1)[0].toUpperCase();
    if (instruction === 'ARG') {
      const m = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(.*)$/i.exec(l.text);
      if (m) args[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
    } else if (IMPORT_INSTRUCTIONS.has(instruction)) {
      if (l.multiline)
        fail(`${DOCKERFILE}: keep ${instruction} on one line (the offline build reuses it verbatim)`);
      changes.push(
        l.text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, a, b) =>
          (a ?? b) in args ? args[a ?? b] : whole,
        ),
      );
    }
  }
  return { baseImage, args, changes };
}

// ---------------------------------------------------------------------------------------------
// Processes

function run(cmd, args, { quiet = false, input, env } = {}) {
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    input,
    env: env ?? process.env,
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) {
    if (quiet) return { ok: false, stdout: '', stderr: String(r.error) };
    fail(`${cmd}: ${r.error.message}`);
  }
  return { ok: r.status === 0, stdout: r.stdout, stderr: r.stderr, status: r.status };
}

/** Runs a command with stdout+stderr appended to logFile; on failure shows its tail. */
function runLogged(cmd, args, logFile, what, env) {
  fs.appendFileSync(logFile, `\n$ ${cmd} ${args.join(' ')}\n`);
  const fd = fs.openSync(logFile, 'a');
  try {
    const r = spawnSync(cmd, args, { stdio: ['ignore', fd, fd], env: env ?? process.env });
    if (r.error) fail(`${what}: ${r.error.message}`);
    if (r.status !== 0) {
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-25).join('\n');
      process.stderr.write(`${tail}\n`);
      fail(`${what} failed (exit ${r.status ?? r.signal}); full log: ${logFile}`);
    }
  } finally {
    fs.closeSync(fd);
  }
}

const docker = (args, opts) => run('docker', args, { quiet: true, ...opts });
const imageExists = (ref) => docker(['image', 'inspect', '--format', '{{.Id}}', ref]).ok;

// ---------------------------------------------------------------------------------------------
// Debian mirror: the one apt uses on this machine

function aptSources() {
  const files = [];
  if (fs.existsSync('/etc/apt/sources.list')) files.push('/etc/apt/sources.list');
  const dir = '/etc/apt/sources.list.d';
  if (fs.existsSync(dir)) {
    for (const f of fs.readdirSync(dir).sort()) {
      if (f.endsWith('.list') || f.endsWith('.sources')) files.push(path.join(dir, f));
    }
  }
  const entries = []; // { uri, suites[], components[] }
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    if (file.endsWith('.sources')) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const fields = {};
        let key = null;
        for (const line of stanza.split('\n')) {
          if (/^\s*#/.test(line)) continue;
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m) fields[(key = m[1].toLowerCase())] = m[2];
          else if (key && /^\s/.test(line)) fields[key] += ` ${line.trim()}`;
        }
        const words = (k) => (fields[k] ?? '').split(/\s+/).filter(Boolean);
        if (!words('types').includes('deb') || (fields.enabled ?? 'yes').toLowerCase() === 'no') continue;
        for (const uri of words('uris'))
          entries.push({ uri, suites: words('suites'), components: words('components') });
      }
    } else {
      for (const line of text.split('\n')) {
        const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$/.exec(line.replace(/#.*/, ''));
        if (m) entries.push({ uri: m[1], suites: [m[2]], components: m[3].split(/\s+/).filter(Boolean) });
      }
    }
  }
  return entries;
}

function debianMirrors() {
  const entries = aptSources();
  const find = (suite) =>
    entries.find((e) => e.suites.includes(suite) && e.components.includes('main') && /^https?:/.test(e.uri))
      ?.uri;
  let mirror = process.env.SWITCHYARD_DEBIAN_MIRROR || find(SUITE);
  if (!mirror) {
    mirror = 'http://deb.debian.org/debian';
    log(
      `no '${SUITE} main' entry in apt's sources; using ${mirror} (set SWITCHYARD_DEBIAN_MIRROR to override)`,
    );
  }
  const security =
    process.env.SWITCHYARD_DEBIAN_SECURITY_MIRROR ||
    find(`${SUITE}-security`) ||
    'http://deb.debian.org/debian-security';
  return { mirror: mirror.replace(/\/+$/, ''), security: security.replace(/\/+$/, '') };
}

// ---------------------------------------------------------------------------------------------
// Tar helpers

/** Byte offset of the end-of-archive marker (first all-zero header block) of a tar file. */
function tarDataEnd(file) {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const header = Buffer.alloc(512);
    let pos = 0;
    while (pos + 512 <= size) {
      fs.readSync(fd, header, 0, 512, pos);
      if (header.every((b) => b === 0)) return pos;
      const field = header.subarray(124, 136);
      let entrySize;
      if (field[0] & 0x80) {
        entrySize = 0; // base-256 (GNU) for sizes >= 8 GiB
        for (let i = 1; i < 12; i++) entrySize = entrySize * 256 + field[i];
      } else {
        entrySize = parseInt(field.toString('latin1').replace(/\0.*$/s, '').trim() || '0', 8);
      }
      pos += 512 + Math.ceil(entrySize / 512) * 512;
    }
    fail(`${file}: no end-of-archive marker (truncated tarball?)`);
  } finally {
    fs.closeSync(fd);
  }
}

/** Unmounts anything left mounted below dir (an interrupted debootstrap mounts proc/sys), then removes it. */
function removeTree(dir) {
  if (!fs.existsSync(dir)) return;
  const mounts = fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m) => m && (m === dir || m.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) run('umount', ['-l', m], { quiet: true });
  // --one-file-system: never descend into something still mounted below dir.
  const r = run('rm', ['-rf', '--one-file-system', dir], { quiet: true });
  if (!r.ok) fail(`could not remove ${dir}: ${r.stderr.trim()}`);
}

// ---------------------------------------------------------------------------------------------
// Lock: one build at a time per runtime dir

function withLock(fn, lockName = 'lock') {
  const lockDir = path.join(CACHE_DIR, lockName);
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  for (let attempt = 0; ; attempt++) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(path.join(lockDir, 'pid'), String(process.pid));
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(path.join(lockDir, 'pid'), 'utf8').trim() || 0);
      } catch {
        pid = -1; // lock just created, pid not written yet
      }
      let alive = pid !== 0;
      try {
        if (pid > 0) process.kill(pid, 0);
      } catch {
        alive = false;
      }
      if (!alive) {
        fs.rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (attempt === 0) log(`another build (pid ${pid}) holds ${lockDir}; waiting`);
      if (attempt > 1800) fail(`timed out waiting for build lock ${lockDir}`);
      spawnSync('sleep', ['1']);
    }
  }
  const release = () => fs.rmSync(lockDir, { recursive: true, force: true });
  process.once('exit', release);
  return fn().finally(release);
}

// ---------------------------------------------------------------------------------------------
// Build paths

function buildWithDockerfile(tag, hash) {
  log(`building ${tag} with docker build (base image present locally)`);
  const t0 = performance.now();
  // --network host: the engine's dockerd runs with --bridge=none, and apt in the RUN step needs the mirror.
  const r = spawnSync(
    'docker',
    ['build', '--network', 'host', '--label', `dev.switchyard.sandbox.hash=${hash}`, '-t', tag, SANDBOX_DIR],
    { stdio: ['ignore', 2, 2], env: { ...process.env, DOCKER_CLI_HINTS: 'false' } },
  );
  if (r.error || r.status !== 0) fail(`docker build failed (exit ${r.status ?? r.error?.message})`);
  log(`docker build: ${seconds(t0)}`);
}

function ensureDebootstrap() {
  if (run('sh', ['-c', 'command -v debootstrap'], { quiet: true }).ok) return;
  if (process.getuid?.() !== 0) fail('debootstrap is not installed (apt-get install debootstrap)');
  log('installing debootstrap (apt-get install debootstrap)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'debootstrap'], {
    quiet: true,
    env,
  });
  if (!r.ok) {
    run('apt-get', ['update', '-qq'], { quiet: true, env });
    r = run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'debootstrap'], {
      quiet: true,
      env,
    });
  }
  if (!r.ok) fail(`apt-get install debootstrap failed: ${r.stderr.trim().split('\n').slice(-3).join(' ')}`);
}

/** Returns { tar, end } for the finished rootfs tarball, building and caching it if needed. */
function rootfsTarball(args, noCache) {
  const { mirror, security } = debianMirrors();
  const arch = run('dpkg', ['--print-architecture'], { quiet: true }).stdout?.trim() || 'amd64';
  const packagesText = fs.readFileSync(PACKAGES_FILE, 'utf8');
  const packages = packagesText
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean);
  if (packages.length === 0) fail(`${PACKAGES_FILE} lists no packages`);
  const user = {
    SANDBOX_USER: args.SANDBOX_USER ?? 'sandbox',
    SANDBOX_UID: args.SANDBOX_UID ?? '10001',
    SANDBOX_GID: args.SANDBOX_GID ?? '10001',
  };
  const key = createHash('sha256')
    .update(JSON.stringify({ RECIPE, SUITE, arch, mirror, security, user, packages }))
    .update(fs.readFileSync(SETUP_SCRIPT))
    .digest('hex')
    .slice(0, 16);
  const tarFile = path.join(CACHE_DIR, `rootfs-${key}.tar`);
  const metaFile = `${tarFile}.json`;
  if (!noCache && fs.existsSync(tarFile) && fs.existsSync(metaFile)) {
    const meta = JSON.parse(fs.readFileSync(metaFile, 'utf8'));
    log(`reusing cached rootfs ${path.relative(REPO, tarFile)} (built ${meta.builtAt})`);
    return { tar: tarFile, end: meta.end };
  }

  if (process.getuid?.() !== 0)
    fail('the offline (debootstrap) build needs root: run it as root or with sudo');
  ensureDebootstrap();
  const work = path.join(CACHE_DIR, `rootfs-${key}.d`);
  const logFile = path.join(CACHE_DIR, `rootfs-${key}.log`);
  removeTree(work);
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(logFile, `# rootfs ${key} ${new Date().toISOString()}\n`);
  const chrootEnv = { PATH: CHROOT_PATH, HOME: '/root', LANG: 'C.UTF-8', ...user };
  try {
    log(
      `debootstrap ${SUITE} (${arch}, minbase + ${packages.join(',')}) from ${mirror}; log: ${path.relative(REPO, logFile)}`,
    );
    let t0 = performance.now();
    runLogged(
      'debootstrap',
      ['--variant=minbase', `--arch=${arch}`, `--include=${packages.join(',')}`, SUITE, work, mirror],
      logFile,
      'debootstrap',
    );
    const debootstrapTime = seconds(t0);
    log(`debootstrap: ${debootstrapTime}`);

    // apt sources inside the image: the same mirror + updates + security (deb822, like bookworm-slim).
    fs.rmSync(path.join(work, 'etc/apt/sources.list'), { force: true });
    fs.mkdirSync(path.join(work, 'etc/apt/sources.list.d'), { recursive: true });
    fs.writeFileSync(
      path.join(work, 'etc/apt/sources.list.d/debian.sources'),
      `Types: deb\nURIs: ${mirror}\nSuites: ${SUITE} ${SUITE}-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n` +
        `Types: deb\nURIs: ${security}\nSuites: ${SUITE}-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`,
    );
    // rm first: never write through a symlink in the rootfs onto the host.
    fs.rmSync(path.join(work, 'etc/resolv.conf'), { force: true });
    fs.copyFileSync('/etc/resolv.conf', path.join(work, 'etc/resolv.conf'));
    const buildDir = path.join(work, 'tmp/sandbox-build');
    fs.mkdirSync(buildDir, { recursive: true });
    fs.copyFileSync(PACKAGES_FILE, path.join(buildDir, 'packages.txt'));
    fs.copyFileSync(SETUP_SCRIPT, path.join(buildDir, 'setup-rootfs.sh'));

    log('setup-rootfs.sh in chroot (updates, user, cleanup)');
    t0 = performance.now();
    runLogged(
      'chroot',
      [work, '/bin/sh', '/tmp/sandbox-build/setup-rootfs.sh', '/tmp/sandbox-build/packages.txt'],
      logFile,
      'setup-rootfs.sh (chroot)',
      chrootEnv,
    );
    log(`setup-rootfs.sh: ${seconds(t0)}`);
    fs.rmSync(buildDir, { recursive: true, force: true });
    // Docker provides these at run time; keep no trace of the build host. A container with networking disabled
    // (the pooled and one-off tiers) gets the image's /etc/hosts as it is: loopback names only.
    for (const f of ['etc/resolv.conf', 'etc/hostname', 'etc/hosts']) {
      fs.rmSync(path.join(work, f), { force: true });
      fs.writeFileSync(path.join(work, f), f === 'etc/hosts' ? LOOPBACK_HOSTS : '');
    }

    t0 = performance.now();
    const tmpTar = `${tarFile}.tmp`;
    runLogged(
      'tar',
      [
        '--numeric-owner',
        '-C',
        work,
        '-cf',
        tmpTar,
        '--exclude=./proc/*',
        '--exclude=./sys/*',
        '--exclude=./dev/*',
        '--exclude=./tmp/*',
        '.',
      ],
      logFile,
      'tar of rootfs',
    );
    const end = tarDataEnd(tmpTar);
    fs.writeFileSync(
      metaFile,
      JSON.stringify(
        { key, builtAt: new Date().toISOString(), end, mirror, security, arch, packages, debootstrapTime },
        null,
        2,
      ),
    );
    fs.renameSync(tmpTar, tarFile);
    log(
      `rootfs tarball ${path.relative(REPO, tarFile)} (${(fs.statSync(tarFile).size / 1e6).toFixed(0)} MB): ${seconds(t0)}`,
    );
    // Keep only the current rootfs cache.
    for (const f of fs.readdirSync(CACHE_DIR)) {
      if (/^rootfs-[0-9a-f]+\.(tar|tar\.json|log)$/.test(f) && !f.startsWith(`rootfs-${key}.`)) {
        fs.rmSync(path.join(CACHE_DIR, f), { force: true });
      }
    }
    return { tar: tarFile, end };
  } finally {
    removeTree(work);
  }
}

/** The npm version and integrity docker/sandbox/npm.txt pins. */
function npmPin() {
  const words = fs.readFileSync(NPM_PIN_FILE, 'utf8').replace(/#.*$/gm, '').trim().split(/\s+/);
  if (words.length !== 2 || !/^\d+\.\d+\.\d+$/.test(words[0]) || !words[1].startsWith('sha512-')) {
    fail(`${NPM_PIN_FILE}: expected "<version> sha512-<base64>"`);
  }
  return { version: words[0], integrity: words[1] };
}

/**
 * npm as the image holds it, staged under .runtime/sandbox-image/npm-<version>/usr/local (the registry's tarball,
 * fetched with the host's npm, checked against the pinned integrity, with npm and npx linked in bin/); reused
 * once staged. The Dockerfile path installs the same with install-npm.sh.
 */
function npmStage() {
  const { version, integrity } = npmPin();
  const stage = path.join(CACHE_DIR, `npm-${version}`);
  if (fs.existsSync(path.join(stage, '.staged'))) return stage;
  removeTree(stage);
  const download = path.join(CACHE_DIR, 'npm-download');
  fs.mkdirSync(download, { recursive: true });
  const tgz = path.join(download, `npm-${version}.tgz`);
  if (!fs.existsSync(tgz)) {
    const packed = run('npm', ['pack', `npm@${version}`, '--pack-destination', download, '--silent'], {
      quiet: true,
    });
    if (!packed.ok || !fs.existsSync(tgz)) fail(`npm pack npm@${version} failed: ${packed.stderr.trim()}`);
  }
  const digest = `sha512-${createHash('sha512').update(fs.readFileSync(tgz)).digest('base64')}`;
  if (digest !== integrity) {
    fs.rmSync(tgz, { force: true });
    fail(`npm-${version}.tgz does not match the integrity in ${NPM_PIN_FILE}`);
  }
  const moduleDir = path.join(stage, 'usr/local/lib/node_modules/npm');
  fs.mkdirSync(moduleDir, { recursive: true });
  const untar = run('tar', ['-xzf', tgz, '-C', moduleDir, '--strip-components=1', '--no-same-owner'], {
    quiet: true,
  });
  if (!untar.ok) fail(`cannot unpack npm-${version}.tgz: ${untar.stderr.trim()}`);
  const bin = path.join(stage, 'usr/local/bin');
  fs.mkdirSync(bin, { recursive: true });
  for (const [name, cli] of [
    ['npm', 'npm-cli.js'],
    ['npx', 'npx-cli.js'],
  ]) {
    fs.chmodSync(path.join(moduleDir, 'bin', cli), 0o755);
    fs.symlinkSync(`../lib/node_modules/npm/bin/${cli}`, path.join(bin, name));
  }
  fs.writeFileSync(path.join(stage, '.staged'), `${version}\n`);
  return stage;
}

/**
 * A copy of runner/ with its modules compiled (`__pycache__`, checked against each source's hash), so that no container
 * compiles them at every start (about 27 ms of CPU each, measured): the image's directory is read-only. Compiled by the
 * host's python3; a Python of another minor version than the image's writes files the image's never reads (their name
 * carries the version), and without a python3 the runner is copied as it is.
 */
function stageRunner() {
  const parent = path.join(REPO, '.runtime', 'sandbox-image', 'runner-stage');
  const stage = path.join(parent, 'runner');
  fs.rmSync(parent, { recursive: true, force: true });
  fs.mkdirSync(parent, { recursive: true });
  fs.cpSync(RUNNER_DIR, stage, { recursive: true, preserveTimestamps: true });
  const compiled = spawnSync(
    'python3',
    [
      '-I',
      '-m',
      'compileall',
      '-q',
      '--invalidation-mode',
      'checked-hash',
      '-d',
      '/opt/switchyard/runner',
      stage,
    ],
    { encoding: 'utf8' },
  );
  if (compiled.status !== 0) {
    log(
      `runner modules not compiled ahead (python3: ${(compiled.error?.message ?? compiled.stderr).trim()})`,
    );
    fs.rmSync(parent, { recursive: true, force: true });
    return SANDBOX_DIR;
  }
  return parent;
}

/** rootfs tarball (without its end marker) + runner/ at /opt/switchyard/runner and npm, piped into docker import. */
async function importImage(tag, hash, rootfs, changes) {
  const npm = npmStage();
  const allChanges = [...changes, `LABEL dev.switchyard.sandbox.hash=${hash}`];
  log(`docker import -> ${tag}`);
  const t0 = performance.now();
  const importer = spawn(
    'docker',
    [
      'import',
      '--message',
      `switchyard sandbox ${hash.slice(0, 12)} (debootstrap)`,
      ...allChanges.flatMap((c) => ['--change', c]),
      '-',
      tag,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let importerOut = '';
  importer.stdout.on('data', (d) => (importerOut += d));
  importer.stderr.on('data', (d) => (importerOut += d));
  const importerDone = new Promise((resolve) => importer.on('close', (code) => resolve(code)));
  importer.stdin.on('error', () => {}); // reported through the exit code

  // Resolves when `readable` is fully handed to docker import; rejects if docker import goes away first
  // (otherwise the unpiped source would wait forever).
  const importerGone = new Error('docker import exited early');
  const pipeFrom = (readable) =>
    new Promise((resolve, reject) => {
      const onGone = () => reject(importerGone);
      importer.stdin.once('close', onGone);
      readable.on('error', reject);
      readable.on('end', () => {
        importer.stdin.off('close', onGone);
        resolve();
      });
      readable.pipe(importer.stdin, { end: false });
    });
  let runnerTar;
  try {
    await pipeFrom(fs.createReadStream(rootfs.tar, { start: 0, end: rootfs.end - 1 }));
    const runnerParent = stageRunner();
    runnerTar = spawn(
      'tar',
      [
        '-c',
        '-f',
        '-',
        '--numeric-owner',
        '--owner=0',
        '--group=0',
        '--mode=u+rwX,go+rX,go-w',
        '--sort=name',
        '--transform',
        's,^runner,./opt/switchyard/runner,',
        '--transform',
        's,^usr,./usr,',
        '-C',
        runnerParent,
        'runner',
        '-C',
        npm,
        // Only npm's own entries: the rootfs has the directories above them, and docker import refuses a path twice.
        'usr/local/lib/node_modules',
        'usr/local/bin/npm',
        'usr/local/bin/npx',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const runnerDone = new Promise((resolve) => runnerTar.on('close', resolve));
    await pipeFrom(runnerTar.stdout);
    if ((await runnerDone) !== 0) fail('tar of docker/sandbox/runner and npm failed');
  } catch (e) {
    if (e !== importerGone) throw e;
  } finally {
    importer.stdin.end();
    if (runnerTar && runnerTar.exitCode === null) runnerTar.kill();
  }
  const code = await importerDone;
  if (code !== 0) fail(`docker import failed (exit ${code}): ${importerOut.trim()}`);
  log(`docker import: ${seconds(t0)}`);
}

// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
  const opts = { printTag: false, force: false, noCache: false, method: 'auto' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--print-tag') opts.printTag = true;
    else if (a === '--templates') opts.templates = true;
    else if (a === '--template' || a.startsWith('--template=')) {
      opts.template = a === '--template' ? argv[++i] : a.slice('--template='.length);
      if (!opts.template) fail('--template needs a name (docker/templates/<name>.toml)');
    } else if (a === '--force') opts.force = true;
    else if (a === '--no-cache') opts.noCache = opts.force = true;
    else if (a.startsWith('--method=')) opts.method = a.slice('--method='.length);
    else if (a === '-h' || a === '--help') {
      process.stdout.write(
        'usage: node scripts/sandbox-image.mjs [--print-tag] [--force] [--no-cache] [--method=auto|dockerfile|debootstrap]\n' +
          '       node scripts/sandbox-image.mjs --template <name> | --templates [--print-tag] [--force]\n',
      );
      process.exit(0);
    } else fail(`unknown argument: ${a} (see --help)`);
  }
  if (!['auto', 'dockerfile', 'debootstrap'].includes(opts.method))
    fail(`--method must be auto, dockerfile or debootstrap`);
  return opts;
}

function recordTag(tag, hash, args) {
  fs.mkdirSync(RUNTIME_DIR, { recursive: true });
  fs.writeFileSync(TAG_FILE, `${tag}\n`);
  fs.writeFileSync(
    INFO_FILE,
    `${JSON.stringify({ tag, hash, user: args.SANDBOX_USER, uid: Number(args.SANDBOX_UID), gid: Number(args.SANDBOX_GID) }, null, 2)}\n`,
  );
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.template !== undefined || opts.templates) return templatesMain(opts);
  const hash = definitionHash();
  const tag = `${REPOSITORY}:${hash.slice(0, 12)}`;
  if (opts.printTag) {
    process.stdout.write(`${tag}\n`);
    return;
  }
  await buildDefault(opts, hash, tag);
  process.stdout.write(`${tag}\n`);
}

/** The default image: found (`up to date`) or built; its tag recorded in .runtime/sandbox-image.tag. */
async function buildDefault(opts, hash, tag) {
  const { baseImage, args, changes } = parseDockerfile();
  if (!fs.existsSync(RUNNER_DIR)) fail(`${RUNNER_DIR} is missing (both build paths copy it into the image)`);

  const ping = docker(['version', '--format', '{{.Server.Version}}']);
  if (!ping.ok) fail('no Docker engine answers (start one with: bash scripts/docker-engine.sh)');

  if (!opts.force && imageExists(tag)) {
    log(`up to date: ${tag}`);
    recordTag(tag, hash, args);
    return;
  }

  const total = performance.now();
  await withLock(async () => {
    if (!opts.force && imageExists(tag)) return; // built meanwhile by another invocation
    let method = opts.method;
    if (method === 'auto') {
      method = imageExists(baseImage) ? 'dockerfile' : 'debootstrap';
      if (method === 'debootstrap')
        log(`base image ${baseImage} not present locally (no registry assumed): offline build`);
    }
    if (method === 'dockerfile') {
      if (!imageExists(baseImage))
        log(`warning: ${baseImage} is not local; docker build will try to pull it`);
      buildWithDockerfile(tag, hash);
    } else {
      const rootfs = rootfsTarball(args, opts.noCache);
      await importImage(tag, hash, rootfs, changes);
    }
  });
  if (!imageExists(tag)) fail(`build finished but ${tag} is not in the image store`);
  recordTag(tag, hash, args);
  log(`built ${tag} in ${seconds(total)}`);
}

/** `--template <name>` / `--templates`: images FROM the default one (or SWITCHYARD_SANDBOX_IMAGE), see sandbox-templates.mjs. */
async function templatesMain(opts) {
  const defaultTag = () => `${REPOSITORY}:${definitionHash().slice(0, 12)}`;
  const templates = templateBuilder({
    repo: REPO,
    runtimeDir: RUNTIME_DIR,
    log,
    fail,
    docker,
    imageExists,
    runLogged,
    withLock: (name, fn) => withLock(fn, name),
    printBaseTag: () => process.env.SWITCHYARD_SANDBOX_IMAGE || defaultTag(),
    ensureBase: async () => {
      const given = process.env.SWITCHYARD_SANDBOX_IMAGE;
      const ping = docker(['version', '--format', '{{.Server.Version}}']);
      if (!ping.ok) fail('no Docker engine answers (start one with: bash scripts/docker-engine.sh)');
      if (given) {
        if (!imageExists(given)) fail(`SWITCHYARD_SANDBOX_IMAGE=${given} is not in the Docker engine`);
        return given;
      }
      const hash = definitionHash();
      const tag = `${REPOSITORY}:${hash.slice(0, 12)}`;
      // The template is rebuilt, not the default image: --force and --no-cache apply to the template only.
      await buildDefault({ ...opts, force: false, noCache: false }, hash, tag);
      return tag;
    },
  });
  if (opts.templates) {
    const failed = await templates.all(opts);
    if (failed.length > 0) fail(`template(s) not built: ${failed.join(', ')}`);
    return;
  }
  process.stdout.write(`${await templates.one(opts.template, opts)}\n`);
}

main().catch((e) => {
  log(`ERROR: ${e instanceof Failure ? e.message : (e?.stack ?? e)}`);
  process.exit(1);
});
