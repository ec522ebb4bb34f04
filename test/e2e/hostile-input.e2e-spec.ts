import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { BrowserSite } from '../support/browser-site';
import { type ApiResponse, EngineHarness, LogCapture } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

/**
 * Bad input never reaches a 500 (issue 12): each reproduction of the issue through the real engine. A refusal is a
 * 4xx naming the field at fault, nothing is recorded when it comes before running, nothing is logged as an engine
 * fault, and the engine answers a normal request afterwards. Browser ops run in real Chromium against pages on
 * 127.0.0.2.
 */
// Chromium starts in the browser cases: more than Jest's default 5 s.
jest.setTimeout(30_000);

describe('hostile input', () => {
  const logs = new LogCapture();
  let engine: EngineHarness;
  let site: BrowserSite;
  let sid: string;
  const actions = (): string => `/v1/sessions/${sid}/actions`;

  const expectRefused = (res: ApiResponse, status: number, field: string, code?: string): void => {
    expect({ status: res.status, fields: fieldsOf(res.body) }).toEqual({
      status,
      fields: expect.arrayContaining([field]),
    });
    if (code) expect(res.body.error.code).toBe(code);
  };
  const count = async (urlPath: string, key: string): Promise<number> => {
    const res = await engine.request('GET', urlPath);
    expect(res.status).toBe(200);
    return (res.body[key] as unknown[]).length;
  };
  const actionCount = (): Promise<number> => count(`${actions()}?limit=1000`, 'actions');
  /** Runs `send` and expects it to leave no action (or session, or plan) behind. */
  const recordsNothing = async <T>(send: () => Promise<T>): Promise<T> => {
    const before = [
      await actionCount(),
      await count('/v1/sessions', 'sessions'),
      await count(`/v1/sessions/${sid}/plans`, 'plans'),
    ];
    const result = await send();
    expect([
      await actionCount(),
      await count('/v1/sessions', 'sessions'),
      await count(`/v1/sessions/${sid}/plans`, 'plans'),
    ]).toEqual(before);
    return result;
  };
  /** POSTs raw bytes, as a client with a broken encoder would. */
  const postBytes = async (urlPath: string, bytes: Buffer, contentType = 'application/json') => {
    const res = await fetch(`${engine.baseUrl}${urlPath}`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: bytes,
    });
    return { status: res.status, body: (await res.json()) as any, headers: res.headers };
  };
  const toolCall = async (name: string, input: Record<string, unknown>) => {
    const res = await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, {
      id: 'toolu_1',
      name,
      input,
    });
    expect(res.status).toBe(200);
    return res.body as { tool_use_id: string; content: string; is_error: boolean };
  };

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start(
      { SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2', SWITCHYARD_BROWSER_TIMEOUT_MS: '15000' },
      { logs },
    );
    sid = await engine.createSession();
  });
  afterAll(async () => {
    await engine?.stop();
    await site?.stop();
  });

  afterEach(async () => {
    // The engine keeps serving after every hostile request, and logged no fault of its own (a 500 is logged).
    const ok = await engine.action(sid, { type: 'file', op: 'list' });
    expect(ok.status).toBe('succeeded');
    expect(logs.lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });

  describe('null in a field', () => {
    it('file read offset/limit, list and find limit null: the defaults', async () => {
      await engine.action(sid, {
        type: 'file',
        op: 'write',
        path: 'n/lines.txt',
        content: 'one\ntwo\nthree\n',
      });
      const read = await engine.action(sid, {
        type: 'file',
        op: 'read',
        path: 'n/lines.txt',
        offset: null,
        limit: null,
      });
      expect(read).toMatchObject({ status: 'succeeded', output: { content: 'one\ntwo\nthree\n' } });
      const list = await engine.action(sid, { type: 'file', op: 'list', path: 'n', limit: null });
      expect(list.status).toBe('succeeded');
      expect(JSON.stringify(list.output)).toContain('lines.txt');
      const find = await engine.action(sid, { type: 'file', op: 'find', pattern: '**/*.txt', limit: null });
      expect(find.status).toBe('succeeded');
      expect(JSON.stringify(find.output)).toContain('n/lines.txt');
      // null in a path that may be omitted means the root, as omitting it does.
      const root = await engine.action(sid, { type: 'file', op: 'list', path: null, cursor: null });
      expect(root.status).toBe('succeeded');
    });

    it('the same through /tool-calls: a normal result, never an HTTP error', async () => {
      const read = await toolCall('read', { path: 'n/lines.txt', offset: null, limit: null });
      expect(read).toEqual({ tool_use_id: 'toolu_1', content: 'one\ntwo\nthree\n', is_error: false });
      expect((await toolCall('ls', { path: 'n', limit: null, recursive: null })).is_error).toBe(false);
      expect((await toolCall('find', { pattern: '*.txt', path: 'n', limit: null })).is_error).toBe(false);
    });

    it('a required field sent as null is a 400 naming it, recorded nowhere', async () => {
      await recordsNothing(async () => {
        expectRefused(
          await engine.request('POST', actions(), { type: 'file', op: 'read', path: null }),
          400,
          'path',
          'VALIDATION_FAILED',
        );
        expectRefused(
          await engine.request('POST', actions(), { type: 'code', language: 'bash', code: null }),
          400,
          'code',
        );
        expectRefused(await engine.request('POST', actions(), { type: null }), 400, 'type');
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/plans`, {
            steps: [{ id: 'a', action: { type: 'file', op: 'write', path: 'x', content: null } }],
          }),
          400,
          'steps[0].action.content',
        );
      });
      const tool = await toolCall('read', { path: null });
      expect(tool.is_error).toBe(true);
      expect(tool.content).toContain('path');
    });

    it('retry fields sent as null take their defaults; wait null is absent or a 400 naming it', async () => {
      const listed = await engine.action(sid, { type: 'file', op: 'list' });
      const retry = await engine.request('POST', `${actions()}/${listed.id}/retry`, {
        action: null,
        reason: null,
        escalate: null,
        wait: null,
      });
      expect({ status: retry.status, action: retry.body.status }).toEqual({
        status: 200,
        action: 'succeeded',
      });
      const wait = await engine.request('POST', actions(), { type: 'file', op: 'list', wait: null });
      if (wait.status !== 200) expectRefused(wait, 400, 'wait');
    });

    it('session fields sent as null take their defaults', async () => {
      const res = await engine.request('POST', '/v1/sessions', {
        metadata: null,
        ttlSeconds: null,
        maxConcurrentActions: null,
      });
      expect(res.status).toBe(201);
      expect(res.body.metadata ?? {}).toEqual({});
      await engine.request('DELETE', `/v1/sessions/${res.body.id}`);
    });

    describe('browser ops (real Chromium)', () => {
      it('new_tab with url null opens a blank tab, over REST and /tool-calls', async () => {
        const tab = await engine.action(sid, { type: 'browser', op: 'new_tab', url: null });
        expect(tab).toMatchObject({ status: 'succeeded', tier: 'browser' });
        const viaTool = await toolCall('browser_new_tab', { url: null, waitUntil: null });
        expect(viaTool.is_error).toBe(false);
      });

      it('extract and screenshot with selector null take the whole page; click with button null clicks left', async () => {
        const nav = await engine.action(sid, { type: 'browser', op: 'navigate', url: site.url('/form') });
        expect(nav.status).toBe('succeeded');
        const text = await engine.action(sid, {
          type: 'browser',
          op: 'extract',
          mode: 'text',
          selector: null,
        });
        expect(text.status).toBe('succeeded');
        expect(text.output.data.content).toContain('Agree');
        const shot = await engine.action(sid, {
          type: 'browser',
          op: 'screenshot',
          path: 'shots/null.png',
          selector: null,
          fullPage: null,
        });
        expect(shot.status).toBe('succeeded');
        expect(existsSync(path.join(engine.workspaceOf(sid), 'shots/null.png'))).toBe(true);
        const click = await engine.action(sid, {
          type: 'browser',
          op: 'click',
          selector: '#go',
          button: null,
          clickCount: null,
        });
        expect(click.status).toBe('succeeded');
        await site.waitFor('/submit');

        const viaTools = [
          await toolCall('browser_extract', { mode: 'text', selector: null }),
          await toolCall('browser_screenshot', { path: 'shots/tool.png', selector: null, fullPage: null }),
          await toolCall('browser_click', { selector: '#result', button: null, clickCount: null }),
        ];
        expect(viaTools.map((t) => t.is_error)).toEqual([false, false, false]);
        expect(viaTools[0].content).toContain('name=');
        expect(existsSync(path.join(engine.workspaceOf(sid), 'shots/tool.png'))).toBe(true);
      });
    });
  });

  describe('what the fuzz found', () => {
    it('an edit with an empty find, a read from past the last safe integer: 400 naming the field', async () => {
      await recordsNothing(async () => {
        expectRefused(
          await engine.request('POST', actions(), {
            type: 'file',
            op: 'edit',
            path: 'a.txt',
            find: '',
            replace: 'x',
          }),
          400,
          'find',
        );
        expectRefused(
          await engine.request('POST', actions(), {
            type: 'file',
            op: 'read',
            path: 'a.txt',
            offset: 2 ** 53 + 2,
          }),
          400,
          'offset',
        );
      });
      const tool = await toolCall('edit', { path: 'a.txt', find: '', replace: 'x' });
      expect(tool.is_error).toBe(true);
      expect(tool.content).toContain('find');
    });
  });

  describe('keys that reach object internals', () => {
    it('in session metadata: 400 naming the path, no session created', async () => {
      await recordsNothing(async () => {
        expectRefused(
          await engine.request('POST', '/v1/sessions', {
            metadata: { constructor: { prototype: { admin: true } } },
          }),
          400,
          'metadata.constructor',
          'FORBIDDEN_KEY',
        );
        // An object literal with __proto__ sets a prototype; the JSON text must carry the key itself.
        expectRefused(
          await engine.request('POST', '/v1/sessions', undefined, {
            raw: '{"metadata":{"labels":[{"__proto__":{"admin":true}}]}}',
          }),
          400,
          'metadata.labels[0].__proto__',
          'FORBIDDEN_KEY',
        );
        expectRefused(
          await engine.request('POST', '/v1/sessions', undefined, { raw: '{"__proto__":{"ttlSeconds":1}}' }),
          400,
          '__proto__',
        );
      });
      // Nothing leaked into plain objects of the engine either.
      const s = await engine.request('POST', '/v1/sessions', {});
      expect(s.status).toBe(201);
      expect(s.body.admin).toBeUndefined();
      expect(s.body.metadata?.admin).toBeUndefined();
      await engine.request('DELETE', `/v1/sessions/${s.body.id}`);
    });

    it('in code env, an action body, a plan step action, a retry and a tool-call input', async () => {
      await recordsNothing(async () => {
        expectRefused(
          await engine.request('POST', actions(), {
            type: 'code',
            language: 'bash',
            code: 'echo $constructor',
            env: { constructor: 'x' },
          }),
          400,
          'env.constructor',
          'FORBIDDEN_KEY',
        );
        expectRefused(
          await engine.request('POST', actions(), undefined, {
            raw: '{"type":"file","op":"list","__proto__":{"recursive":true}}',
          }),
          400,
          '__proto__',
        );
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/plans`, {
            steps: [{ id: 'a', action: { type: 'file', op: 'list', constructor: 1 } }],
          }),
          400,
          'steps[0].action.constructor',
          'FORBIDDEN_KEY',
        );
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/plans`, {
            steps: [{ id: 'a', action: { type: 'file', op: 'list' }, retry: { attempts: 1, prototype: {} } }],
          }),
          400,
          'steps[0].retry.prototype',
        );
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, undefined, {
            raw: '{"id":"toolu_1","name":"read","input":{"path":"a","__proto__":{"offset":1}}}',
          }),
          400,
          'input.__proto__',
          'FORBIDDEN_KEY',
        );
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, [
            { id: 'toolu_1', name: 'ls', input: {} },
            { id: 'toolu_2', name: 'bash', input: { command: 'true', constructor: {} } },
          ]),
          400,
          '[1].input.constructor',
        );
      });
      const listed = await engine.action(sid, { type: 'file', op: 'list' });
      const retry = await recordsNothing(() =>
        engine.request('POST', `${actions()}/${listed.id}/retry`, {
          action: { type: 'file', op: 'list', prototype: true },
        }),
      );
      expectRefused(retry, 400, 'action.prototype', 'FORBIDDEN_KEY');
    });
  });

  describe('keys that reach object internals in a query', () => {
    it('are a 400 naming them on every validated query', async () => {
      const act = await engine.action(sid, { type: 'file', op: 'list' });
      for (const key of ['constructor', '__proto__', 'prototype']) {
        for (const urlPath of [
          `${actions()}?${key}=1`,
          `/v1/sessions/${sid}/graph?${key}=1`,
          `/v1/sessions/${sid}/files/lineage?path=a&${key}=x`,
          `${actions()}/${act.id}/context?${key}=`,
        ]) {
          expectRefused(await engine.request('GET', urlPath), 400, key);
        }
      }
    });
  });

  describe('nesting', () => {
    const deep = (n: number): string => `${'['.repeat(n)}${']'.repeat(n)}`;

    it('10,000-deep arrays in metadata, an action or a plan: 400 before validation', async () => {
      await recordsNothing(async () => {
        for (const [urlPath, raw] of [
          ['/v1/sessions', `{"metadata":{"x":${deep(10_000)}}}`],
          [actions(), `{"type":"code","language":"bash","code":"true","env":{"A":${deep(10_000)}}}`],
          [`/v1/sessions/${sid}/plans`, `{"steps":${deep(10_000)}}`],
          [`/v1/sessions/${sid}/tool-calls`, `{"id":"t","name":"ls","input":{"path":${deep(10_000)}}}`],
          [actions(), `{"type":"file","op":"list","path":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}}`],
        ] as const) {
          const res = await engine.request('POST', urlPath, undefined, { raw });
          expectRefused(res, 400, 'body', 'TOO_DEEP');
          expect(res.body.error.message).toContain('64');
        }
      });
      expect(logs.raw.some((l) => /call stack/i.test(l))).toBe(false);
    });

    it('up to 64 levels are read; 65 are refused', async () => {
      const nested = (n: number): unknown => (n === 1 ? {} : { a: nested(n - 1) });
      const ok = await engine.request('POST', '/v1/sessions', { metadata: nested(63) });
      expect(ok.status).toBe(201);
      await engine.request('DELETE', `/v1/sessions/${ok.body.id}`);
      expectRefused(
        await engine.request('POST', '/v1/sessions', { metadata: nested(64) }),
        400,
        'body',
        'TOO_DEEP',
      );
    });
  });

  describe('encoding', () => {
    const write = (name: Buffer): Buffer =>
      Buffer.concat([
        Buffer.from('{"type":"file","op":"write","path":"'),
        name,
        Buffer.from('","content":"x"}'),
      ]);

    it('a body that is not valid UTF-8: 400, and no file with a replacement character appears', async () => {
      await recordsNothing(async () => {
        for (const bad of [
          Buffer.from([0x61, 0xff, 0x2e, 0x74]), // a stray 0xFF
          Buffer.from([0x61, 0xc3, 0x28]), // a lead byte without its continuation
          Buffer.from([0xc0, 0xaf]), // overlong "/"
          Buffer.from([0xed, 0xa0, 0x80]), // a surrogate encoded as UTF-8 (CESU)
          Buffer.from([0x61, 0xe2, 0x82]), // truncated sequence
          Buffer.from([0xf5, 0x80, 0x80, 0x80]), // beyond U+10FFFF
        ]) {
          expectRefused(await postBytes(actions(), write(bad)), 400, 'body', 'INVALID_UTF8');
        }
        const code = Buffer.concat([
          Buffer.from('{"type":"code","language":"python","code":"print(\''),
          Buffer.from([0xfe]),
          Buffer.from('\')"}'),
        ]);
        expectRefused(await postBytes(actions(), code), 400, 'body', 'INVALID_UTF8');
        expectRefused(
          await postBytes(
            '/v1/sessions',
            Buffer.concat([Buffer.from('{"metadata":{"k":"'), Buffer.from([0x80]), Buffer.from('"}}')]),
          ),
          400,
          'body',
          'INVALID_UTF8',
        );
      });
      const names = readdirSync(engine.workspaceOf(sid), { recursive: true }).map(String);
      expect(names.filter((n) => n.includes('\uFFFD'))).toEqual([]);
    });

    it('valid multi-byte UTF-8 is kept exactly', async () => {
      const name = Buffer.from('résumé-数据-🚀.txt');
      const res = await postBytes(actions(), write(name));
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('succeeded');
      expect(existsSync(path.join(engine.workspaceOf(sid), 'résumé-数据-🚀.txt'))).toBe(true);
    });

    it('a lone surrogate in a string or a key: 400 naming where, the file never written', async () => {
      await recordsNothing(async () => {
        const raw = (text: string) => engine.request('POST', actions(), undefined, { raw: text });
        expectRefused(
          await raw('{"type":"file","op":"write","path":"a\\uD800b","content":"x"}'),
          400,
          'path',
          'INVALID_STRING',
        );
        expectRefused(
          await raw('{"type":"file","op":"move","path":"a.txt","to":"b\\udc00"}'),
          400,
          'to',
          'INVALID_STRING',
        );
        expectRefused(
          await raw('{"type":"code","language":"node","code":"console.log(\\"\\ud83d\\")"}'),
          400,
          'code',
          'INVALID_STRING',
        );
        expectRefused(
          await raw('{"type":"browser","op":"screenshot","path":"s\\uDBFF.png"}'),
          400,
          'path',
          'INVALID_STRING',
        );
        expectRefused(
          await engine.request('POST', '/v1/sessions', undefined, { raw: '{"metadata":{"k\\ud800":1}}' }),
          400,
          'metadata',
          'INVALID_STRING',
        );
        expectRefused(
          await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, undefined, {
            raw: '{"id":"t","name":"write","input":{"path":"w\\uD800.txt","content":"x"}}',
          }),
          400,
          'input.path',
          'INVALID_STRING',
        );
      });
      const names = readdirSync(engine.workspaceOf(sid), { recursive: true }).map(String);
      expect(names.filter((n) => n.includes('\uFFFD') || !n.isWellFormed())).toEqual([]);
      // A surrogate pair is a character like any other.
      const pair = await engine.request('POST', actions(), undefined, {
        raw: '{"type":"file","op":"write","path":"pair-\\ud83d\\ude80.txt","content":"x"}',
      });
      expect(pair.body.status).toBe('succeeded');
      expect(existsSync(path.join(engine.workspaceOf(sid), 'pair-🚀.txt'))).toBe(true);
    });

    it('a charset other than UTF-8: 415; a body of another media type: 415', async () => {
      const list = Buffer.from('{"type":"file","op":"list"}');
      await recordsNothing(async () => {
        for (const type of [
          'application/json; charset=latin1',
          'application/json; charset=ISO-8859-1',
          'application/json;charset="utf-16"',
          'application/json; charset=windows-1252',
        ]) {
          expectRefused(await postBytes(actions(), list, type), 415, 'body', 'UNSUPPORTED_CHARSET');
        }
        for (const type of [
          'text/plain; charset=latin1',
          'text/plain',
          'application/x-www-form-urlencoded',
        ]) {
          expectRefused(await postBytes(actions(), list, type), 415, 'body', 'UNSUPPORTED_MEDIA_TYPE');
          expectRefused(
            await postBytes('/v1/sessions', Buffer.from('{"ttlSeconds":5}'), type),
            415,
            'body',
            'UNSUPPORTED_MEDIA_TYPE',
          );
        }
      });
      for (const type of [
        'application/json; charset=utf-8',
        'application/json; charset="UTF-8"',
        'application/json;charset=UTF8',
      ]) {
        const ok = await postBytes(actions(), list, type);
        expect({ type, status: ok.status, action: ok.body.status }).toEqual({
          type,
          status: 200,
          action: 'succeeded',
        });
      }
      // No body at all is still fine where a body is optional, whatever the content type says.
      const bare = await fetch(`${engine.baseUrl}/v1/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
      });
      expect(bare.status).toBe(201);
      await engine.request('DELETE', `/v1/sessions/${((await bare.json()) as { id: string }).id}`);
    });
  });

  describe('invisible and bidi characters in paths', () => {
    const INVISIBLE: [string, string][] = [
      ['U+202E', 'right-to-left override'],
      ['U+200B', 'zero width space'],
      ['U+200D', 'zero width joiner'],
      ['U+2066', 'left-to-right isolate'],
      ['U+FEFF', 'byte order mark'],
      ['U+061C', 'arabic letter mark'],
      ['U+180E', 'mongolian vowel separator'],
    ];

    it.each(INVISIBLE)(
      '%s (%s) in any file path field: 400 naming it, nothing recorded or written',
      async (at) => {
        const c = String.fromCodePoint(parseInt(at.slice(2), 16));
        await recordsNothing(async () => {
          for (const [body, field] of [
            [{ type: 'file', op: 'write', path: `report${c}txt.exe`, content: 'x' }, 'path'],
            [{ type: 'file', op: 'read', path: `${c}a.txt` }, 'path'],
            [{ type: 'file', op: 'mkdir', path: `dir/${c}` }, 'path'],
            [{ type: 'file', op: 'list', path: `n${c}` }, 'path'],
            [{ type: 'file', op: 'find', path: `n${c}`, pattern: '*' }, 'path'],
            [{ type: 'file', op: 'move', path: 'n/lines.txt', to: `lines${c}.txt` }, 'to'],
            [{ type: 'file', op: 'delete', path: `n/lines.txt${c}` }, 'path'],
          ] as const) {
            const res = await engine.request('POST', actions(), body);
            expectRefused(res, 400, field, 'PATH_INVISIBLE_CHAR');
            expect(res.body.error.message).toContain(at);
          }
        });
        const names = readdirSync(engine.workspaceOf(sid), { recursive: true }).map(String);
        expect(names.filter((n) => n.includes(c))).toEqual([]);
        expect(existsSync(path.join(engine.workspaceOf(sid), 'n/lines.txt'))).toBe(true);
      },
    );

    it('in browser paths (screenshot, pdf, download, upload): 400 naming the field, nothing recorded', async () => {
      await recordsNothing(async () => {
        for (const body of [
          { op: 'screenshot', path: 'shots/\u202Egnp.exe' },
          { op: 'pdf', path: '\u200Bpage.pdf' },
          { op: 'download', selector: '#get', path: 'downloads/\uFEFF/' },
          { op: 'upload', selector: '#file', path: 'in/\u2067a.txt' },
        ]) {
          expectRefused(
            await engine.request('POST', actions(), { type: 'browser', ...body }),
            400,
            'path',
            'PATH_INVISIBLE_CHAR',
          );
        }
      });
    });

    it('through plans and /tool-calls', async () => {
      const plan = await recordsNothing(() =>
        engine.request('POST', `/v1/sessions/${sid}/plans`, {
          steps: [{ id: 'w', action: { type: 'file', op: 'write', path: 'a\u200Fb', content: 'x' } }],
          wait: true,
        }),
      );
      expectRefused(plan, 400, 'steps[0].action.path');
      expect(plan.body.error.message).toContain('U+200F');
      const tool = await toolCall('write', { path: 'evil\u202Etxt.sh', content: 'x' });
      expect(tool.is_error).toBe(true);
      expect(tool.content).toContain('path');
      expect(tool.content).toContain('U+202E');
    });
  });
});
