import { Gauge, Histogram, type Registry } from 'prom-client';

/** How often the loop is sampled: a timer due every this many ms, whose lateness is the lag. */
const INTERVAL_MS = 20;
const LAG_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The event loop's lag: how late a timer due every 20 ms actually runs. The engine is one event loop for every
 * tenant, so anything that holds it (a costly regex, a huge body) delays every request; this makes that visible
 * (`switchyard_event_loop_lag_seconds`: a histogram, so a rate of samples over 0.1 s can alert) and the longest
 * stall since the last scrape (`switchyard_event_loop_lag_max_seconds`). A stall of 3 s is one sample of 3 s.
 */
export class EventLoopLag {
  private timer?: NodeJS.Timeout;
  private max = 0;
  private readonly histogram: Histogram;

  constructor(registry: Registry) {
    this.histogram = new Histogram({
      name: 'switchyard_event_loop_lag_seconds',
      help: 'How late a timer due every 20 ms ran: the time the event loop was held by other work',
      buckets: LAG_BUCKETS,
      registers: [registry],
    });
    const takeMax = (): number => {
      const max = this.max;
      this.max = 0;
      return max;
    };
    new Gauge({
      name: 'switchyard_event_loop_lag_max_seconds',
      help: 'The longest event loop lag since the last scrape',
      registers: [registry],
      collect() {
        this.set(takeMax());
      },
    });
  }

  start(): void {
    if (this.timer) return;
    let due = performance.now() + INTERVAL_MS;
    const tick = (): void => {
      const now = performance.now();
      const seconds = Math.max(0, now - due) / 1000;
      this.histogram.observe(seconds);
      this.max = Math.max(this.max, seconds);
      due = now + INTERVAL_MS;
      this.timer = setTimeout(tick, INTERVAL_MS).unref();
    };
    this.timer = setTimeout(tick, INTERVAL_MS).unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
