// Sandbox templates: images FROM the default sandbox image with a template's packages and environment
// (docker/templates/<name>.toml). Used by scripts/sandbox-image.mjs (`--template <name>`, `--templates`); see
// docker/README.md for the file format.
//
// Tag: switchyard/sandbox-<name>:<first 12 hex of sha256 over TEMPLATE_RECIPE, the name, the base image reference and
// the template file's bytes>. The engine computes the same tag (apps/engine/src/session/templates/template-tag.ts) to tell a
// template's build state; keep the two in step (a unit test runs both).
//
// Build: `docker run --network host --user 0:0` of the base image with the generated install script (and the host's
// CA bundle, for package indexes behind a TLS-inspecting proxy) bind-mounted read-only, then `docker commit` with the
// base image's USER, CMD and WORKDIR restored and the template's ENV and labels. Bind mounts are never part of a
// commit, so the final image holds neither the script nor the CA file. The classic builder (no BuildKit here) could
// only COPY them into a layer.

import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Bump when the install script or the commit changes what a template image holds (changes every template tag). */
export const TEMPLATE_RECIPE = 'switchyard-template-recipe/1';
export const TEMPLATE_REPOSITORY_PREFIX = 'switchyard/sandbox-';

/** npm for `[npm]` packages (the image has Debian's node, not npm), verified against the registry's integrity. */
const NPM_VERSION = '10.9.2';
const NPM_INTEGRITY =
  'sha512-iriPEPIkoMYUy3F6f3wwSZAU93E0Eg6cHwIR6jzzOXWSy+SD/rOODEs74cVONHKSx2obXtuUoyidVEhISrisgQ==';

/** CA bundles of the host tried in order (SWITCHYARD_BUILD_CA_FILE first); the image's own is used without one. */
const HOST_CA_FILES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt'];

// The rules below match apps/engine/src/session/templates/template-file.ts (the engine also refuses env names a caller may
// not set); a file one accepts and the other refuses would have no usable tag.
const NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const IMAGE_REF = /^[\w][\w.\-/:@]*$/;
const PACKAGE_PATTERNS = {
  debian: /^[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+~:-]+)?$/,
  pip: /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?(?:(?:===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+(?:,(?:===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+)*)?$/,
  npm: /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*(?:@[A-Za-z0-9.^~<>=*+-]+)?$/,
};
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_PACKAGES = 256;
const MAX_PACKAGE_CHARS = 214;
const MAX_ENV = 64;
const MAX_ENV_VALUE_BYTES = 4096;
const MAX_DESCRIPTION = 300;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Parses and checks one template file; throws an Error whose message names what is wrong (not the file). */
export function parseTemplate(name, text, parseToml) {
  if (!NAME.test(name))
    throw new Error(`the name "${name}" must be lower-case letters, digits and inner dashes (at most 63)`);
  let doc;
  try {
    doc = parseToml(text);
  } catch (e) {
    throw new Error(`not valid TOML: ${String(e.message).split('\n')[0]}`);
  }
  const known = new Set(['description', 'image', 'debian', 'pip', 'npm', 'env']);
  for (const key of Object.keys(doc)) if (!known.has(key)) throw new Error(`unknown key "${key}"`);
  const description = doc.description ?? '';
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION || CONTROL.test(description))
    throw new Error(`description must be one line of text, at most ${MAX_DESCRIPTION} characters`);
  const packages = {};
  for (const kind of ['debian', 'pip', 'npm']) {
    const table = doc[kind] ?? {};
    if (typeof table !== 'object' || Array.isArray(table) || table instanceof Date)
      throw new Error(`[${kind}] must be a table`);
    for (const key of Object.keys(table))
      if (key !== 'packages') throw new Error(`unknown key "${key}" in [${kind}]`);
    const list = table.packages ?? [];
    if (!Array.isArray(list) || list.length > MAX_PACKAGES)
      throw new Error(`${kind}.packages must be an array of at most ${MAX_PACKAGES} strings`);
    for (const p of list) {
      if (typeof p !== 'string' || p.length > MAX_PACKAGE_CHARS || !PACKAGE_PATTERNS[kind].test(p))
        throw new Error(`${kind}.packages: ${JSON.stringify(p)} is not a ${kind} package spec`);
    }
    packages[kind] = [...list];
  }
  const env = doc.env ?? {};
  if (typeof env !== 'object' || Array.isArray(env) || env instanceof Date)
    throw new Error('[env] must be a table of strings');
  const entries = Object.entries(env);
  if (entries.length > MAX_ENV) throw new Error(`[env] has more than ${MAX_ENV} entries`);
  for (const [key, value] of entries) {
    if (!ENV_KEY.test(key)) throw new Error(`env.${key}: the name must match ${ENV_KEY.source}`);
    if (typeof value !== 'string') throw new Error(`env.${key} must be a string`);
    if (CONTROL.test(value) || Buffer.byteLength(value) > MAX_ENV_VALUE_BYTES)
      throw new Error(
        `env.${key} must be one line without control characters, at most ${MAX_ENV_VALUE_BYTES} bytes`,
      );
  }
  const image = doc.image;
  if (image !== undefined) {
    if (typeof image !== 'string' || image.length > 255 || !IMAGE_REF.test(image))
      throw new Error('image must be an image reference like registry.example/team/sandbox:1.2');
    const listed = Object.entries(packages).filter(([, l]) => l.length > 0);
    if (listed.length > 0)
      throw new Error(
        `an image template is used as is: remove the [${listed.map(([k]) => k).join('], [')}] packages or the image`,
      );
  }
  return { name, description, image, packages, env: { ...env } };
}

/** The tag a packages template builds to, from the base image reference and the file's exact bytes. */
export function templateTag(name, base, fileBytes) {
  const hash = createHash('sha256')
    .update(`${TEMPLATE_RECIPE}\0${name}\0${base}\0`)
    .update(fileBytes)
    .digest('hex');
  return { hash, tag: `${TEMPLATE_REPOSITORY_PREFIX}${name}:${hash.slice(0, 12)}` };
}

const quote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The install script run as root in the build container (every package spec was checked above). */
function installScript(t, hasCa) {
  const ca = '/run/switchyard-build-ca.crt';
  const lines = [
    '#!/bin/sh',
    `# Generated by scripts/sandbox-templates.mjs for template ${t.name}.`,
    'set -eu',
    'cd /',
    'export DEBIAN_FRONTEND=noninteractive LC_ALL=C',
  ];
  if (t.packages.debian.length > 0) {
    const caOpt = hasCa ? ` -o Acquire::https::CAInfo=${ca}` : '';
    lines.push(
      `apt-get${caOpt} update -qq`,
      `apt-get${caOpt} install -y -qq --no-install-recommends ${t.packages.debian.map(quote).join(' ')}`,
      'apt-get clean',
      'rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old',
    );
  }
  if (t.packages.pip.length > 0) {
    lines.push(
      // System site (/usr/local/lib/python3*/dist-packages): the sandbox's root is read-only at run time.
      `python3 -m pip install --no-cache-dir --break-system-packages --root-user-action=ignore ` +
        `--disable-pip-version-check --no-input --progress-bar off${hasCa ? ` --cert ${ca}` : ''} ` +
        t.packages.pip.map(quote).join(' '),
    );
  }
  if (t.packages.npm.length > 0) {
    lines.push(
      `curl -fsSL${hasCa ? ` --cacert ${ca}` : ''} -o /tmp/npm.tgz https://registry.npmjs.org/npm/-/npm-${NPM_VERSION}.tgz`,
      `python3 -c 'import base64,hashlib,sys; d=base64.b64encode(hashlib.sha512(open("/tmp/npm.tgz","rb").read()).digest()).decode(); sys.exit(0 if "sha512-"+d==sys.argv[1] else "npm tarball integrity mismatch")' ${quote(NPM_INTEGRITY)}`,
      'mkdir /tmp/npm && tar -xzf /tmp/npm.tgz -C /tmp/npm --strip-components=1',
      `node /tmp/npm/bin/npm-cli.js install --global --prefix /usr/local --omit=dev --no-audit --no-fund ` +
        `--no-update-notifier --cache /tmp/npm-cache${hasCa ? ` --cafile ${ca}` : ''} ${t.packages.npm.map(quote).join(' ')}`,
      // Debian's node looks for global modules in /usr/share/nodejs (not /usr/local/lib/node_modules): link them there.
      'for d in /usr/local/lib/node_modules/*; do',
      '  n="${d##*/}"',
      '  case "$n" in',
      '    @*) mkdir -p "/usr/share/nodejs/$n"',
      '      for s in "$d"/*; do [ -e "/usr/share/nodejs/$n/${s##*/}" ] || ln -s "$s" "/usr/share/nodejs/$n/${s##*/}"; done ;;',
      '    *) [ -e "/usr/share/nodejs/$n" ] || ln -s "$d" "/usr/share/nodejs/$n" ;;',
      '  esac',
      'done',
    );
  }
  lines.push(
    'rm -rf /tmp/* /tmp/.[!.]* /root/.cache /root/.npm /root/.config',
    'find /var/log -type f -exec truncate -s 0 {} +',
    'chmod 1777 /tmp',
    '',
  );
  return lines.join('\n');
}

/** A Dockerfile-style ENV/LABEL value: double-quoted, with `\`, `"` and `$` escaped (no variable expansion). */
const dockerValue = (s) => `"${s.replace(/[\\"$]/g, (c) => `\\${c}`)}"`;

/**
 * Template support for the builder. `h` carries the builder's helpers: log, fail, docker, imageExists, withLock,
 * runtimeDir, repo, ensureBase (resolves with the base image reference, building the default image when needed) and
 * printBaseTag (the base reference without Docker, for --print-tag).
 */
export function templateBuilder(h) {
  const templatesDir = process.env.SWITCHYARD_TEMPLATES_DIR
    ? path.resolve(process.env.SWITCHYARD_TEMPLATES_DIR)
    : path.join(h.repo, 'docker', 'templates');
  const stateDir = path.join(h.runtimeDir, 'templates');
  let toml;
  const parseToml = async () => (toml ??= (await import('smol-toml')).parse);

  async function load(name) {
    const file = path.join(templatesDir, `${name}.toml`);
    let bytes;
    try {
      bytes = fs.readFileSync(file);
    } catch (e) {
      const known = names();
      h.fail(
        e.code === 'ENOENT'
          ? `no template "${name}": ${file} does not exist (templates in ${templatesDir}: ${known.join(', ') || 'none'})`
          : `${file}: ${e.message}`,
      );
    }
    try {
      return { file, bytes, def: parseTemplate(name, bytes.toString('utf8'), await parseToml()) };
    } catch (e) {
      h.fail(`${file}: ${e.message}`);
    }
  }

  function names() {
    let entries = [];
    try {
      entries = fs.readdirSync(templatesDir);
    } catch (e) {
      if (e.code !== 'ENOENT') h.fail(`${templatesDir}: ${e.message}`);
    }
    return entries
      .filter((f) => f.endsWith('.toml'))
      .map((f) => f.slice(0, -'.toml'.length))
      .sort();
  }

  function record(name, info) {
    fs.mkdirSync(stateDir, { recursive: true });
    fs.writeFileSync(path.join(stateDir, `${name}.tag`), `${info.tag}\n`);
    fs.writeFileSync(path.join(stateDir, `${name}.json`), `${JSON.stringify(info, null, 2)}\n`);
  }

  const inspect = (ref) => {
    const r = h.docker(['image', 'inspect', '--format', '{{json .}}', ref]);
    return r.ok ? JSON.parse(r.stdout) : undefined;
  };

  /** sha256 of every file of the runner, as the image holds it (must not change between base and template). */
  function runnerDigest(ref) {
    const r = h.docker([
      'run',
      '--rm',
      '--network',
      'none',
      '--entrypoint',
      '/bin/sh',
      ref,
      '-c',
      'cd /opt/switchyard/runner && find . -type f | LC_ALL=C sort | xargs sha256sum',
    ]);
    if (!r.ok) h.fail(`cannot read /opt/switchyard/runner in ${ref}: ${r.stderr.trim()}`);
    return createHash('sha256').update(r.stdout).digest('hex');
  }

  function hostCa() {
    const given = process.env.SWITCHYARD_BUILD_CA_FILE;
    if (given) {
      if (!fs.existsSync(given)) h.fail(`SWITCHYARD_BUILD_CA_FILE=${given} does not exist`);
      return path.resolve(given);
    }
    return HOST_CA_FILES.find((f) => fs.existsSync(f));
  }

  async function build(name, base, tag, hash, def, force) {
    const t0 = performance.now();
    const baseInfo = inspect(base);
    if (!baseInfo) h.fail(`base image ${base} is not in the Docker engine`);
    const replaced = inspect(tag)?.Id; // --force: the image the tag named before
    const workDir = path.join(stateDir, `build-${name}`);
    fs.rmSync(workDir, { recursive: true, force: true });
    fs.mkdirSync(workDir, { recursive: true, mode: 0o755 });
    const ca = hostCa();
    fs.writeFileSync(path.join(workDir, 'install.sh'), installScript(def, Boolean(ca)), { mode: 0o644 });
    const logFile = path.join(stateDir, `${name}.log`);
    fs.writeFileSync(logFile, `# template ${name} -> ${tag} from ${base} ${new Date().toISOString()}\n`);
    const container = `switchyard-template-build-${name}-${randomBytes(4).toString('hex')}`;
    h.log(
      `building ${tag} from ${base} (debian: ${def.packages.debian.length}, pip: ${def.packages.pip.length}, ` +
        `npm: ${def.packages.npm.length})${force ? ' (forced)' : ''}; log: ${path.relative(h.repo, logFile)}`,
    );
    const phase = (what, since) => h.log(`${what}: ${((performance.now() - since) / 1000).toFixed(1)}s`);
    try {
      let t = performance.now();
      h.runLogged(
        'docker',
        [
          'run',
          '--name',
          container,
          // The daemon runs without a bridge; the host reaches the Debian mirror, PyPI and npm.
          '--network',
          'host',
          '--user',
          '0:0',
          '-v',
          `${workDir}:/run/switchyard-build:ro`,
          ...(ca ? ['-v', `${ca}:/run/switchyard-build-ca.crt:ro`] : []),
          base,
          '/bin/sh',
          '/run/switchyard-build/install.sh',
        ],
        logFile,
        `installing the packages of template ${name}`,
      );
      phase('install', t);
      t = performance.now();
      const cfg = baseInfo.Config ?? {};
      const changes = [
        `USER ${cfg.User || '10001:10001'}`,
        `WORKDIR ${cfg.WorkingDir || '/workspace'}`,
        `CMD ${JSON.stringify(cfg.Cmd ?? ['bash'])}`,
        ...Object.entries(def.env).map(([k, v]) => `ENV ${k}=${dockerValue(v)}`),
        `LABEL dev.switchyard.template=${dockerValue(name)} dev.switchyard.template.hash=${dockerValue(hash)} ` +
          `dev.switchyard.template.base=${dockerValue(base)}`,
      ];
      const commit = h.docker([
        'commit',
        ...changes.flatMap((c) => ['--change', c]),
        '--message',
        `switchyard template ${name} ${hash.slice(0, 12)}`,
        container,
        tag,
      ]);
      if (!commit.ok) h.fail(`docker commit failed: ${commit.stderr.trim()}`);
      phase('commit', t);
    } finally {
      h.docker(['rm', '-f', container]);
      fs.rmSync(workDir, { recursive: true, force: true });
    }
    // What SECURITY.md asks of every sandbox image: the same non-root user, the runner as the base has it.
    const built = inspect(tag);
    const problems = [];
    if (built?.Config?.User !== baseInfo.Config?.User)
      problems.push(`user ${built?.Config?.User} instead of ${baseInfo.Config?.User}`);
    if (built?.Config?.WorkingDir !== baseInfo.Config?.WorkingDir)
      problems.push(`workdir ${built?.Config?.WorkingDir} instead of ${baseInfo.Config?.WorkingDir}`);
    if (problems.length === 0 && runnerDigest(tag) !== runnerDigest(base))
      problems.push('/opt/switchyard/runner differs from the base image (a package wrote into it)');
    if (problems.length > 0) {
      h.docker(['image', 'rm', tag]);
      h.fail(`template ${name}: the built image was refused: ${problems.join('; ')}`);
    }
    // Older builds of the template go (those still used by a container stay until it ends).
    const older = h.docker([
      'image',
      'ls',
      '--format',
      '{{.Repository}}:{{.Tag}}',
      `${TEMPLATE_REPOSITORY_PREFIX}${name}`,
    ]);
    for (const ref of older.ok ? older.stdout.split('\n').filter(Boolean) : []) {
      if (ref !== tag) h.docker(['image', 'rm', ref]);
    }
    if (replaced && replaced !== built.Id) h.docker(['image', 'rm', replaced]);
    const seconds = Number(((performance.now() - t0) / 1000).toFixed(1));
    h.log(`built ${tag} in ${seconds}s (${(built.Size / 1e6).toFixed(0)} MB)`);
    return { seconds, sizeBytes: built.Size };
  }

  /** Builds (or finds cached) one template; resolves with its tag. */
  async function one(name, opts) {
    const t0 = performance.now();
    const { file, bytes, def } = await load(name);
    if (def.image !== undefined) {
      // Used as is: its build state is whether Docker has it; never pulled (no registry is assumed).
      if (opts.printTag) return def.image;
      if (!h.imageExists(def.image))
        h.fail(
          `template ${name} uses ${def.image} as is, and the Docker engine does not have it: ` +
            `docker pull ${def.image} (or docker load) first`,
        );
      record(name, { tag: def.image, image: true, file });
      h.log(`template ${name}: ${def.image} is present (used as is)`);
      return def.image;
    }
    const base = opts.printTag ? h.printBaseTag() : await h.ensureBase();
    const { hash, tag } = templateTag(name, base, bytes);
    if (opts.printTag) return tag;
    if (!opts.force && h.imageExists(tag)) {
      record(name, { tag, hash, base, file, ...cachedInfo(name, tag) });
      h.log(`up to date: ${tag} (cached, ${((performance.now() - t0) / 1000).toFixed(2)}s)`);
      return tag;
    }
    const lockName = `template-${name}`;
    const built = await h.withLock(lockName, async () => {
      if (!opts.force && h.imageExists(tag)) return cachedInfo(name, tag); // built meanwhile
      return build(name, base, tag, hash, def, opts.force);
    });
    record(name, { tag, hash, base, file, builtAt: new Date().toISOString(), ...built });
    return tag;
  }

  /** What the last build recorded (time, size), kept when a later run finds the image cached. */
  function cachedInfo(name, tag) {
    try {
      const prev = JSON.parse(fs.readFileSync(path.join(stateDir, `${name}.json`), 'utf8'));
      if (prev.tag === tag)
        return { builtAt: prev.builtAt, seconds: prev.seconds, sizeBytes: prev.sizeBytes };
    } catch {
      /* none yet */
    }
    return {};
  }

  return {
    templatesDir,
    names,
    one,
    /** Every template; a failure is reported and the others still build. Resolves with the failures. */
    async all(opts) {
      const failed = [];
      for (const name of names()) {
        try {
          process.stdout.write(`${name} ${await one(name, opts)}\n`);
        } catch (e) {
          h.log(`ERROR: ${e.message}`);
          failed.push(name);
        }
      }
      return failed;
    },
  };
}
