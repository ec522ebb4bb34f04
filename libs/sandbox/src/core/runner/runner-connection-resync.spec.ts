import { PassThrough } from 'node:stream';
import { runnerWire } from '../../../test/runner-wire';
import { RunnerConnection } from './runner-connection';
import { RUNNER_PROTOCOL } from './runner-protocol';
import { RunnerProtocolError, RunnerTimeoutError } from './runner.errors';

/** A connection made to resync. */
const wire = () => runnerWire({ resync: true });

const resynced = (nonce: unknown, extra: Record<string, unknown> = {}) =>
  `${JSON.stringify({
    ev: 'resynced',
    nonce,
    protocol: RUNNER_PROTOCOL,
    pid: 7,
    workspace: [2049, 12],
    kernels: [
      { kernel: 'krn_0123456789abcdef', language: 'python', pid: 9, count: 3, busy: false, meta: null },
    ],
    procs: [{ proc: 'prc_0123456789abcdef', pid: 10, meta: { name: 'web' } }],
    ...extra,
  })}\n`;

describe('RunnerConnection resync', () => {
  it('discards everything before the answer to its nonce, then speaks with ids far above the old ones', async () => {
    const w = wire();
    const events: unknown[] = [];
    w.connection.onEvent((e) => events.push(e));
    // Half a line of the old stream and an old engine's answer arrive before the request is even sent.
    w.write('3","fd":1}\n{"ev":"exit","id":1,"exitCode":0}\nnot json at all\n');
    const answer = w.connection.resync(1000);
    await w.settle();
    const [request] = w.sent;
    expect(request).toMatchObject({ op: 'resync' });
    expect(typeof request.nonce).toBe('string');
    expect(request.id as number).toBeGreaterThanOrEqual(2 ** 40);
    // Another nonce (an earlier engine's resync) and events before the answer: not this connection's.
    w.write(resynced('someone-else'));
    w.write('{"ev":"pout","proc":"prc_0123456789abcdef","fd":1,"data":"aGk="}\n');
    w.write(resynced(request.nonce));
    await expect(answer).resolves.toMatchObject({
      pid: 7,
      workspace: [2049, 12],
      kernels: [{ kernel: 'krn_0123456789abcdef', count: 3 }],
      procs: [{ proc: 'prc_0123456789abcdef', meta: { name: 'web' } }],
    });
    expect(events).toEqual([]);
    // From here on the protocol as usual: events flow, requests carry the new ids, an old id answers nothing.
    const ports = w.connection.listPorts();
    await w.settle();
    const portsId = w.sent[1].id as number;
    expect(portsId).toBeGreaterThan(request.id as number);
    w.write('{"ev":"ports","id":1,"ports":[{"port":1,"address":"x","proc":null,"kernel":null}]}\n');
    w.write('{"ev":"pout","proc":"prc_0123456789abcdef","fd":1,"data":"aGk="}\n');
    w.write(`${JSON.stringify({ ev: 'ports', id: portsId, ports: [] })}\n`);
    await expect(ports).resolves.toEqual([]);
    expect(events).toHaveLength(1);
    expect(w.connection.isClosed).toBe(false);
  });

  it('rejects a runner that does not answer in time, or speaks another protocol', async () => {
    const silent = wire();
    await expect(silent.connection.resync(20)).rejects.toBeInstanceOf(RunnerTimeoutError);

    const other = wire();
    const answer = other.connection.resync(1000);
    await other.settle();
    other.write(resynced(other.sent[0].nonce, { protocol: 99 }));
    await expect(answer).rejects.toBeInstanceOf(RunnerProtocolError);
    expect(other.connection.isClosed).toBe(true);
  });

  it('is only for a connection made to resync', async () => {
    const toRunner = new PassThrough();
    const plain = new RunnerConnection({
      stdin: toRunner,
      stdout: new PassThrough(),
      closed: new Promise(() => undefined),
      close: () => undefined,
    });
    await expect(plain.resync(100)).rejects.toThrow(/resync: true/);
  });
});
