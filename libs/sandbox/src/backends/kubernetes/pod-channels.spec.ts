import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { runnerWire } from '../../../test/runner-wire';
import type { CallChannel, SessionEgressAccess } from '../../core/sandbox.types';
import { PodChannels } from './pod-channels';

const wire = () => runnerWire();

/** A host socket like the session's proxy or a skill's channel: records what each connection sends, answers `answer`. */
function hostServer(socketPath: string, answer: string) {
  const received: string[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    let data = '';
    socket.on('data', (chunk: Buffer) => (data += chunk.toString('utf8')));
    socket.on('end', () => {
      received.push(data);
      socket.end(answer);
    });
  });
  const listening = new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return { received, listening, close: () => new Promise((r) => server.close(r)) };
}

const b64 = (text: string) => Buffer.from(text).toString('base64');
const warn = jest.fn();

describe('PodChannels', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-channels-'));
    warn.mockClear();
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Plays the runner: answers the engine's writes to `tunnel` (acks), returns what they carried once it had eof. */
  async function engineWrites(w: ReturnType<typeof wire>, tunnel: string): Promise<string> {
    let text = '';
    for (let seen = 0; ;) {
      const write = await w.until(
        (m) => m.op === 'tunnel_write' && m.tunnel === tunnel && w.sent.indexOf(m) >= seen,
      );
      seen = w.sent.indexOf(write) + 1;
      text += Buffer.from(String(write.data), 'base64').toString('utf8');
      w.reply({ ev: 'ack', id: write.id, found: true });
      if (write.eof === true) return text;
    }
  }

  it("opens the pod's egress channel once per runner and connects each egress tunnel to the session's proxy", async () => {
    const proxy = hostServer(path.join(dir, 'proxy.sock'), 'HTTP/1.1 200 OK\r\n\r\n');
    await proxy.listening;
    const w = wire();
    const channels = new PodChannels({ warn });
    const egress = { socketDir: dir } as SessionEgressAccess;
    const opening = channels.ensureEgress(w.connection, egress);
    const open = await w.until((m) => m.op === 'channel_open');
    expect(open).toEqual({ op: 'channel_open', kind: 'egress', id: open.id });
    w.reply({ ev: 'channel_opened', id: open.id, socket: '@switchyard-egress-00' });
    await opening;
    await channels.ensureEgress(w.connection, egress);
    expect(w.sent.filter((m) => m.op === 'channel_open')).toHaveLength(1);

    w.reply({ ev: 'tunnel_in', tunnel: 'in_1', target: 'egress', run: null });
    w.reply({ ev: 'tdata', tunnel: 'in_1', data: b64('GET http://example.com/ HTTP/1.1\r\n\r\n') });
    w.reply({ ev: 'tend', tunnel: 'in_1' });
    expect(await engineWrites(w, 'in_1')).toBe('HTTP/1.1 200 OK\r\n\r\n');
    expect(proxy.received).toEqual(['GET http://example.com/ HTTP/1.1\r\n\r\n']);
    // What it consumed of the code's bytes is acknowledged, so the runner's window opens again.
    expect(await w.until((m) => m.op === 'tunnel_ack')).toMatchObject({ tunnel: 'in_1', bytes: 36 });
    await proxy.close();
  });

  it('connects a call tunnel to the call socket of that run only while it is under way', async () => {
    const call = hostServer(path.join(dir, 'call.sock'), '{"id":1,"ok":true}\n');
    await call.listening;
    const w = wire();
    const channels = new PodChannels({ warn });
    const opening = channels.openCall(w.connection, 'act_1', { socketDir: dir } as CallChannel);
    const open = await w.until((m) => m.op === 'channel_open');
    expect(open).toEqual({ op: 'channel_open', kind: 'call', run: 'act_1', id: open.id });
    w.reply({ ev: 'channel_opened', id: open.id, socket: '@switchyard-call-ab' });
    const opened = await opening;
    expect(opened.inside).toBe('@switchyard-call-ab');

    w.reply({ ev: 'tunnel_in', tunnel: 'in_1', target: 'call', run: 'act_1' });
    w.reply({ ev: 'tdata', tunnel: 'in_1', data: b64('{"op":"input","id":1}\n') });
    w.reply({ ev: 'tend', tunnel: 'in_1' });
    expect(await engineWrites(w, 'in_1')).toBe('{"id":1,"ok":true}\n');
    expect(call.received).toEqual(['{"op":"input","id":1}\n']);

    // Another run's, or this run's once it ended: closed at once, nothing reaches the socket.
    w.reply({ ev: 'tunnel_in', tunnel: 'in_2', target: 'call', run: 'act_2' });
    expect(await w.until((m) => m.op === 'tunnel_close' && m.tunnel === 'in_2')).toBeDefined();
    const closing = opened.close();
    const closeOp = await w.until((m) => m.op === 'channel_close');
    expect(closeOp).toMatchObject({ run: 'act_1' });
    w.reply({ ev: 'ack', id: closeOp.id, found: true });
    await closing;
    w.reply({ ev: 'tunnel_in', tunnel: 'in_3', target: 'call', run: 'act_1' });
    expect(await w.until((m) => m.op === 'tunnel_close' && m.tunnel === 'in_3')).toBeDefined();
    expect(call.received).toHaveLength(1);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('for run act_2'));
    await call.close();
  });

  it('closes an egress tunnel of a runner that was given no egress', async () => {
    const w = wire();
    new PodChannels({ warn })
      .openCall(w.connection, 'act_1', { socketDir: dir } as CallChannel)
      .catch(() => undefined);
    w.reply({ ev: 'tunnel_in', tunnel: 'in_1', target: 'egress', run: null });
    expect(await w.until((m) => m.op === 'tunnel_close' && m.tunnel === 'in_1')).toBeDefined();
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('its session has no egress here'));
  });

  it('closes every tunnel the runner opens on a connection nobody took them on', async () => {
    const w = wire();
    w.reply({ ev: 'tunnel_in', tunnel: 'in_1', target: 'call', run: 'act_1' });
    expect(await w.until((m) => m.op === 'tunnel_close' && m.tunnel === 'in_1')).toBeDefined();
  });

  it('cuts the tunnel when the host socket is not there, and fails an egress the runner refused as EGRESS_SOCKET', async () => {
    const w = wire();
    const channels = new PodChannels({ warn });
    const opening = channels.openCall(w.connection, 'act_1', { socketDir: dir } as CallChannel);
    const open = await w.until((m) => m.op === 'channel_open');
    w.reply({ ev: 'channel_opened', id: open.id, socket: '@switchyard-call-ab' });
    await opening;
    w.reply({ ev: 'tunnel_in', tunnel: 'in_1', target: 'call', run: 'act_1' });
    expect(await w.until((m) => m.op === 'tunnel_close' && m.tunnel === 'in_1')).toBeDefined();

    const egress = channels.ensureEgress(w.connection, { socketDir: dir } as SessionEgressAccess);
    const egressOpen = await w.until((m) => m.op === 'channel_open' && m.kind === 'egress');
    w.reply({
      ev: 'error',
      id: egressOpen.id,
      code: 'egress',
      message: 'the egress forwarder did not start',
    });
    await expect(egress).rejects.toMatchObject({ code: 'EGRESS_SOCKET', retriable: true });
  });
});
