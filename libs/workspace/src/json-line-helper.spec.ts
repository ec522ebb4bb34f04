import { Logger } from '@nestjs/common';
import { HelperUnavailable, JsonLineHelper } from './json-line-helper';

/** A helper in node: answers `{"echo":x}` after `delay` ms, `{"die":true}` by exiting, `{"hang":true}` never. */
const SCRIPT = String.raw`
process.stdout.write('{"ready":true}\n');
let buf = '';
process.stdin.on('data', (d) => {
  buf += d;
  for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
    const r = JSON.parse(buf.slice(0, nl));
    buf = buf.slice(nl + 1);
    if (r.die) process.exit(3);
    if (r.hang) continue;
    setTimeout(() => process.stdout.write(JSON.stringify({ id: r.id, echo: r.echo, pid: process.pid }) + '\n'), r.delay ?? 0);
  }
});
`;

type Req = { echo?: string; delay?: number; die?: boolean; hang?: boolean };
type Rep = { echo: string; pid: number };

describe('JsonLineHelper', () => {
  const helpers: JsonLineHelper<Req, Rep>[] = [];
  const make = (command = process.execPath, requestTimeoutMs = 5000) => {
    const h = new JsonLineHelper<Req, Rep>({
      name: 'test helper',
      command,
      args: ['-e', SCRIPT],
      env: {},
      startTimeoutMs: 5000,
      requestTimeoutMs,
      logger: new Logger('test'),
    });
    helpers.push(h);
    return h;
  };
  afterEach(() => {
    for (const h of helpers.splice(0)) h.close();
  });

  it('matches replies to requests by id, whatever their order', async () => {
    const h = make();
    const slow = h.call({ echo: 'slow', delay: 50 });
    const fast = h.call({ echo: 'fast' });
    expect((await fast).echo).toBe('fast');
    expect((await slow).echo).toBe('slow');
  });

  it('rejects what a dying helper had pending, and starts a new one for the next call', async () => {
    const h = make();
    const first = (await h.call({ echo: 'a' })).pid;
    const pending = h.call({ echo: 'never', delay: 10_000 });
    await expect(h.call({ die: true })).rejects.toBeInstanceOf(HelperUnavailable);
    await expect(pending).rejects.toThrow(/test helper exited \(code 3\)/);
    const second = (await h.call({ echo: 'b' })).pid;
    expect(second).not.toBe(first);
    expect(h.gone).toBe(false);
  });

  it('kills a helper that does not answer in time; its successor serves the next calls', async () => {
    const h = make(process.execPath, 200);
    await expect(h.call({ hang: true })).rejects.toThrow(/did not answer within 200 ms/);
    // Sent while the killed one is still exiting: its end must not take this request with it.
    expect((await h.call({ echo: 'again', delay: 50 })).echo).toBe('again');
  });

  it('is unavailable where it cannot start, and after close', async () => {
    const missing = make('/nonexistent/interpreter');
    expect(await missing.start()).toBe(false);
    expect(missing.gone).toBe(true);
    await expect(missing.call({ echo: 'x' })).rejects.toBeInstanceOf(HelperUnavailable);
    const h = make();
    expect(await h.start()).toBe(true);
    h.close();
    await expect(h.call({ echo: 'x' })).rejects.toBeInstanceOf(HelperUnavailable);
  });
});
