import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness, LogCapture } from '../support/engine-harness';
import { SseClient } from '../support/sse-client';

// Canaries are assembled at run time so that no request body (an action's recorded input) carries them whole.
const CONFIGURED = ['canary', 'configured', '7f3a9c'].join('-');
const PATTERNED = `acme_${'9'.repeat(32)}`;
const GITHUB = `ghp_${'Q'.repeat(36)}`;
const ASSIGNED = 'swordfish-0042';
const KEY_BODY = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSj';
const CANARIES = [CONFIGURED, PATTERNED, GITHUB, ASSIGNED, KEY_BODY];

/** Bash that prints `value` without the value appearing in the code: split in two halves joined at run time. */
const emit = (value: string, to = ''): string => {
  const half = Math.floor(value.length / 2);
  return `printf '%s%s\\n' '${value.slice(0, half)}' '${value.slice(half)}'${to}`;
};

describe('secret redaction (canaries looked for everywhere)', () => {
  let engine: EngineHarness;
  const logs = new LogCapture();
  beforeAll(async () => {
    engine = await EngineHarness.start(
      {
        SWITCHYARD_LOG_LEVEL: 'debug',
        SWITCHYARD_SECRET_ENV_NAMES: 'DEPLOY_CANARY',
        DEPLOY_CANARY: CONFIGURED,
        SWITCHYARD_SECRET_PATTERNS: JSON.stringify(['acme_[0-9]{32}']),
        SWITCHYARD_POOL_MIN: '0',
      },
      { logs },
    );
  });
  afterAll(() => engine.stop());

  it('never lets a canary out through responses, SSE, the graph or the logs', async () => {
    const sid = await engine.createSession();
    const sse = await SseClient.open(`${engine.baseUrl}/v1/sessions/${sid}/events`);
    const responses: unknown[] = [];
    const act = async (body: Record<string, unknown>): Promise<any> => {
      const r = await engine.action(sid, body);
      responses.push(r);
      return r;
    };
    const bash = (code: string) => act({ type: 'code', language: 'bash', code });

    const printed = await bash(
      [
        emit(CONFIGURED),
        emit(PATTERNED, ' >&2'),
        emit(GITHUB),
        `printf 'DB_PASSWORD=%s%s\\n' '${ASSIGNED.slice(0, 5)}' '${ASSIGNED.slice(5)}'`,
      ].join('; '),
    );
    expect(printed.redacted).toBe(true);
    expect(printed.stdout).toContain('***REDACTED***');
    expect(printed.stdout).toContain('DB_PASSWORD=***REDACTED***');
    expect(printed.stderr).toBe('***REDACTED***\n');

    // Secrets in workspace files: written by code, read back by code, by the file API and grep.
    await bash(
      `{ echo '-----BEGIN PRIVATE KEY-----'; ${emit(KEY_BODY)}; echo '-----END PRIVATE KEY-----'; ${emit(CONFIGURED)}; } > secrets.txt`,
    );
    const cat = await bash('cat secrets.txt');
    expect(cat.stdout).toBe('***REDACTED***\n***REDACTED***\n');
    const read = await act({ type: 'file', op: 'read', path: 'secrets.txt' });
    expect(read.redacted).toBe(true);
    await act({ type: 'file', op: 'grep', pattern: 'configured' });
    // A truncated stream never shows half a canary either.
    const cut = await act({
      type: 'code',
      language: 'bash',
      code: `${emit(CONFIGURED)}; yes | head -c 100`,
      timeoutMs: 5000,
    });
    expect(cut.stdout.startsWith('***REDACTED***')).toBe(true);

    await sse.waitFor((e) => e.event === 'action.completed' && e.data.actionId === cut.id);
    sse.close();
    const listing = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body;
    const views = await Promise.all(
      listing.actions.map(
        async (a: any) => (await engine.request('GET', `/v1/sessions/${sid}/actions/${a.id}`)).body,
      ),
    );
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;

    const haystacks: Record<string, string> = {
      responses: JSON.stringify(responses),
      sse: JSON.stringify(sse.events),
      listing: JSON.stringify(listing),
      views: JSON.stringify(views),
      graph: JSON.stringify(graph),
      logs: logs.raw.join('\n'),
      // The graph's own files: output excerpts and results as stored.
      graphFiles: readdirSync(engine.dataDir)
        .filter((f) => f.startsWith('graph.db'))
        .map((f) => readFileSync(path.join(engine.dataDir, f)).toString('latin1'))
        .join(''),
    };
    expect(logs.raw.some((l) => l.includes('"msg":"action"'))).toBe(true);
    for (const [where, text] of Object.entries(haystacks)) {
      for (const canary of CANARIES) {
        if (text.includes(canary)) throw new Error(`canary ${canary} leaked through ${where}`);
      }
    }
  });
});
