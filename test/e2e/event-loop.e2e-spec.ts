import { PerformanceObserver } from 'node:perf_hooks';
import { type ApiResponse, EngineHarness, LogCapture } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

/**
 * Nothing a tenant sends may hold the event loop (issue 27): the engine is one loop for every tenant. Each
 * reproduction of the issue (regexes in skill schemas and policies, bodies of hundreds of thousands of keys), then a
 * fuzz of pathological inputs over every route of the OpenAPI document (so a new route is covered without touching
 * this file), while a second client polls `GET /health/live` back to back: every answer to it stays under 100 ms,
 * and no request is answered 5xx.
 *
 * The engine runs in this process, so the poller shares its loop: a stall of the engine delays the poll in flight.
 * Every pathological body is built before polling starts, so that the test's own work does not count. A stall is
 * work: a poll counts as slow when it took LIVE_MS and the main thread spent at least LIVE_MS of CPU meanwhile, so
 * that a loaded machine that merely descheduled the loop (CI runs beside Docker, gVisor and Kubernetes on 2 cores)
 * is not taken for an engine holding it.
 */
jest.setTimeout(60_000);

/** The bound on every `GET /health/live` answer. */
const LIVE_MS = 100;

/** `{"k0":1,…}` of `n` keys, as text (built directly: stringifying such an object would itself hold the loop). */
const wideObject = (n: number): string => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(',')}}`;

/**
 * Polls `/health/live` back to back until stopped; the slow answers, with what ran at the time.
 *
 * A poll is slow when it took LIVE_MS of wall time and the main thread (the engine's loop) spent LIVE_MS of CPU
 * meanwhile, both beyond the garbage collector's pauses. The main thread's own CPU (`process.threadCpuUsage`), not
 * the process's: V8 compiles and marks on threads of its own, and on 2 busy cores those can take the CPU while the
 * loop waits for it, which is the machine's load, not the engine holding its loop. The collector's pauses (observed
 * as `gc` performance entries) are taken out: their length is set by the whole heap of this Jest process, which holds
 * the test's own multi-megabyte bodies and every earlier suite's garbage beside the engine, not by what a request
 * made the engine do. They are reported with each poll.
 */
class LivenessPoller {
  private stopped = false;
  private current = 'idle';
  private readonly candidates: Array<{ start: number; ms: number; cpuMs: number; during: string }> = [];
  private readonly pauses: Array<{ start: number; end: number }> = [];
  private readonly gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      this.pauses.push({ start: e.startTime, end: e.startTime + e.duration });
  });
  readonly slow: Array<{ ms: number; cpuMs: number; gcMs: number; during: string }> = [];
  private readonly done: Promise<number>;

  constructor(baseUrl: string) {
    this.gc.observe({ entryTypes: ['gc'] });
    this.done = (async () => {
      let polls = 0;
      while (!this.stopped) {
        const during = this.current;
        const start = performance.now();
        const cpu = process.threadCpuUsage();
        const res = await fetch(`${baseUrl}/health/live`);
        await res.arrayBuffer();
        const ms = performance.now() - start;
        const used = process.threadCpuUsage(cpu);
        const cpuMs = (used.user + used.system) / 1000;
        if (res.status !== 200) throw new Error(`/health/live answered ${res.status}`);
        // Wall time without the main thread's CPU to match is the machine descheduling the loop, not the loop held.
        if (ms >= LIVE_MS && cpuMs >= LIVE_MS) {
          this.candidates.push({ start, ms, cpuMs, during: `${during} / ${this.current}` });
        }
        polls++;
      }
      return polls;
    })();
  }

  /** The collector's pause time in all (ms), once stopped. */
  gcPauses(): number {
    return this.gcWithin(0, Number.MAX_SAFE_INTEGER);
  }

  /** The collector's pause time within [start, end]. */
  private gcWithin(start: number, end: number): number {
    return this.pauses.reduce((t, p) => t + Math.max(0, Math.min(end, p.end) - Math.max(start, p.start)), 0);
  }

  /** Names what the test is sending now, for the report of a slow poll. */
  sending(what: string): void {
    this.current = what;
  }

  async stop(): Promise<number> {
    this.stopped = true;
    const polls = await this.done;
    await new Promise((resolve) => setTimeout(resolve, 20)); // the last gc entries are delivered
    this.gc.disconnect();
    for (const c of this.candidates) {
      const gcMs = this.gcWithin(c.start, c.start + c.ms);
      if (c.ms - gcMs >= LIVE_MS && c.cpuMs - gcMs >= LIVE_MS) {
        this.slow.push({
          ms: Math.round(c.ms),
          cpuMs: Math.round(c.cpuMs),
          gcMs: Math.round(gcMs),
          during: c.during,
        });
      }
    }
    return polls;
  }
}

/**
 * A full collection before polling starts, where the runner exposes one (`npm test` runs Jest with `--expose-gc`):
 * this process holds the test's own multi-megabyte bodies and every earlier test's garbage beside the engine, and a
 * major collection of that heap, whenever it falls, pauses the loop the poller measures. Starting clean leaves the
 * engine's own work to be measured.
 */
const collectGarbage = (): void => (globalThis as { gc?: () => void }).gc?.();

/** The bodies of 200 000 and 50 000 keys, built once before any polling. */
const HUGE = `{"metadata":${wideObject(200_000)}}`;
const WIDE = `{"metadata":${wideObject(50_000)}}`;
/** Parts of the fuzz's bodies, built once; each body is a concatenation of them (cheap: V8 joins strings lazily). */
const BOMB = JSON.stringify(`${'a'.repeat(40)}!`);
const LONG = JSON.stringify('a'.repeat(300_000));
const MANY_OBJECTS = JSON.stringify(Array(50_000).fill({}));
const WIDE_9000 = wideObject(9_000);
/** Bash code of the largest size (SWITCHYARD_MAX_CODE_BYTES, 1 MiB), of what the risk rules take longest over. */
const LARGEST_CODE = `${' '.repeat(1024 * 1024 - 16)}\necho largest`;
const LARGEST_ACTION = JSON.stringify({ type: 'code', language: 'bash', code: LARGEST_CODE });
const WHOLE_BODIES = [
  wideObject(10_001),
  `[${Array(150_000).fill('0').join(',')}]`,
  `${'['.repeat(100)}${']'.repeat(100)}`,
  `{"a":${'{"a":'.repeat(60)}1${'}'.repeat(60)}}`,
];

describe('the event loop under pathological input', () => {
  const logs = new LogCapture();
  let engine: EngineHarness;
  let sid: string;
  let poller: LivenessPoller | undefined;
  const answers = new Map<string, number>();

  /** Sends `raw` JSON text, records the status, and fails on any 5xx. */
  const send = async (method: string, urlPath: string, raw?: string): Promise<ApiResponse> => {
    poller?.sending(`${method} ${urlPath} (${raw?.length ?? 0} bytes)`);
    const res = await engine.request(method, urlPath, undefined, raw === undefined ? {} : { raw });
    answers.set(`${res.status}`, (answers.get(`${res.status}`) ?? 0) + 1);
    if (res.status >= 500) {
      throw new Error(
        `${method} ${urlPath} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`,
      );
    }
    return res;
  };

  beforeAll(async () => {
    engine = await EngineHarness.start(
      {
        // Container tiers are not needed (they deny at once); code runs in the subprocess tier.
        DOCKER_HOST: 'unix:///nonexistent/switchyard-event-loop/docker.sock',
        SWITCHYARD_POOL_MIN: '0',
        SWITCHYARD_BROWSER_ENABLED: 'false',
      },
      { logs },
    );
    sid = await engine.createSession();
    // The first answers of a fresh engine are slow (code not yet compiled, once per process): polling starts warm,
    // after each shape of body has been refused once.
    for (let i = 0; i < 20; i++) await engine.request('GET', '/health/live');
    for (const raw of [
      ...WHOLE_BODIES,
      `{"x":${LONG}}`,
      `{"x":${MANY_OBJECTS}}`,
      `{"x":${WIDE_9000}}`,
      WIDE,
    ]) {
      await engine.request('POST', '/v1/sessions', undefined, { raw });
    }
    // So is the first skill (its schemas compiled, its pattern's engine loaded, its runner started): 50 ms on an idle
    // machine, once per process.
    const warm = { type: 'object', properties: { s: { type: 'string', pattern: '^a+$' } }, required: ['s'] };
    await engine.request('POST', '/v1/skills', {
      name: 'warm-up',
      description: 'compiled once before polling',
      inputSchema: warm,
      outputSchema: { type: 'object' },
      language: 'node',
      code: 'exports.main = async (input) => input;\n',
    });
    await engine.action(sid, { type: 'skill', name: 'warm-up', input: { s: 'a' } });
    await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'skill',
      name: 'warm-up',
      input: { s: '!' },
    });
    await engine.request('DELETE', '/v1/skills/warm-up');
  });
  afterAll(async () => {
    await poller?.stop();
    await engine?.stop();
  });

  beforeEach(() => {
    collectGarbage();
    poller = new LivenessPoller(engine.baseUrl);
  });
  // A test that failed before its own check still stops its poller.
  afterEach(async () => {
    await poller?.stop();
    poller = undefined;
  });

  /** Stops the poller: it polled throughout, and every answer came under LIVE_MS. */
  const expectLive = async (): Promise<void> => {
    const p = poller!;
    poller = undefined;
    const polls = await p.stop();
    expect({ polls: polls > 0, slow: p.slow }).toEqual({ polls: true, slow: [] });
  };

  it('the poller sees a held loop: 300 ms of synchronous work in this process is one slow answer', async () => {
    const p = poller!;
    poller = undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
    p.sending('a busy loop of 300 ms');
    const until = performance.now() + 300;
    while (performance.now() < until);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await p.stop();
    expect(p.slow).toEqual([
      expect.objectContaining({ ms: expect.any(Number), during: expect.stringContaining('a busy loop') }),
    ]);
    expect(p.slow[0].ms).toBeGreaterThanOrEqual(300);
    expect(p.slow[0].cpuMs).toBeGreaterThanOrEqual(LIVE_MS);
  });

  it('a pause of the garbage collector is not taken for the engine holding its loop, and is reported', async () => {
    await poller!.stop();
    // A heap of a few million live objects, built before polling: collecting it fully pauses the loop.
    const heap = Array.from({ length: 3_000_000 }, (_, i) => ({ i }));
    const p = new LivenessPoller(engine.baseUrl);
    poller = undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
    p.sending('a full collection');
    const t0 = performance.now();
    collectGarbage();
    const paused = performance.now() - t0;
    await new Promise((resolve) => setTimeout(resolve, 50));
    await p.stop();
    expect(heap).toHaveLength(3_000_000);
    expect(paused).toBeGreaterThanOrEqual(LIVE_MS); // the pause was long enough to be a slow answer by wall time
    expect(p.slow).toEqual([]);
    expect(p.gcPauses()).toBeGreaterThanOrEqual(paused * 0.9);
  });

  it('a skill whose inputSchema or outputSchema pattern is ^(a+)+$ checks "a"×40 + "!" at once', async () => {
    const s = { type: 'string', pattern: '^(a+)+$' };
    const schema = { type: 'object', properties: { s }, required: ['s'] };
    const add = await send(
      'POST',
      '/v1/skills',
      JSON.stringify({
        name: 'redos-in',
        description: 'inputSchema with a nested quantifier',
        inputSchema: schema,
        outputSchema: { type: 'object' },
        language: 'node',
        code: 'exports.main = async (input) => input;\n',
      }),
    );
    expect(add.status).toBe(201);
    const bad = await send(
      'POST',
      `/v1/sessions/${sid}/actions`,
      JSON.stringify({ type: 'skill', name: 'redos-in', input: { s: `${'a'.repeat(40)}!` } }),
    );
    expect([bad.status, bad.body.error.code, fieldsOf(bad.body), bad.body.error.message]).toEqual([
      400,
      'SKILL_INPUT_INVALID',
      ['input.s'],
      expect.stringContaining('must match pattern'),
    ]);
    const ok = await send(
      'POST',
      `/v1/sessions/${sid}/actions`,
      JSON.stringify({ type: 'skill', name: 'redos-in', input: { s: 'a'.repeat(40) } }),
    );
    expect(ok.body).toMatchObject({ status: 'succeeded', output: { value: { s: 'a'.repeat(40) } } });

    expect(
      (
        await send(
          'POST',
          '/v1/skills',
          JSON.stringify({
            name: 'redos-out',
            description: 'outputSchema with a nested quantifier',
            inputSchema: { type: 'object' },
            outputSchema: schema,
            language: 'node',
            code: `exports.main = async () => ({ s: ${JSON.stringify(`${'a'.repeat(40)}!`)} });\n`,
          }),
        )
      ).status,
    ).toBe(201);
    const out = await send(
      'POST',
      `/v1/sessions/${sid}/actions`,
      JSON.stringify({ type: 'skill', name: 'redos-out', input: {} }),
    );
    expect(out.body).toMatchObject({ status: 'failed', error: { code: 'SKILL_OUTPUT_INVALID' } });
    await expectLive();
  });

  it('code of the largest size is scored for risk without holding the loop', async () => {
    const one = await send('POST', `/v1/sessions/${sid}/actions`, LARGEST_ACTION);
    expect(one.body).toMatchObject({ status: 'succeeded', stdout: 'largest\n', risk: { level: 'low' } });
    await expectLive();
  });

  it('a skill schema with a pattern no linear-time engine runs is refused at registration, naming the field', async () => {
    for (const pattern of ['(a)\\1', '(?=a)a', '[a-z]{1,1000}'.repeat(20)]) {
      const res = await send(
        'POST',
        '/v1/skills',
        JSON.stringify({
          name: 'backref',
          description: 'x',
          inputSchema: { type: 'object', properties: { s: { type: 'string', pattern } } },
          outputSchema: { type: 'object' },
          language: 'node',
          code: 'exports.main = async () => ({});\n',
        }),
      );
      expect([res.status, fieldsOf(res.body)]).toEqual([400, ['inputSchema']]);
      expect(res.body.error.message).toContain('pattern');
    }
    await expectLive();
  });

  it('a policy regex /^(a|a)*b$/ is accepted and matched against a host of 28 a’s at once', async () => {
    const session = await send(
      'POST',
      '/v1/sessions',
      JSON.stringify({
        policy: { rules: [{ effect: 'deny', match: { host: ['/^(a|a)*b$/', '*a*a*a*a*a*a*a*a*b'] } }] },
      }),
    );
    expect(session.status).toBe(201);
    const host = 'a'.repeat(28);
    const run = await send(
      'POST',
      `/v1/sessions/${session.body.id}/actions`,
      JSON.stringify({ type: 'code', language: 'python', code: `# http://${host}/\nprint(1)\n` }),
    );
    expect(run.body).toMatchObject({ status: 'succeeded', stdout: '1\n' });
    const denied = await send(
      'POST',
      `/v1/sessions/${session.body.id}/actions`,
      JSON.stringify({ type: 'code', language: 'python', code: `# http://${host}b/\nprint(1)\n` }),
    );
    expect(denied.body).toMatchObject({ status: 'denied' });
    await expectLive();
  });

  it('bodies of 200 000 keys to POST /v1/sessions and …/approve are refused at once, naming the limit', async () => {
    const huge = HUGE;
    expect(huge.length).toBeGreaterThan(2_000_000);
    for (const urlPath of ['/v1/sessions', `/v1/sessions/${sid}/actions/act_none/approve`]) {
      const res = await send('POST', urlPath, huge);
      expect([res.status, res.body.error.code]).toEqual([400, 'TOO_MANY_VALUES']);
      expect(res.body.error.message).toContain('100000 values');
    }
    const wide = await send('POST', '/v1/sessions', WIDE);
    expect([wide.status, wide.body.error.code, fieldsOf(wide.body)]).toEqual([
      400,
      'TOO_MANY_KEYS',
      ['metadata'],
    ]);
    expect(wide.body.error.message).toContain('at most 10000');
    await expectLive();
  });

  it('a fuzz of pathological bodies and queries over every route of the OpenAPI document: never 5xx', async () => {
    const doc = (await engine.request('GET', '/docs-json')).body as {
      paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; oneOf?: unknown[] }> };
    };
    // Every field name any request schema has: each route gets each of them, whatever it declares.
    const fields = new Set<string>();
    for (const schema of Object.values(doc.components.schemas)) {
      for (const name of Object.keys(schema.properties ?? {})) fields.add(name);
    }
    const names = [...fields].map((f) => JSON.stringify(f));
    /** The `n`th body: a whole-body shape, or one of the fields holding a long string, a regex bomb, many objects or a wide object. */
    const body = (n: number): string => {
      if (n % 5 === 0) return WHOLE_BODIES[(n / 5) % WHOLE_BODIES.length];
      const name = names[n % names.length];
      return [
        `{${name}:${LONG}}`,
        `{${name}:${BOMB},"pattern":"^(a+)+$","regex":"(a|a)*b"}`,
        `{${name}:${MANY_OBJECTS}}`,
        `{${name}:${WIDE_9000}}`,
      ][n % 4];
    };
    const query = 'a'.repeat(6000);
    const routes = Object.entries(doc.paths).flatMap(([template, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        method: method.toUpperCase(),
        path: template.replace(/\{(\w+)\}/g, (_, name: string) =>
          name === 'sessionId' ? sid : `${name}_none`,
        ),
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      })),
    );
    expect(routes.length).toBeGreaterThan(30);
    // Reading the document was the test's own work: the poll starts again from here.
    await poller!.stop();
    collectGarbage();
    poller = new LivenessPoller(engine.baseUrl);
    const started = performance.now();
    let sent = 0;
    for (const route of routes) {
      if (route.method === 'DELETE') continue;
      if (route.method === 'GET') {
        // Long and repeated query values.
        for (const q of route.query) {
          await send('GET', `${route.path}?${q}=${query}`);
          await send(
            'GET',
            `${route.path}?${Array(500)
              .fill(`${q}=${encodeURIComponent(BOMB)}`)
              .join('&')}`,
          );
          sent += 2;
        }
        continue;
      }
      // Every route is sent a few of the bodies, in turn, so that each body reaches many routes and the whole
      // stays within seconds.
      for (let i = 0; i < 6; i++) await send(route.method, route.path, body(sent++));
    }
    expect(sent).toBeGreaterThan(100);
    expect(performance.now() - started).toBeLessThan(45_000);
    await expectLive();
    // The engine's own view: its lag histogram counted the whole run, and nothing was logged as an engine fault.
    const metrics = await engine.request('GET', '/metrics');
    expect(metrics.body).toMatch(/^switchyard_event_loop_lag_seconds_count \d+$/m);
    expect(metrics.body).toMatch(/^switchyard_event_loop_lag_max_seconds /m);
    expect(logs.lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
