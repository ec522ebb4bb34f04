import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { Socket } from 'node:net';
import { Logger } from '@nestjs/common';

/**
 * The helper: mount(2)/umount2(2) through ctypes, one JSON request per line on stdin, one reply per line on stdout,
 * in order. Python because it is on every host that runs python code (the subprocess tier's interpreter) and can
 * make the syscalls without a compiler; `-I -S` keeps the environment and site-packages out.
 */
const HELPER_SOURCE = String.raw`
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
MS_BIND = 4096
MNT_DETACH = 2
def call(r):
    if r["op"] == "bind":
        return libc.mount(os.fsencode(r["source"]), os.fsencode(r["target"]), None, MS_BIND, None)
    if r["op"] == "umount":
        return libc.umount2(os.fsencode(r["target"]), MNT_DETACH if r.get("detach") else 0)
    raise ValueError("unknown op %r" % r["op"])
out = sys.stdout
out.write('{"ready":true}\n')
out.flush()
for line in sys.stdin.buffer:
    r = json.loads(line)
    try:
        rc = call(r)
        e = ctypes.get_errno()
        reply = {"id": r["id"], "ok": rc == 0}
        if rc != 0:
            reply.update(errno=errno.errorcode.get(e, str(e)), message=os.strerror(e))
    except Exception as err:
        reply = {"id": r.get("id"), "ok": False, "errno": "EINVAL", "message": str(err)}
    out.write(json.dumps(reply) + "\n")
    out.flush()
`;

const START_TIMEOUT_MS = 5000;

export type MountRequest =
  { op: 'bind'; source: string; target: string } | { op: 'umount'; target: string; detach?: boolean };

export interface MountReply {
  ok: boolean;
  /** Symbolic errno (`EBUSY`, `EINVAL`…) when not ok. */
  errno?: string;
  message?: string;
}

interface Waiter {
  resolve(reply: MountReply): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * A long-lived root helper process that makes mount syscalls for the engine: a claim's bind mount costs a pipe round
 * trip (~0.1 ms) instead of starting util-linux `mount` (5–10 ms, most of a claim). Started once, restarted on the
 * next request after it dies; `start()` resolving false means it cannot run here (no python3), and the caller falls
 * back to the `mount` command. Its pipes do not keep the engine's event loop alive while nothing is pending.
 */
export class MountHelper {
  private readonly logger = new Logger('MountHelper');
  private child?: ChildProcessWithoutNullStreams;
  private starting?: Promise<boolean>;
  private readonly waiters = new Map<number, Waiter>();
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly python = '/usr/bin/python3',
    private readonly requestTimeoutMs = 10_000,
  ) {}

  /** Starts the helper unless it runs; false when it cannot start (then use the `mount` command). */
  start(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.child && this.child.exitCode === null && !this.child.killed) return Promise.resolve(true);
    this.starting ??= this.spawnHelper().finally(() => (this.starting = undefined));
    return this.starting;
  }

  /** Sends one request; rejects when the helper is gone or silent for `requestTimeoutMs`. */
  async call(request: MountRequest): Promise<MountReply> {
    if (!(await this.start())) throw new Error('the mount helper is not running');
    const child = this.child!;
    const id = this.nextId++;
    return new Promise<MountReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new Error(`the mount helper did not answer within ${this.requestTimeoutMs} ms`));
        child.kill('SIGKILL'); // stuck in a syscall: a fresh one serves the next request
      }, this.requestTimeoutMs);
      this.waiters.set(id, { resolve, reject, timer });
      this.refWhileBusy(child);
      child.stdin.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  /** Stops the helper; later calls fail (callers fall back to the `mount` command). */
  close(): void {
    this.closed = true;
    this.child?.stdin.end();
    this.child = undefined;
  }

  private spawnHelper(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let child: ChildProcessWithoutNullStreams;
      try {
        child = spawn(this.python, ['-I', '-S', '-c', HELPER_SOURCE], {
          stdio: ['pipe', 'pipe', 'pipe'],
          env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
        });
      } catch (err) {
        this.logger.warn(`cannot start the mount helper (${(err as Error).message})`);
        return resolve(false);
      }
      let ready = false;
      let stderr = '';
      let buffered = '';
      const timer = setTimeout(() => {
        this.logger.warn(`the mount helper did not start within ${START_TIMEOUT_MS} ms`);
        child.kill('SIGKILL');
      }, START_TIMEOUT_MS);
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-1000)));
      child.on('error', (err) => {
        clearTimeout(timer);
        if (!ready) {
          this.logger.warn(`cannot start the mount helper ${this.python} (${err.message})`);
          resolve(false);
        }
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (this.child === child) this.child = undefined;
        const why = new Error(
          `the mount helper exited (${signal ?? `code ${code}`})${stderr.trim() ? `: ${stderr.trim()}` : ''}`,
        );
        for (const [id, w] of this.waiters) {
          clearTimeout(w.timer);
          w.reject(why);
          this.waiters.delete(id);
        }
        if (!ready) resolve(false);
        else if (!this.closed) this.logger.warn(`${why.message}; restarted on the next mount`);
      });
      child.stdin.on('error', () => undefined); // reported through 'close'
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          let message: MountReply & { id?: number; ready?: boolean };
          try {
            message = JSON.parse(line) as typeof message;
          } catch {
            stderr += `unexpected output: ${line.slice(0, 200)}`;
            child.kill('SIGKILL');
            return;
          }
          if (message.ready) {
            ready = true;
            clearTimeout(timer);
            this.child = child;
            resolve(true);
            continue;
          }
          const waiter = this.waiters.get(message.id ?? -1);
          if (!waiter) continue;
          this.waiters.delete(message.id!);
          clearTimeout(waiter.timer);
          waiter.resolve(message);
        }
        this.unrefWhenIdle(child);
      });
    });
  }

  private refWhileBusy(child: ChildProcessWithoutNullStreams): void {
    child.ref();
    (child.stdout as Socket).ref();
  }

  /** An idle helper must not keep a process alive that has nothing else to do (a script, a test run). */
  private unrefWhenIdle(child: ChildProcessWithoutNullStreams): void {
    if (this.waiters.size > 0) return;
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as Socket).unref();
  }
}
