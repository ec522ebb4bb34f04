import * as fc from 'fast-check';
import { ACTION_DTO_CLASSES } from '../../apps/engine/src/engine/actions/dto/action-body';
import { BROWSER_ACTION_DTOS } from '../../apps/engine/src/engine/actions/dto/browser-action.dto';
import { dtoSchema } from '../../apps/engine/src/engine/tools/tool-catalog';
import { BrowserSite } from '../support/browser-site';
import { type ApiResponse, EngineHarness, LogCapture } from '../support/engine-harness';
import { fieldsOf, isErrorEnvelope } from '../support/error-body';

/**
 * Property-based: every action DTO, plans, tool calls, sessions and retries with arbitrary JSON in every field. The
 * engine never answers 5xx, a 400 names a field, no action ends `error`/`internal`, nothing is logged as an engine
 * fault, and a normal request works after each property. Field names come from the validation classes themselves
 * (their JSON schemas), so a new field is fuzzed without touching this file.
 *
 * Each body is drawn tame (every field plausible, so that most requests run) or wild (any field may hold any JSON
 * value, a field may be dropped or an unknown one added). Bounded to stay fast: Docker is pointed at a socket that
 * does not exist (container tiers deny at once), the browser is disabled (browser actions are recorded denied), and
 * code runs at most 3 s. A failure prints the seed and the shrunk counterexample; FUZZ_SEED=<seed> replays it,
 * FUZZ_SCALE=<n> multiplies the runs.
 */
jest.setTimeout(120_000);

const SEED = Number(process.env.FUZZ_SEED ?? 12_042_026);
/** More runs for a longer hunt (FUZZ_SCALE=10); the default keeps the file well under a minute. */
const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const MAX_TIMEOUT_MS = 3000;

type Prop = { type?: string; enum?: unknown[]; minimum?: number; maximum?: number };
type Schema = { properties: Record<string, Prop>; required: string[] };
type Body = Record<string, unknown>;

/** Values of the wrong kind, at the edges of their kind, or just hostile. */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(1e308, -1e308, 2 ** 53 + 2, -(2 ** 53) - 2, -1, 0, 0.5, 1e-7, 2 ** 32, 2 ** 31),
  fc.integer({ min: -1_000_000, max: -1 }),
  fc.constantFrom(
    'x'.repeat(70_000),
    '',
    ' ',
    '\u0000',
    '..',
    '../../etc/passwd',
    '/etc/passwd',
    '%2e%2e/x',
    'a\nb',
    'a\\b',
    'a\uD800b', // lone surrogates
    '\uDFFF',
    '\u202Eexe.txt', // bidi and zero-width
    'a\u200Bb',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  fc.boolean(),
);

const pathLike = fc.constantFrom(
  'a.txt',
  'dir/b.txt',
  'dir',
  'dir/',
  '.',
  'new/deep/c.md',
  'ü-数据.txt',
  'x.png',
);
/** Strings that fit a field by its name, so that many requests get past validation and run. */
type Strings = Record<string, fc.Arbitrary<unknown>>;
const STRINGS: Strings = {
  path: pathLike,
  to: pathLike,
  code: fc.constantFrom('true', 'echo hi', 'print(1)', 'console.log(1)', 'exit 3', '1/0', ''),
  command: fc.constantFrom('true', 'echo hi', 'exit 3', 'ls'),
  stdin: fc.string({ maxLength: 20 }),
  content: fc.string({ maxLength: 50 }),
  find: fc.constantFrom('a', 'hi', ''),
  replace: fc.string({ maxLength: 10 }),
  pattern: fc.constantFrom('*', '**/*.txt', 'a', '(', '[', '(a+)+$', '{a,b}', '**'),
  glob: fc.constantFrom('*.txt', '**', '['),
  cursor: fc.constantFrom('abc', 'eyJ4IjoxfQ'),
  url: fc.constantFrom(
    'http://127.0.0.2:1/',
    'https://example.org',
    'file:///etc/passwd',
    'javascript:1',
    'x',
  ),
  selector: fc.constantFrom('#x', 'a', 'text=hi', '>>>'),
  tabId: fc.constantFrom('tab_1', 'tab_999999999'),
  key: fc.constantFrom('Enter', 'Control+A'),
  script: fc.constantFrom('1', 'document.title'),
};

/** A value that fits the field's schema (its type and bounds), chosen by the field's name where that helps. */
function plausible(name: string, p: Prop, strings: Strings): fc.Arbitrary<unknown> {
  if (p.enum) return fc.constantFrom(...p.enum);
  if (p.type === 'integer') {
    // A timeout that runs is bounded by the engine's; code that runs stays short.
    const max = name === 'timeoutMs' || name === 'delayMs' ? 1500 : (p.maximum ?? 100_000);
    return fc.integer({ min: p.minimum ?? 0, max });
  }
  if (p.type === 'boolean') return fc.boolean();
  if (p.type === 'object') {
    const key = fc.constantFrom('A', 'B_1', 'LANG', 'PATH', 'LD_PRELOAD');
    return fc.dictionary(key, fc.string({ maxLength: 8 }), { maxKeys: 2 });
  }
  if (p.type === 'array') return fc.array(fc.constantFrom('a', 'b', ''), { minLength: 1, maxLength: 3 });
  return strings[name] ?? STRINGS[name] ?? fc.string({ maxLength: 30 });
}

/** Builders of request bodies, tame or wild. */
interface Gen {
  /** `good`, or (wild) one time in `weight + 1` a hostile value instead. */
  field(good: fc.Arbitrary<unknown>, weight?: number): fc.Arbitrary<unknown>;
  /** A record of these fields, the required ones there; wild: a field may be dropped, unknown ones added. */
  record(fields: Record<string, fc.Arbitrary<unknown>>, required: string[]): fc.Arbitrary<Body>;
  /** Every field of a schema with a plausible value (`strings` first for strings); `fixed` ones keep theirs. */
  bodyOf(schema: Schema, fixed?: Body, strings?: Strings): fc.Arbitrary<Body>;
  /** `of`, or (wild) now and then a whole body of any JSON value. */
  body(of: fc.Arbitrary<unknown>): fc.Arbitrary<unknown>;
}

/** `arb` once in `n` draws, else null. */
const sometimes = <T>(arb: fc.Arbitrary<T>, n: number): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: n - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });

function gen(wild: boolean): Gen {
  const field = (good: fc.Arbitrary<unknown>, weight = 6): fc.Arbitrary<unknown> =>
    wild ? fc.oneof({ weight, arbitrary: good }, { weight: 1, arbitrary: hostile }) : good;
  const record = (fields: Record<string, fc.Arbitrary<unknown>>, required: string[]): fc.Arbitrary<Body> => {
    const base = fc.record(fields, { requiredKeys: required.filter((k) => k in fields) });
    if (!wild) return base;
    return fc
      .tuple(
        base,
        // A tool without fields (process_list) has nothing to drop.
        Object.keys(fields).length > 0
          ? sometimes(fc.constantFrom(...Object.keys(fields)), 8)
          : fc.constant(null),
        sometimes(fc.dictionary(fc.string({ maxLength: 8 }), hostile, { minKeys: 1, maxKeys: 2 }), 8),
      )
      .map(([body, drop, extra]) => {
        const out: Body = { ...extra, ...body };
        if (drop !== null) delete out[drop];
        return out;
      });
  };
  const bodyOf = (schema: Schema, fixed: Body = {}, strings: Strings = {}): fc.Arbitrary<Body> =>
    record(
      Object.fromEntries(
        Object.entries(schema.properties).map(([name, p]) => [
          name,
          name in fixed ? field(fc.constant(fixed[name]), 20) : field(plausible(name, p, strings)),
        ]),
      ),
      schema.required,
    );
  const body = (of: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
    wild ? fc.oneof({ weight: 15, arbitrary: of }, { weight: 1, arbitrary: hostile }) : of;
  return { field, record, bodyOf, body };
}

const TAME = gen(false);
const WILD = gen(true);
/** The same generator, tame one time in three. */
const either = <T>(build: (g: Gen) => fc.Arbitrary<T>): fc.Arbitrary<T> =>
  fc.oneof({ weight: 1, arbitrary: build(TAME) }, { weight: 2, arbitrary: build(WILD) });

/** Every action DTO (or those given) as a body: type and op fixed (but for wild draws now and then). */
const actionBodyOf = (
  g: Gen,
  classes: readonly { name: string }[] = ACTION_DTO_CLASSES,
  strings: Strings = {},
): fc.Arbitrary<Body> =>
  fc.oneof(
    ...classes.map((cls) => {
      const schema = dtoSchema(cls) as Schema;
      const fixed: Body = { type: schema.properties.type.enum?.[0] };
      if (schema.properties.op) fixed.op = schema.properties.op.enum?.[0];
      return g.bodyOf(schema, fixed, strings);
    }),
  );

const isObject = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);

/** How the answers were spread (endpoint, HTTP status, outcome), printed at the end to keep the generators honest. */
const spread = new Map<string, number>();

/** The rules every answer keeps, whatever was sent. */
function checkAnswer(what: string, sent: unknown, res: ApiResponse): void {
  const fail = (why: string): never => {
    throw new Error(
      `${what}: ${why}\n  sent: ${JSON.stringify(sent)?.slice(0, 2000)}\n  got ${res.status}: ` +
        `${JSON.stringify(res.body)?.slice(0, 2000)}`,
    );
  };
  const outcomes: { status?: string; is_error?: boolean; error?: { class?: string } }[] =
    res.status === 200 || res.status === 202 ? [res.body].flat() : [{}];
  for (const o of outcomes) {
    const outcome = o?.status ?? (o?.is_error === undefined ? '' : `is_error=${o.is_error}`);
    const label = `${what.split(' ')[0]} ${res.status} ${outcome}`.trim();
    spread.set(label, (spread.get(label) ?? 0) + 1);
    if (o?.status === 'error' && o.error?.class === 'internal') fail('an internal error envelope');
  }
  if (res.status >= 500) fail('a 5xx');
  if (res.status >= 400 && !isErrorEnvelope(res.body)) fail('a 4xx outside the error envelope');
  if ((res.status === 400 || res.status === 415) && fieldsOf(res.body).length === 0) {
    fail('a 400 that names no field');
  }
}

const started = Date.now();
const params = (numRuns: number): fc.Parameters<unknown> => ({
  seed: SEED,
  numRuns: Math.ceil(numRuns * SCALE),
  endOnFailure: true,
});

/**
 * After a property: the session answers a normal request, no action of it ended `error`/`internal`, and the engine
 * logged no fault of its own (a 500 or an internal outcome is logged at error level).
 */
async function stillHealthy(engine: EngineHarness, logs: LogCapture, session: string): Promise<void> {
  const ok = await engine.request('POST', `/v1/sessions/${session}/actions`, { type: 'file', op: 'list' });
  expect({ status: ok.status, action: ok.body.status }).toEqual({ status: 200, action: 'succeeded' });
  let cursor: string | undefined;
  do {
    const page = await engine.request(
      'GET',
      `/v1/sessions/${session}/actions?limit=1000${cursor ? `&cursor=${cursor}` : ''}`,
    );
    expect(page.status).toBe(200);
    const internal = (page.body.actions as { status: string; error?: { class: string } }[]).filter(
      (a) => a.status === 'error' && a.error?.class === 'internal',
    );
    expect(internal).toEqual([]);
    cursor = page.body.nextCursor;
  } while (cursor);
  expect(logs.lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
}

afterAll(() => {
  const lines = [...spread].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `  ${k}: ${n}`);
  console.log(`fuzz: seed ${SEED}, ${((Date.now() - started) / 1000).toFixed(1)} s\n${lines.join('\n')}`);
});

describe('fuzz: arbitrary JSON in every field never reaches a 5xx', () => {
  const logs = new LogCapture();
  let engine: EngineHarness;
  let sid: string;
  const post = (urlPath: string, body: unknown): Promise<ApiResponse> =>
    engine.request('POST', urlPath, body);

  /** A session with something to read, edit, move and find. */
  const seededSession = async (body: Body = {}): Promise<string> => {
    const session = await engine.createSession(body);
    await engine.action(session, { type: 'file', op: 'write', path: 'a.txt', content: 'a\nhi\n' });
    await engine.action(session, { type: 'file', op: 'write', path: 'dir/b.txt', content: 'b' });
    return session;
  };

  beforeAll(async () => {
    engine = await EngineHarness.start(
      {
        DOCKER_HOST: 'unix:///nonexistent/switchyard-fuzz/docker.sock',
        SWITCHYARD_POOL_MIN: '0',
        SWITCHYARD_BROWSER_ENABLED: 'false',
        SWITCHYARD_MAX_TIMEOUT_MS: String(MAX_TIMEOUT_MS),
        SWITCHYARD_DEFAULT_TIMEOUT_MS: '2000',
        SWITCHYARD_BROWSER_TIMEOUT_MS: String(MAX_TIMEOUT_MS),
      },
      { logs },
    );
    sid = await seededSession();
  });
  afterAll(() => engine?.stop());

  it('POST …/actions: every action type and op', async () => {
    const wait = sometimes(
      either((g) => g.field(fc.boolean())),
      5,
    );
    const body = fc
      .tuple(
        either((g) => g.body(actionBodyOf(g))),
        wait,
      )
      .map(([b, w]) => (w === null || !isObject(b) ? b : { ...b, wait: w }));
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        checkAnswer('action', b, await post(`/v1/sessions/${sid}/actions`, b));
      }),
      params(400),
    );
    await stillHealthy(engine, logs, sid);
  });

  it('POST …/plans: arbitrary steps', async () => {
    const planSid = await seededSession({ maxConcurrentActions: 4 });
    const plan = (g: Gen): fc.Arbitrary<unknown> => {
      const step = g.record(
        {
          // Replaced by the step's position below (s0, s1…), unless a hostile id was drawn.
          id: g.field(fc.constant(undefined), 20),
          action: g.body(actionBodyOf(g)),
          dependsOn: g.field(fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 2 })),
          allowFailure: g.field(fc.boolean()),
          retry: g.field(
            g.record(
              {
                attempts: g.field(fc.integer({ min: 0, max: 2 })),
                backoffMs: g.field(fc.integer({ min: 0, max: 50 })),
              },
              ['attempts'],
            ),
          ),
        },
        ['id', 'action'],
      );
      const steps = fc.array(step, { minLength: 1, maxLength: 4 }).map((list) =>
        list.map((s, i) => ({
          ...s,
          ...(s.id === undefined && { id: `s${i}` }),
          // Tame plans depend on earlier steps only; wild ones on any step, themselves or none that exists.
          ...(Array.isArray(s.dependsOn) && {
            dependsOn:
              g === TAME
                ? [...new Set((s.dependsOn as number[]).filter(() => i > 0).map((d) => `s${d % i}`))]
                : (s.dependsOn as unknown[]).map((d) => (typeof d === 'number' ? `s${d}` : d)),
          }),
        })),
      );
      return g.body(
        g
          .record(
            {
              goal: g.field(fc.string({ maxLength: 20 })),
              steps: g.field(steps, 20),
              maxParallel: g.field(fc.integer({ min: 1, max: 16 })),
              wait: g.field(fc.boolean()),
              waitTimeoutMs: g.field(fc.integer({ min: 1, max: 1500 })),
            },
            ['steps'],
          )
          // A waiting plan answers when it settles: keep its wait short.
          .map((p) =>
            p.wait === true && typeof p.waitTimeoutMs !== 'number' ? { ...p, waitTimeoutMs: 1000 } : p,
          ),
      );
    };
    await fc.assert(
      fc.asyncProperty(either(plan), async (b) => {
        checkAnswer('plan', b, await post(`/v1/sessions/${planSid}/plans`, b));
      }),
      params(120),
    );
    await stillHealthy(engine, logs, planSid);
  });

  it('POST …/tool-calls: arbitrary names and inputs, Anthropic and OpenAI shapes, single and batched', async () => {
    const tools = (await engine.request('GET', '/v1/tools')).body.tools as {
      name: string;
      input_schema: Schema;
    }[];
    const calls = (g: Gen): fc.Arbitrary<unknown> => {
      // A tool's name with an input for it; wild: sometimes any name (or none) with any input.
      const tool = fc.oneof(
        ...tools.map((t) => g.bodyOf(t.input_schema).map((input) => ({ name: t.name, input }))),
      );
      const named =
        g === TAME
          ? tool
          : fc.oneof(
              { weight: 8, arbitrary: tool },
              { weight: 1, arbitrary: fc.record({ name: hostile, input: hostile }, { requiredKeys: [] }) },
            );
      const id = g.field(fc.constantFrom('toolu_1', 'call_x'), 20);
      const anthropic = fc.tuple(id, named).map(([i, n]) => ({ id: i, ...n }));
      const openai = fc.tuple(id, named, g.field(fc.constant('function'))).map(([i, n, type]) => ({
        id: i,
        type,
        function: { name: n.name, arguments: isObject(n.input) ? JSON.stringify(n.input) : n.input },
      }));
      const call = fc.oneof({ weight: 6, arbitrary: anthropic }, { weight: 1, arbitrary: openai });
      return g.body(
        fc.oneof({ weight: 3, arbitrary: call }, { weight: 1, arbitrary: fc.array(call, { maxLength: 3 }) }),
      );
    };
    await fc.assert(
      fc.asyncProperty(either(calls), async (b) => {
        const res = await post(`/v1/sessions/${sid}/tool-calls`, b);
        checkAnswer('tool-call', b, res);
        // Results, not HTTP errors: only a body the engine cannot read or a call without an id is a 400.
        expect([200, 400]).toContain(res.status);
      }),
      params(250),
    );
    await stillHealthy(engine, logs, sid);
  });

  it('POST /v1/sessions: metadata, ttlSeconds, maxConcurrentActions', async () => {
    const session = (g: Gen): fc.Arbitrary<unknown> =>
      g.body(
        g.record(
          {
            metadata: g.field(fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 4 }))),
            ttlSeconds: g.field(fc.integer({ min: 1, max: 100_000 })),
            maxConcurrentActions: g.field(fc.integer({ min: 1, max: 16 })),
          },
          [],
        ),
      );
    await fc.assert(
      fc.asyncProperty(either(session), async (b) => {
        const res = await post('/v1/sessions', b);
        checkAnswer('session', b, res);
        if (res.status === 201)
          expect((await engine.request('DELETE', `/v1/sessions/${res.body.id}`)).status).toBe(204);
      }),
      params(100),
    );
    await stillHealthy(engine, logs, sid);
  });

  it('POST …/actions/:id/retry: arbitrary revisions of finished, failed and unknown actions', async () => {
    const retrySid = await seededSession();
    const targets = [
      (await engine.action(retrySid, { type: 'file', op: 'list' })).id,
      (await engine.action(retrySid, { type: 'code', language: 'bash', code: 'exit 3' })).id,
      (await engine.action(retrySid, { type: 'code', language: 'bash', code: 'sleep 5', timeoutMs: 50 })).id,
      (await engine.action(retrySid, { type: 'file', op: 'read', path: 'missing.txt' })).id,
      (await engine.action(retrySid, { type: 'browser', op: 'back' })).id,
      'act_000000000000000000000000',
      '..%2F..%2Fx',
    ];
    const retry = (g: Gen): fc.Arbitrary<unknown> =>
      g.body(
        g.record(
          {
            action: g.field(actionBodyOf(g)),
            reason: g.field(fc.string({ maxLength: 20 })),
            escalate: g.field(fc.boolean()),
            wait: g.field(fc.boolean()),
          },
          [],
        ),
      );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), either(retry), async (target, b) => {
        const res = await post(`/v1/sessions/${retrySid}/actions/${encodeURIComponent(target)}/retry`, b);
        checkAnswer(`retry of ${target}`, b, res);
      }),
      params(150),
    );
    await stillHealthy(engine, logs, retrySid);
  });
});

describe('fuzz: browser ops in real Chromium', () => {
  const logs = new LogCapture();
  let engine: EngineHarness;
  let site: BrowserSite;
  let sid: string;

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start(
      {
        DOCKER_HOST: 'unix:///nonexistent/switchyard-fuzz/docker.sock',
        SWITCHYARD_POOL_MIN: '0',
        SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
        SWITCHYARD_BROWSER_EVALUATE: 'true',
        // Every wait for a selector that never matches ends within this.
        SWITCHYARD_BROWSER_TIMEOUT_MS: '1000',
      },
      { logs },
    );
    sid = await engine.createSession();
    await engine.action(sid, { type: 'file', op: 'write', path: 'in/a.txt', content: 'upload me' });
  });
  afterAll(async () => {
    await engine?.stop();
    await site?.stop();
  });

  const SELECTORS = [
    '#name',
    '#go',
    '#agree',
    '#color',
    '#note',
    'a',
    '#get',
    '#file',
    'h1',
    '#x',
    'text=Send',
    // Selectors Playwright cannot parse: refused as the caller's input, never an engine fault.
    '>>>',
    'nosuchengine=x',
  ];

  it('POST …/actions: every browser op against the test site', async () => {
    // The site's pages and elements, so that ops find what they look for (or time out within a second).
    const strings: Strings = {
      url: fc.constantFrom(
        ...['/', '/form', '/download', '/upload', '/slow?ms=200', '/redirect?to=/form', '/nope'].map((p) =>
          site.url(p),
        ),
        'http://127.0.0.1:1/',
        'file:///etc/passwd',
        'about:blank',
        '**/submit*',
      ),
      selector: fc.constantFrom(...SELECTORS),
      path: fc.constantFrom('shots/a.png', 'page.pdf', 'downloads/', 'in/a.txt', 'missing.txt', '.', 'in'),
      text: fc.constantFrom('hello', 'Welcome', ''),
      value: fc.constantFrom('v', ''),
      key: fc.constantFrom('Enter', 'Tab', 'Control+A', 'NoSuchKey'),
      script: fc.constantFrom('1 + 1', 'document.title', '() => location.href', 'throw new Error("x")', '{'),
    };
    const browserBody = either((g) => g.body(actionBodyOf(g, Object.values(BROWSER_ACTION_DTOS), strings)));
    await fc.assert(
      fc.asyncProperty(browserBody, async (b) => {
        checkAnswer('browser', b, await engine.request('POST', `/v1/sessions/${sid}/actions`, b));
      }),
      params(60),
    );
    await stillHealthy(engine, logs, sid);
  });
});
