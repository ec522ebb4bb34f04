import { Registry } from 'prom-client';
import { EventLoopLag } from './event-loop-lag';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('EventLoopLag', () => {
  it('records a stall of the event loop as one sample of its length, and the longest since the last scrape', async () => {
    const registry = new Registry();
    const lag = new EventLoopLag(registry);
    lag.start();
    try {
      await sleep(60);
      const until = performance.now() + 300;
      while (performance.now() < until) {
        /* hold the loop, as a costly request would */
      }
      await sleep(60);
      const text = await registry.metrics();
      const max = Number(/^switchyard_event_loop_lag_max_seconds (\S+)$/m.exec(text)![1]);
      expect(max).toBeGreaterThanOrEqual(0.25);
      // One sample landed in a bucket over 0.25 s and none were counted twice.
      const bucket = (le: string) =>
        Number(
          new RegExp(`^switchyard_event_loop_lag_seconds_bucket\\{le="${le}"\\} (\\d+)$`, 'm').exec(text)![1],
        );
      const count = Number(/^switchyard_event_loop_lag_seconds_count (\d+)$/m.exec(text)![1]);
      expect(count - bucket('0.25')).toBe(1);
      expect(count).toBeGreaterThanOrEqual(3);
      // The maximum is since the last scrape.
      await sleep(60);
      const next = await registry.metrics();
      expect(Number(/^switchyard_event_loop_lag_max_seconds (\S+)$/m.exec(next)![1])).toBeLessThan(0.25);
    } finally {
      lag.stop();
    }
  });
});
