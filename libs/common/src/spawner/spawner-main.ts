/*
 * The spawner's program (see `Spawner`), run by the engine's own `node` as a process of its own: the compiled
 * `spawner-main.js`, or this file itself through Node's type stripping where it is not compiled (the tests). It may
 * import only Node's own modules, and types (erased).
 *
 * It starts each process it is sent, in a process group of its own, and answers with messages on its IPC channel, in
 * this order for each: `{ id, pid }`, then `{ id, fd }` five times with that stdio socket attached (sent by
 * SCM_RIGHTS; the spawner's copy is closed once sent, never read), then `{ id, exit: { code, signal } }`; or
 * `{ id, error, errno }` alone when it could not start. It exits when its channel closes (the engine ended):
 * everything it started then gets the SIGKILL of `setpriv --pdeathsig`, as when the engine itself was their parent.
 */
import { type ChildProcess, spawn, type StdioPipe } from 'node:child_process';
import { Socket, type SocketConstructorOpts } from 'node:net';
import type { LaunchSpec } from './spawn.types';

/** One launch, as `Spawner.launch` sends it. */
interface LaunchRequest extends LaunchSpec {
  id: number;
}

/** What Node keeps of a stdio pipe: its libuv handle (internal, stable since Node 0.x). */
interface PipeHandle {
  readStop(): number;
}

const STDIO: StdioPipe[] = ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'];

function send(message: object, socket?: Socket): void {
  process.send?.(message, socket);
}

/**
 * The child's stdio sockets, taken from Node unread. Node's stdio sockets start reading at once and are destroyed when
 * the process exits: the spawner would swallow early output, or close a socket whose turn to be sent has not come
 * (each waits for the engine's ack of the one before). So their handles are detached before anything runs.
 */
function takeSockets(child: ChildProcess): Socket[] {
  return child.stdio.map((stream) => {
    const socket = stream as unknown as { _handle: PipeHandle | null };
    const handle = socket._handle!;
    handle.readStop();
    socket._handle = null;
    return new Socket({ handle, manualStart: true } as unknown as SocketConstructorOpts);
  });
}

function launch(m: LaunchRequest): void {
  let child: ChildProcess;
  try {
    child = spawn(m.command, m.args, {
      env: m.env,
      cwd: m.cwd,
      detached: true,
      stdio: STDIO,
      uid: m.uid,
      gid: m.gid,
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    send({ id: m.id, error: String(e?.message), errno: e?.code });
    return;
  }
  const pid = child.pid;
  if (pid === undefined) {
    child.once('error', (err: NodeJS.ErrnoException) =>
      send({ id: m.id, error: err.message, errno: err.code }),
    );
    return;
  }
  child.on('error', () => undefined);
  const sockets = takeSockets(child);
  child.once('exit', (code, signal) => send({ id: m.id, exit: { code, signal } }));
  send({ id: m.id, pid });
  sockets.forEach((socket, fd) => send({ id: m.id, fd }, socket));
}

process.on('disconnect', () => process.exit(0));
process.on('message', (m: LaunchRequest) => launch(m));
send({ ready: true });
