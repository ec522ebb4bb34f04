import { JupyterKernel, type JupyterPeer, MAX_QUEUED_REQUESTS } from './jupyter-kernel';
import type { JupyterMessage } from './jupyter-messages';

const kernel = () => new JupyterKernel('k-1', 'python3', 'python', 'ses_1', 'open', () => new Date(0));

/** A peer that records what it was sent and whether it was closed. */
function peer(): JupyterPeer & { sent: JupyterMessage[]; closedWith?: number } {
  const p = {
    sent: [] as JupyterMessage[],
    closedWith: undefined as number | undefined,
    send: (m: JupyterMessage) => p.sent.push(m),
    close: (code: number) => (p.closedWith = code),
  };
  return p;
}

describe('a Jupyter kernel: its shell queue and its connections', () => {
  it('runs shell requests one at a time, in the order they came', async () => {
    const k = kernel();
    const order: string[] = [];
    let release!: () => void;
    const first = new Promise<void>((r) => (release = r));
    k.enqueue(async () => {
      order.push('first starts');
      await first;
      order.push('first ends');
    });
    const second = new Promise<void>((resolve) =>
      k.enqueue(async () => {
        order.push('second');
        resolve();
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['first starts']);
    release();
    await second;
    expect(order).toEqual(['first starts', 'first ends', 'second']);
  });

  it('aborts the requests waiting when a cell fails, not those that come after', async () => {
    const k = kernel();
    const seen: Array<[number, boolean]> = [];
    let fail!: () => void;
    const failing = new Promise<void>((r) => (fail = r));
    k.enqueue(async () => {
      await failing;
      k.abortWaiting();
    });
    k.enqueue(async (seq) => void seen.push([seq, k.aborted(seq)]));
    await new Promise((r) => setImmediate(r));
    fail();
    await new Promise((r) => setImmediate(r));
    const later = new Promise<void>((resolve) =>
      k.enqueue(async (seq) => {
        seen.push([seq, k.aborted(seq)]);
        resolve();
      }),
    );
    await later;
    expect(seen).toEqual([
      [2, true],
      [3, false],
    ]);
  });

  it('takes at most MAX_QUEUED_REQUESTS waiting requests', () => {
    const k = kernel();
    const never = new Promise<void>(() => undefined);
    for (let i = 0; i < MAX_QUEUED_REQUESTS; i++) expect(k.enqueue(() => never)).toBe(true);
    expect(k.enqueue(() => never)).toBe(false);
  });

  it('publishes to every connection, is busy while handling a request, and closes them all when it ends', () => {
    const k = kernel();
    const [a, b] = [peer(), peer()];
    k.attach(a);
    k.attach(b);
    expect(k.connections).toBe(2);
    const done = k.begin();
    expect(k.busy).toBe(true);
    k.publish({ msg_type: 'status' } as JupyterMessage);
    expect([a.sent.length, b.sent.length]).toEqual([1, 1]);
    done();
    done();
    expect(k.busy).toBe(false);
    k.detach(b);
    k.end(1001, 'the kernel was deleted');
    expect([k.ended, a.closedWith, b.closedWith, k.connections]).toEqual([true, 1001, undefined, 0]);
  });
});
