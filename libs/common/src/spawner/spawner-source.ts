/**
 * The spawner's program, run by the engine's own `node` (`-e`). It starts each process it is sent, in a process group
 * of its own, and answers with messages on its IPC channel, in this order for each:
 * `{ id, pid }`, then `{ id, fd }` five times with that stdio socket attached (sent by SCM_RIGHTS; the spawner's copy
 * is closed once sent), then `{ id, exit: { code, signal } }`; or `{ id, error, errno }` alone when it could not start.
 * It exits when its channel closes (the engine ended): everything it started then gets the SIGKILL of
 * `setpriv --pdeathsig`, as when the engine itself was their parent.
 */
export const SPAWNER_SOURCE = String.raw`'use strict';
const { spawn } = require('node:child_process');
const { Socket } = require('node:net');
const STDIO = ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'];
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  let child;
  try {
    child = spawn(m.command, m.args, { env: m.env, cwd: m.cwd, detached: true, stdio: STDIO, uid: m.uid, gid: m.gid });
  } catch (err) {
    process.send({ id: m.id, error: String(err && err.message), errno: err && err.code });
    return;
  }
  if (child.pid === undefined) {
    child.once('error', (err) => process.send({ id: m.id, error: err.message, errno: err.code }));
    return;
  }
  child.on('error', () => undefined);
  // Node's stdio sockets start reading at once, and are destroyed when the process exits: the spawner would swallow
  // early output, or close a socket whose turn to be sent has not come (each waits for the engine's ack of the one
  // before). So the sockets' handles are taken from them, unread, before anything runs.
  const sockets = child.stdio.map((socket) => {
    const handle = socket._handle;
    handle.readStop();
    socket._handle = null;
    return new Socket({ handle, manualStart: true });
  });
  child.once('exit', (code, signal) => process.send({ id: m.id, exit: { code, signal } }));
  process.send({ id: m.id, pid: child.pid });
  sockets.forEach((socket, fd) => process.send({ id: m.id, fd }, socket));
});
process.send({ ready: true });
`;
