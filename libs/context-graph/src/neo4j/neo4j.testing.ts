import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import neo4j, { type Driver } from 'neo4j-driver';

/** How to reach a Neo4j started by `scripts/neo4j.sh`. */
export interface Neo4jTestServer {
  /** Instance name given to the script (`test` unless a test runs its own). */
  instance: string;
  uri: string;
  username: string;
  password: string;
}

/** The checkout: the nearest parent holding the script (this file also runs compiled, from `dist/`). */
function repoRoot(): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'scripts', 'neo4j.sh'))) return dir;
  }
  throw new Error(`scripts/neo4j.sh not found above ${__dirname}`);
}
const REPO = repoRoot();

/** Where `scripts/neo4j.sh` keeps instance `name`. */
function neo4jInstanceDir(name: string): string {
  return path.join(process.env.SWITCHYARD_RUNTIME_DIR ?? path.join(REPO, '.runtime'), 'neo4j', name);
}

/**
 * Runs `scripts/neo4j.sh <command> <instance>`; resolves with its stdout, rejects with its stderr. Async, so
 * an engine serving in the same process keeps answering while Neo4j stops or starts.
 */
export function neo4jScript(
  command: 'start' | 'stop' | 'clean' | 'status',
  instance: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [path.join(REPO, 'scripts/neo4j.sh'), command, instance],
      { timeout: 300_000, encoding: 'utf8' },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`scripts/neo4j.sh ${command} ${instance} failed: ${error.message}\n${stderr}`))
          : resolve(stdout.trim()),
    );
  });
}

/** Synchronous TCP probe (test files decide at load time whether they can run at all). */
function answers(uri: string): boolean {
  const { hostname, port } = new URL(uri.replace(/^[a-z+]+:/, 'http:'));
  const probe = `require('node:net').connect(${Number(port)}, ${JSON.stringify(hostname)})
    .on('connect', () => process.exit(0)).on('error', () => process.exit(1))`;
  return spawnSync(process.execPath, ['-e', probe], { timeout: 5000 }).status === 0;
}

/**
 * The test Neo4j that `npm test` starts (`bash scripts/neo4j.sh start`), or the one named by
 * `SWITCHYARD_TEST_NEO4J_URI`/`SWITCHYARD_TEST_NEO4J_PASSWORD`. Throws when it is not running: a test that
 * needs Neo4j fails, it is never skipped.
 */
export function neo4jTestServer(instance = 'test'): Neo4jTestServer {
  const dir = neo4jInstanceDir(instance);
  const fromEnv = instance === 'test' ? process.env.SWITCHYARD_TEST_NEO4J_URI : undefined;
  const uriFile = path.join(dir, 'uri');
  const uri = fromEnv ?? (existsSync(uriFile) ? readFileSync(uriFile, 'utf8').trim() : undefined);
  if (uri === undefined || !answers(uri)) {
    throw new Error(
      `no test Neo4j is running (${uri ?? `no ${uriFile}`}): start one with \`bash scripts/neo4j.sh start\` ` +
        '(npm test does it), or point SWITCHYARD_TEST_NEO4J_URI at one',
    );
  }
  const password =
    (fromEnv && process.env.SWITCHYARD_TEST_NEO4J_PASSWORD) ??
    readFileSync(path.join(dir, 'password'), 'utf8').trim();
  return { instance, uri, username: 'neo4j', password };
}

/** A driver on the test server for checks and clean-up (integers come back as JS numbers). */
export function neo4jTestDriver(server: Neo4jTestServer): Driver {
  return neo4j.driver(server.uri, neo4j.auth.basic(server.username, server.password), {
    disableLosslessIntegers: true,
  });
}

/** Empties the database (Community has one user database, so tests share it and start from empty). */
export async function wipeNeo4j(driver: Driver): Promise<void> {
  // Batched deletes need an auto-commit transaction (session.run), not a managed one.
  const session = driver.session({ database: 'neo4j' });
  try {
    await session.run('MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS');
  } finally {
    await session.close();
  }
}

/**
 * Takes the test instance for this process: test runs share one Neo4j (and wipe or stop it), so two runs on
 * one machine — two developers, or a run beside `npm test` — take turns, file by file. The lock is a directory
 * holding the owner's pid; a lock whose owner died is taken over. Resolves to the release function.
 */
export async function lockNeo4j(server: Neo4jTestServer, timeoutMs = 600_000): Promise<() => void> {
  const lock = path.join(neo4jInstanceDir(server.instance), 'test.lock');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(path.join(lock, 'pid'), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number(readFileOr(path.join(lock, 'pid')));
    if (owner > 0 && !alive(owner)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`the test Neo4j stayed busy (locked by pid ${owner}) for ${timeoutMs} ms: ${lock}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function readFileOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return ''; // being written or removed right now: looks alive for one more turn
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
