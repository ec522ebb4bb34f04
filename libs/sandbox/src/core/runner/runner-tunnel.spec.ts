import { RunnerTunnel, TUNNEL_ACK_BYTES, type TunnelLink } from './runner-tunnel';

/** A link that records what the tunnel asked of the runner connection. */
class RecordingLink implements TunnelLink {
  readonly acked: number[] = [];
  readonly writes: Array<{ bytes: number; eof: boolean }> = [];
  readonly closed: string[] = [];
  readonly forgotten: string[] = [];
  found = true;

  tunnelWrite(_tunnel: string, data: Buffer, eof: boolean): Promise<{ found: boolean }> {
    this.writes.push({ bytes: data.length, eof });
    return Promise.resolve({ found: this.found });
  }
  tunnelAck(_tunnel: string, bytes: number): void {
    this.acked.push(bytes);
  }
  tunnelClose(tunnel: string): void {
    this.closed.push(tunnel);
  }
  forget(tunnel: string): void {
    this.forgotten.push(tunnel);
  }
}

const settle = () => new Promise((r) => setImmediate(r));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('RunnerTunnel', () => {
  it('acknowledges only what its consumer takes, so the runner stops at its window', async () => {
    const link = new RecordingLink();
    const tunnel = new RunnerTunnel('tun_1', link);
    tunnel.onOpened('prc_1', null);
    const chunk = Buffer.alloc(64 * 1024, 7);
    for (let i = 0; i < 16; i++) tunnel.onData(chunk); // the runner's whole 1 MiB window, nobody reading
    await settle();
    expect(sum(link.acked)).toBe(0);
    expect(tunnel.bufferedBytes).toBe(16 * chunk.length);
    let read = 0;
    tunnel.on('data', (c: Buffer) => (read += c.length));
    await settle();
    expect(read).toBe(16 * chunk.length);
    // Acknowledged in batches as it was read; what is left unacknowledged is below one batch.
    expect(link.acked.every((n) => n >= TUNNEL_ACK_BYTES)).toBe(true);
    expect(16 * chunk.length - sum(link.acked)).toBeLessThan(TUNNEL_ACK_BYTES);
    expect(tunnel.bufferedBytes).toBe(0);
    tunnel.onServerEnd();
    await settle();
    expect(sum(link.acked)).toBe(16 * chunk.length); // the rest, at the end
  });

  it('fails a write the runner no longer knows, and closes the socket when destroyed early', async () => {
    const link = new RecordingLink();
    const tunnel = new RunnerTunnel('tun_2', link);
    tunnel.onOpened(null, null);
    link.found = false;
    const failed = new Promise<Error>((resolve) => tunnel.once('error', resolve));
    tunnel.write('late');
    await expect(failed).resolves.toMatchObject({ message: 'tunnel to the box: the connection is closed' });
    expect(link.closed).toEqual(['tun_2']);
    expect(link.forgotten).toEqual(['tun_2']);
  });

  it('leaves the socket to the runner once both sides ended', async () => {
    const link = new RecordingLink();
    const tunnel = new RunnerTunnel('tun_3', link);
    tunnel.onOpened(null, null);
    tunnel.end(Buffer.from('request'));
    tunnel.resume();
    tunnel.onServerEnd();
    await new Promise((r) => tunnel.once('close', r));
    expect(link.writes).toEqual([
      { bytes: 7, eof: false },
      { bytes: 0, eof: true },
    ]);
    expect(link.closed).toEqual([]);
    expect(link.forgotten).toEqual(['tun_3']);
  });
});
