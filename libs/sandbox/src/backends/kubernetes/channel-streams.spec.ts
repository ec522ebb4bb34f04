import { ChannelStreams, exitCodeOf, type ChannelSocket } from './channel-streams';

/** A socket that records what is sent. */
function socket(protocol: string): ChannelSocket & { sent: Buffer[]; closed: number } {
  const s = {
    protocol,
    sent: [] as Buffer[],
    closed: 0,
    send(data: Buffer, callback: (err?: Error) => void) {
      s.sent.push(Buffer.from(data));
      setImmediate(() => callback());
    },
    close() {
      s.closed++;
    },
  };
  return s;
}

const frame = (channel: number, text: string) => Buffer.concat([Buffer.from([channel]), Buffer.from(text)]);

describe('ChannelStreams (channel.k8s.io over a WebSocket)', () => {
  it('sends stdin on channel 0 in bounded frames and half-closes it with v5', async () => {
    const ws = socket('v5.channel.k8s.io');
    const streams = new ChannelStreams(ws);
    const big = Buffer.alloc(600 * 1024, 7);
    await new Promise<void>((resolve) => streams.stdin.end(big, resolve));

    const data = ws.sent.slice(0, -1);
    expect(data.every((f) => f[0] === 0 && f.length <= 256 * 1024 + 1)).toBe(true);
    expect(Buffer.concat(data.map((f) => f.subarray(1)))).toEqual(big);
    expect(ws.sent.at(-1)).toEqual(Buffer.from([255, 0]));
    expect(streams.halfCloses).toBe(true);
  });

  it('cannot half-close stdin before v5: it sends no close frame', async () => {
    const ws = socket('v4.channel.k8s.io');
    const streams = new ChannelStreams(ws);
    await new Promise<void>((resolve) => streams.stdin.end(Buffer.from('x'), resolve));
    expect(ws.sent).toEqual([Buffer.from([0, 0x78])]);
  });

  it('splits output by channel, ends streams on a close frame or the socket close, reads the status', async () => {
    const streams = new ChannelStreams(socket('v5.channel.k8s.io'));
    const out: string[] = [];
    const err: string[] = [];
    streams.stdout.on('data', (d: Buffer) => out.push(d.toString()));
    streams.stderr.on('data', (d: Buffer) => err.push(d.toString()));
    let ended = 0;
    streams.stdout.on('end', () => ended++);
    streams.stderr.on('end', () => ended++);
    streams.receive(frame(1, 'hello '));
    streams.receive(frame(2, 'oops'));
    streams.receive(frame(1, 'world'));
    streams.receive(Buffer.from([255, 1]));
    streams.receive(
      frame(
        3,
        JSON.stringify({
          status: 'Failure',
          reason: 'NonZeroExitCode',
          details: { causes: [{ reason: 'ExitCode', message: '3' }] },
        }),
      ),
    );
    streams.socketClosed();
    await streams.closed;
    await new Promise((r) => setImmediate(r));

    expect(out.join('')).toBe('hello world');
    expect(err.join('')).toBe('oops');
    expect(ended).toBe(2);
    expect(exitCodeOf(streams.status!)).toBe(3);
  });

  it('reads exit codes from statuses', () => {
    expect(exitCodeOf({ status: 'Success' })).toBe(0);
    expect(
      exitCodeOf({ status: 'Failure', reason: 'InternalError', message: 'exec failed' }),
    ).toBeUndefined();
  });

  it('close() closes the socket once and ends everything', async () => {
    const ws = socket('v5.channel.k8s.io');
    const streams = new ChannelStreams(ws);
    streams.close();
    streams.close();
    await streams.closed;
    expect(ws.closed).toBe(1);
    streams.receive(frame(1, 'late')); // ignored after the close
  });
});
