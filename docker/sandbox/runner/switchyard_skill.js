'use strict';
// The skill SDK for node bodies: `main(input, ctx)` (async or not) gets the skill's input and a `ctx` whose
// `call(name, input)` runs another tool or skill of the session as an action of its own (linked to this one by
// CALLED_BY), through the Unix socket the engine gave this action (SWITCHYARD_CALL_SOCKET) -- never the network. What
// `main` returns (or resolves to) is the skill's output, checked against its output schema by the engine.

const net = require('node:net');
const { spawn } = require('node:child_process');
const { Duplex } = require('node:stream');

/** python3 relays an abstract socket over its stdio (call_relay.py): this node cannot connect to one itself. */
const RELAY = [__dirname + '/call_relay.py'];

class CallError extends Error {
  constructor(message, code, result) {
    super(message);
    this.name = 'CallError';
    this.code = code;
    this.result = result;
  }
}

class Context {
  constructor(socket) {
    this.socket = socket;
    this.next = 0;
    this.pending = new Map();
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const answer = JSON.parse(buffer.slice(0, end));
        buffer = buffer.slice(end + 1);
        const waiter = this.pending.get(answer.id);
        this.pending.delete(answer.id);
        if (waiter) waiter.resolve(answer);
      }
    });
    const closed = () => {
      for (const w of this.pending.values())
        w.reject(new CallError("the engine closed the skill's channel", 'CHANNEL_CLOSED'));
      this.pending.clear();
    };
    socket.on('end', closed);
    socket.on('close', closed);
  }

  request(body) {
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.socket.write(`${JSON.stringify({ ...body, id })}\n`);
    });
  }

  /**
   * Runs tool or skill `name` with `input` and resolves with its result: `actionId`, `status` (`succeeded` or
   * `failed`), `exitCode`, `stdout`, `stderr`, `output` (a skill's: {skill, value}), `error`. Rejects with a CallError
   * when it could not run to an end (unknown tool, bad input, refused, timed out, the depth limit).
   */
  async call(name, input) {
    const answer = await this.request({ op: 'call', name, input: input ?? {} });
    if (!answer.ok) throw new CallError(answer.error?.message ?? 'the call failed', answer.error?.code);
    const result = answer.result;
    if (result.status !== 'succeeded' && result.status !== 'failed') {
      throw new CallError(
        `${name} ${result.status}: ${result.error?.message ?? ''}`,
        result.error?.code,
        result,
      );
    }
    return result;
  }

  /** Calls skill `name` and resolves with the value its `main` returned; rejects unless it succeeded. */
  async skill(name, input) {
    const result = await this.call(name, input);
    if (result.status !== 'succeeded') {
      throw new CallError(
        `skill ${name} failed: ${result.error?.message ?? result.stderr ?? ''}`,
        result.error?.code,
        result,
      );
    }
    return result.output?.value;
  }
}

/** The entry the engine appends to a skill's body. */
async function run(exported) {
  const path = process.env.SWITCHYARD_CALL_SOCKET;
  if (!path) {
    process.stderr.write('switchyard: this code runs as a skill only (no SWITCHYARD_CALL_SOCKET)\n');
    process.exit(2);
  }
  const main = typeof exported === 'function' ? exported : exported && exported.main;
  if (typeof main !== 'function') {
    process.stderr.write("switchyard: a skill's main.js defines main(input, ctx) or exports it\n");
    process.exit(2);
  }
  const socket = path.startsWith('@') ? await relayed(path) : await connected(path);
  const ctx = new Context(socket);
  const { input } = await ctx.request({ op: 'input' });
  const output = await main(input, ctx);
  const answer = await ctx.request({ op: 'return', output: output === undefined ? null : output });
  if (!answer.ok) throw new CallError(answer.error?.message ?? 'the output was refused', 'OUTPUT_REFUSED');
  socket.end();
}

function connected(path) {
  const socket = net.createConnection(path);
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * `@name`: an abstract socket (a Kubernetes pod's, made by its runner). Node before 20 cannot connect to one (libuv
 * cuts the address at its leading NUL), so python3 relays it over stdio (call_relay.py); its first failure ends the
 * body, as a refused connect would.
 */
function relayed(path) {
  const relay = spawn('/usr/bin/python3', ['-I', ...RELAY, path], { stdio: ['pipe', 'pipe', 'inherit'] });
  const socket = Duplex.from({ readable: relay.stdout, writable: relay.stdin });
  return new Promise((resolve, reject) => {
    relay.once('spawn', () => resolve(socket));
    relay.once('error', reject);
    relay.once('exit', (code) => {
      if (code) reject(new Error(`the call relay for ${path} exited ${code}`));
    });
  });
}

module.exports = { run, CallError, Context };
