'use strict';
/**
 * Switchyard node kernel: one persistent JavaScript context kept across a session's cells (node 18 and later).
 *
 * Started by the runner as `node --expose-internals kernel_node.js` with fd 3 reading requests and fd 4 writing
 * replies, one JSON object per line; fds 1 and 2 are the cell output, fd 0 is /dev/null. The protocol is the python
 * kernel's (kernel_python.py), plus a go-ahead after each start token:
 *
 *   runner -> kernel (fd 3)   {"cell": N, "code": str, "env": {str: str}, "start": str, "end": str}
 *                             {"go": bool}   after the cell's start token: run it (false: an interrupt came first)
 *                             "results": {"maxBytes": int, "cellMaxBytes": int}}   (with the cell request)
 *   kernel -> runner (fd 4)   {"ev": "ready", "pid": int}
 *                             {"ev": "display", "cell": N, "result": {data, metadata?, isMainResult?, files?}}
 *                             {"cell": N, "count": int, "ok": bool, "result": str|null, "exitCode": 0|1,
 *                              "error": null|{"name": str, "message": str}, "interrupted": bool}
 *
 * Cells run in this process's global context, like the node REPL: top-level `await` works (node's own REPL
 * transform, hence --expose-internals), and top-level `let`/`const`/`class` become `var`s so a cell may run again
 * without "already declared" errors; declarations persist as globals. The last expression's value is
 * `util.inspect`ed as `result` (a promise: what it settles to). Before answering, the cell waits for the promises its
 * code created synchronously and did not await, while the kernel has anything that could settle them (timers, sockets,
 * requests beyond its own); what prints later goes out between cells, and the runner gives it to the next cell.
 * `require` resolves from /workspace. SIGINT interrupts a running cell (a synchronous
 * loop through vm's breakOnSigint, or a pending await) and keeps the state; between cells it is ignored.
 * `process.exit()` ends the kernel.
 *
 * Rich results: `display(value, mime, metadata)` (a global) shows a value as a MIME bundle (kernel_display.py says
 * the shape): `display(buf, 'image/png')` (a Buffer, or base64 text), `display('<b>hi</b>', 'text/html')`,
 * `display({a: 1}, 'application/json')`; without a MIME type, as text/plain. The final expression's value is the
 * cell's main result (text/plain). A result over the cell's caps is written to the workspace, as in python.
 */
const fs = require('node:fs');
const net = require('node:net');
const readline = require('node:readline');
const util = require('node:util');
const crypto = require('node:crypto');
const vm = require('node:vm');
const { createRequire } = require('node:module');
const asyncHooks = require('node:async_hooks');
// Node's internals, as its REPL uses them.
const acorn = require('internal/deps/acorn/acorn/dist/acorn');
const { processTopLevelAwait } = require('internal/repl/await');

const REQUESTS_FD = 3;
const REPLIES_FD = 4;

const reply = (message) => fs.writeSync(REPLIES_FD, `${JSON.stringify(message)}\n`);

const WORKSPACE = process.cwd();
const BINARY = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' };
const EXTENSIONS = {
  'text/plain': 'txt',
  'text/html': 'html',
  'image/svg+xml': 'svg',
  'text/markdown': 'md',
};
const isJson = (mime) => mime === 'application/json' || mime.endsWith('+json');
const cellResults = { id: null, count: 0, max: 1 << 20, cellMax: 4 << 20, used: 0, n: 0 };

function beginResults(request, count) {
  const limits = request.results ?? {};
  Object.assign(cellResults, { id: request.cell, count, used: 0, n: 0 });
  if (Number.isInteger(limits.maxBytes) && limits.maxBytes > 0) cellResults.max = limits.maxBytes;
  if (Number.isInteger(limits.cellMaxBytes) && limits.cellMaxBytes > 0)
    cellResults.cellMax = limits.cellMaxBytes;
}

const inspected = (value) => util.inspect(value, { depth: 4, maxArrayLength: 100 });

/** One MIME entry as it travels (base64 for images, a JSON value for JSON, text otherwise) and its size in bytes. */
function entry(mime, value) {
  if (BINARY[mime]) {
    const raw = typeof value === 'string' ? Buffer.from(value, 'base64') : Buffer.from(value);
    return { value: raw.toString('base64'), bytes: raw.length, raw };
  }
  if (isJson(mime)) {
    const text = JSON.stringify(value) ?? 'null';
    return { value: JSON.parse(text), bytes: Buffer.byteLength(text), raw: Buffer.from(text) };
  }
  const text = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  return { value: text, bytes: Buffer.byteLength(text), raw: Buffer.from(text) };
}

function pngSize(raw) {
  const png = raw.length >= 24 && raw.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex'));
  return png && raw.subarray(12, 16).toString('latin1') === 'IHDR'
    ? { width: raw.readUInt32BE(16), height: raw.readUInt32BE(20) }
    : undefined;
}

/** Writes the entries over the caps to the workspace, biggest first, until the bundle fits; their `files` entries. */
function spill(entries) {
  const files = [];
  const room = Math.min(cellResults.max, Math.max(cellResults.cellMax - cellResults.used, 0));
  const total = () => Object.values(entries).reduce((n, e) => n + e.bytes, 0);
  for (const mime of Object.keys(entries).sort((a, b) => entries[b].bytes - entries[a].bytes)) {
    if (total() <= room) break;
    const { raw, bytes } = entries[mime];
    delete entries[mime];
    const ext = BINARY[mime] ?? EXTENSIONS[mime] ?? (isJson(mime) ? 'json' : 'bin');
    const name = `cell-${cellResults.count}-${cellResults.n}-${crypto.randomBytes(3).toString('hex')}.${ext}`;
    const rel = `.switchyard/results/${name}`;
    try {
      fs.mkdirSync(`${WORKSPACE}/.switchyard/results`, { recursive: true });
      fs.writeFileSync(`${WORKSPACE}/${rel}`, raw);
      files.push({ mimeType: mime, path: rel, bytes });
    } catch (err) {
      files.push({ mimeType: mime, path: null, bytes, error: err.code ?? String(err) });
    }
  }
  if (!entries['text/plain']) {
    const text = files
      .map(
        (f) =>
          `[${f.mimeType} of ${f.bytes} bytes ${f.path ? `written to ${f.path}` : `not kept (${f.error})`}]`,
      )
      .join('\n');
    entries['text/plain'] = entry('text/plain', text);
  }
  return files;
}

function emitResult(data, metadata, main) {
  const entries = {};
  const md = { ...(metadata ?? {}) };
  for (const [mime, value] of Object.entries(data)) {
    entries[mime] = entry(mime, value);
    const size = mime === 'image/png' && !md[mime] ? pngSize(entries[mime].raw) : undefined;
    if (size) md[mime] = size;
  }
  const files = spill(entries);
  cellResults.used += Object.values(entries).reduce((n, e) => n + e.bytes, 0);
  cellResults.n += 1;
  const result = { data: Object.fromEntries(Object.entries(entries).map(([m, e]) => [m, e.value])) };
  if (Object.keys(md).length > 0) result.metadata = md;
  if (main) result.isMainResult = true;
  if (files.length > 0) result.files = files;
  fs.writeSync(REPLIES_FD, `${JSON.stringify({ ev: 'display', cell: cellResults.id, result })}\n`);
}

/** `display(value, mime?, metadata?)`: shows a value as a rich result of the running cell. */
globalThis.display = function display(value, mime, metadata) {
  if (mime !== undefined && (typeof mime !== 'string' || !/^[a-z]+\/[A-Za-z0-9.+-]+$/.test(mime))) {
    throw new TypeError(`display: the MIME type must be a string like "image/png", not ${inspected(mime)}`);
  }
  const data = {};
  if (mime !== undefined && mime !== 'text/plain') data[mime] = value;
  data['text/plain'] =
    mime === undefined || mime === 'text/plain'
      ? typeof value === 'string' && mime === 'text/plain'
        ? value
        : inspected(value)
      : BINARY[mime]
        ? `<${mime}>`
        : typeof value === 'string'
          ? value
          : inspected(value);
  emitResult(data, metadata, false);
};

globalThis.require = createRequire('/workspace/');
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;

/** Top-level `let`/`const` as `var`, `class C` as `var C = class C`: declarations a later cell may repeat. */
function redeclarable(code) {
  let ast;
  try {
    ast = acorn.parse(code, { ecmaVersion: 'latest', allowAwaitOutsideFunction: true });
  } catch {
    return code; // the evaluation reports the syntax error with its position
  }
  const edits = [];
  for (const node of ast.body) {
    if (node.type === 'VariableDeclaration' && node.kind !== 'var') {
      edits.push({ start: node.start, end: node.start + node.kind.length, text: 'var' });
    } else if (node.type === 'ClassDeclaration' && node.id) {
      edits.push({ start: node.start, end: node.start, text: `var ${node.id.name} = ` });
    }
  }
  let out = code;
  for (const e of edits.reverse()) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return out;
}

// A SIGINT since the running cell's start token: one that lands after the go-ahead but before the code runs (on a
// loaded machine the runner's held-back signal can) still stops the cell. The runner signals only while a cell runs.
let interruptSeen = false;
let interruptPending;
process.on('SIGINT', () => {
  interruptSeen = true;
  interruptPending?.();
});
process.on('uncaughtException', (err) => process.stderr.write(`Uncaught ${util.inspect(err)}\n`));
process.on('unhandledRejection', (err) => process.stderr.write(`Unhandled rejection ${util.inspect(err)}\n`));

class Interrupted extends Error {
  constructor() {
    super('the cell was interrupted; the kernel state is kept');
    this.name = 'Interrupted';
  }
}

/** The cell as a script: REPL-like redeclarations, and top-level await through the REPL's transform. */
function compileCell(code) {
  const source = redeclarable(code);
  try {
    return { source, wrapped: processTopLevelAwait(source) };
  } catch {
    return { source, wrapped: null }; // not valid as a whole: running it reports the error
  }
}

/**
 * The promises a cell's code creates while it runs synchronously (`fetch(url).then(...)`, an async function it
 * calls): the cell's answer waits until they settle. Only those: libraries leave promises of their own pending
 * (a response body nobody reads), and waiting for all would wait until the timeout. The hook is on only meanwhile.
 */
const cellPromises = new Set();
let trackingCell = false;
const promiseHook = asyncHooks.createHook({
  init(asyncId, type) {
    if (trackingCell && type === 'PROMISE') cellPromises.add(asyncId);
  },
  promiseResolve(asyncId) {
    cellPromises.delete(asyncId);
  },
});

/** Node's active handles, requests and timers: while there are none besides the kernel's own, nothing can settle. */
const activeResources = () => process.getActiveResourcesInfo().length;
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

/**
 * Waits for the cell's pending promises: until they settled, or nothing but the kernel's own resources is left to
 * settle them (a `new Promise(() => {})` never does), or the cell's interrupt (its timeout) comes.
 */
async function pendingWork(baseline, interrupted) {
  while (cellPromises.size > 0) {
    // The poll's own timer is one of the resources counted.
    if (activeResources() <= baseline + 1) {
      await new Promise((resolve) => setImmediate(resolve));
      if (activeResources() <= baseline && cellPromises.size > 0) return;
    }
    await Promise.race([tick(), interrupted]);
  }
}

async function runCell(count, { source, wrapped }) {
  const filename = `<cell ${count}>`;
  const interrupted = new Promise((_, reject) => (interruptPending = () => reject(new Interrupted())));
  interrupted.catch(() => undefined);
  const baseline = activeResources();
  cellPromises.clear();
  promiseHook.enable();
  try {
    const options = { filename, breakOnSigint: true };
    let value;
    trackingCell = true;
    try {
      // The REPL's transform gives a promise of `{ value }` for the last expression (or of undefined).
      value = vm.runInThisContext(wrapped ?? source, options);
    } finally {
      trackingCell = false;
    }
    if (wrapped !== null) {
      const settled = await Promise.race([value, interrupted]);
      value = settled && typeof settled === 'object' && 'value' in settled ? settled.value : undefined;
    }
    // A cell whose value is a promise (`fetch(url).then(r => r.status)`) answers what it settles to.
    if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
      value = await Promise.race([value, interrupted]);
    }
    await pendingWork(baseline, interrupted);
    return { value };
  } finally {
    promiseHook.disable();
    cellPromises.clear();
    interruptPending = undefined;
  }
}

/** An error as the user should see it: its message and the frames of their own cells, not the kernel's. */
function shown(err) {
  if (!(err instanceof Error) || typeof err.stack !== 'string') return `Uncaught ${util.inspect(err)}`;
  const lines = err.stack.split('\n');
  const first = lines.findIndex((l) => /^\s+at /.test(l));
  const head = first === -1 ? lines : lines.slice(0, first);
  const own = first === -1 ? [] : lines.slice(first).filter((l) => l.includes('<cell '));
  return `Uncaught ${[...head, ...own].join('\n')}`;
}

const describe = (err) =>
  err instanceof Error
    ? { name: err.name, message: err.message }
    : { name: 'Error', message: util.inspect(err) };

const isInterrupt = (err) =>
  err instanceof Interrupted || (err instanceof Error && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');

const writeFd = (fd, text) => {
  try {
    fs.writeSync(fd, text);
  } catch {
    // closed by the cell: the runner stops waiting for this token after a while
  }
};

/** Resolves once what the cell wrote through the stream is out. */
const write = (stream, text) =>
  new Promise((resolve) => {
    try {
      stream.write(text, () => resolve());
    } catch {
      resolve();
    }
  });

/** One full turn of the event loop (a poll included), so a signal that already came reaches the listener. */
const loopTurn = () => new Promise((resolve) => setImmediate(() => setImmediate(resolve)));

let count = 0;
const queue = [];
let busy = false;

/**
 * After writing a cell's start token the kernel waits for the runner's `{"go": bool}`: `false` when an interrupt was
 * asked for before the cell began. Signalling it then instead would race vm's breakOnSigint, which swaps this
 * process's SIGINT listener for its own watchdog around the code (a signal in between is lost, or kills node).
 */
const gos = [];
let goWaiter;
async function nextGo() {
  while (gos.length === 0) await new Promise((resolve) => (goWaiter = resolve));
  goWaiter = undefined;
  return gos.shift();
}

async function drain() {
  if (busy) return;
  busy = true;
  while (queue.length > 0) {
    const request = queue.shift();
    count += 1;
    Object.assign(process.env, request.env ?? {});
    beginResults(request, count);
    // Parsed before the go-ahead, so the code runs right after it (the runner times its interrupts by it).
    const compiled = compileCell(String(request.code ?? ''));
    // Straight to the descriptors: a cell that replaced process.stdout.write still gets its boundaries.
    interruptSeen = false;
    writeFd(1, String(request.start ?? ''));
    writeFd(2, String(request.start ?? ''));
    const { go } = await nextGo();
    if (go) await loopTurn();
    let outcome;
    try {
      if (!go || interruptSeen) throw new Interrupted();
      const { value } = await runCell(count, compiled);
      const result = value === undefined ? null : inspected(value);
      if (result !== null) emitResult({ 'text/plain': result }, undefined, true);
      outcome = { ok: true, result, error: null, exitCode: 0, interrupted: false };
    } catch (err) {
      const interrupted = isInterrupt(err);
      process.stderr.write(
        interrupted ? 'Interrupted: the cell was stopped; the kernel state is kept\n' : `${shown(err)}\n`,
      );
      outcome = { ok: false, result: null, error: describe(err), exitCode: 1, interrupted };
    }
    await write(process.stdout, '');
    await write(process.stderr, '');
    writeFd(1, String(request.end ?? ''));
    writeFd(2, String(request.end ?? ''));
    reply({ cell: request.cell, count, ...outcome });
  }
  busy = false;
}

// A libuv pipe, not an fs stream: a read blocked in the thread pool would keep process.exit() from exiting.
const requests = readline.createInterface({
  input: new net.Socket({ fd: REQUESTS_FD, readable: true, writable: false }),
});
requests.on('line', (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if ('go' in message) {
    gos.push(message);
    goWaiter?.();
    return;
  }
  queue.push(message);
  void drain();
});
requests.on('close', () => process.exit(0));
reply({ ev: 'ready', pid: process.pid });
