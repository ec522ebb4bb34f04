import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { USAGE_MAX_AGE_MS, type UsageRoot, WorkspaceUsage } from './workspace-usage';

describe('WorkspaceUsage', () => {
  let tmp: string;
  let root: UsageRoot;
  let usage: WorkspaceUsage;
  /** The walk the tracker would run: counts its calls, answers `disk`. */
  let disk: number;
  let walks: number;
  const measure = () => {
    walks++;
    return Promise.resolve(disk);
  };
  const noCap = () => undefined;
  /** Usage as the next cap check sees it. */
  const seen = async () => {
    let u = -1;
    (await usage.reserve(root, 0, measure, (x) => (u = x))).settle(0);
    return u;
  };

  beforeEach(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-usage-')));
    root = { realRoot: tmp, rootStat: await fs.lstat(tmp) };
    usage = new WorkspaceUsage();
    disk = 100;
    walks = 0;
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('walks once, then keeps the count from what ops report', async () => {
    const t = await usage.reserve(root, 10, measure, (u) => expect(u).toBe(100));
    t.settle(10);
    (await usage.reserve(root, 5, measure, noCap)).settle(7); // wrote a little more than reserved
    (await usage.track(root)).settle(-20);
    expect(await seen()).toBe(97);
    expect(walks).toBe(1);
  });

  it('undoes a reservation whose op changed nothing, and refuses over the cap without counting', async () => {
    (await usage.reserve(root, 50, measure, noCap)).settle(0);
    const full = new Error('full');
    await expect(
      usage.reserve(root, 1, measure, () => {
        throw full;
      }),
    ).rejects.toBe(full);
    expect(await seen()).toBe(100);
  });

  it('re-walks after markStale, after an op with an unknown effect, and once the count is too old', async () => {
    await seen();
    disk = 200;
    usage.markStale(tmp);
    expect(await seen()).toBe(200);
    disk = 300;
    (await usage.track(root)).settle(undefined);
    expect(await seen()).toBe(300);
    disk = 400;
    const now = performance.now();
    jest.spyOn(performance, 'now').mockReturnValue(now + USAGE_MAX_AGE_MS + 1);
    expect(await seen()).toBe(400);
    expect(walks).toBe(4);
  });

  it('trusts the count of a slow-to-walk workspace for longer, so re-walks stay a small share of time', async () => {
    let clock = 0;
    jest.spyOn(performance, 'now').mockImplementation(() => clock);
    const slow = () => {
      walks++;
      clock += 500; // this walk takes 500 ms
      return Promise.resolve(disk);
    };
    const check = async () => (await usage.reserve(root, 0, slow, noCap)).settle(0);
    await check();
    clock = 10 * 500 - 1; // just inside ten walk-durations from the start of the walk
    await check();
    expect(walks).toBe(1);
    clock = 10 * 500 + 1;
    await check();
    expect(walks).toBe(2);
  });

  it('ignores markStale for directories it does not track', () => {
    expect(() => usage.markStale(path.join(tmp, 'missing'))).not.toThrow();
  });

  it('starts over for a workspace re-created under the same path', async () => {
    await seen();
    disk = 5;
    const other = { ...root.rootStat, ino: root.rootStat.ino + 1 };
    let u = -1;
    (await usage.reserve({ realRoot: tmp, rootStat: other }, 0, measure, (x) => (u = x))).settle(0);
    expect(u).toBe(5);
  });

  it('walks only once the ops in flight have settled, and hands out no ticket meanwhile', async () => {
    await seen();
    const inFlight = await usage.reserve(root, 30, measure, noCap);
    usage.markStale(tmp);
    disk = 130; // what the disk holds once the op in flight lands
    let checked: number | undefined;
    const next = usage.reserve(root, 1, measure, (u) => (checked = u));
    await new Promise((r) => setImmediate(r));
    expect(walks).toBe(1); // still waiting for the op in flight
    expect(checked).toBeUndefined();
    inFlight.settle(30);
    (await next).settle(1);
    expect(walks).toBe(2);
    expect(checked).toBe(130); // counted once, by the walk, not again on top of it
  });

  it('does not trust a walk that a markStale overlapped', async () => {
    let release!: () => void;
    const slow = () =>
      new Promise<number>((resolve) => {
        walks++;
        release = () => resolve(disk);
      });
    const first = usage.reserve(root, 0, slow, noCap);
    await new Promise((r) => setImmediate(r));
    usage.markStale(tmp); // code wrote while the walk ran: the walk may have missed it
    release();
    (await first).settle(0);
    disk = 150;
    expect(await seen()).toBe(150);
    expect(walks).toBe(2);
  });
});
