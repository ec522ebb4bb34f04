import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { SwitchyardClient } from '../../packages/client/src';
import { EngineHarness } from '../support/engine-harness';

/** The driver: the real `ai` package and the built `@switchyard/client/ai` (ESM, so in its own Node process). */
const DRIVER = path.join(__dirname, '..', 'support', 'vercel-ai-driver.mjs');

interface DriverAnswer {
  names: string[];
  answers: Array<{
    toolCallId: string;
    type: 'tool-result' | 'tool-error';
    output?: unknown;
    error?: string;
  }>;
  text: string;
  bash: { name: string; description: string; inputSchema: { properties: Record<string, unknown> } };
}

function drive(baseUrl: string, sessionId: string, calls: object[]): Promise<DriverAnswer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DRIVER, sessionId, JSON.stringify(calls)], {
      env: { ...process.env, SWITCHYARD_URL: baseUrl, SWITCHYARD_API_KEY: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(JSON.parse(stdout) as DriverAnswer)
        : reject(new Error(`driver exit ${code}: ${stderr}`)),
    );
  });
}

/**
 * The Vercel AI SDK adapter against a real engine with the real `ai` package and no model: `generateText` with a
 * scripted model runs the session's tools through their `execute`, as it does for a real model's tool calls.
 */
describe('@switchyard/client/ai: the Vercel AI SDK tool set of a session', () => {
  let engine: EngineHarness;
  let client: SwitchyardClient;

  beforeAll(async () => {
    engine = await EngineHarness.start();
    client = new SwitchyardClient({ baseUrl: engine.baseUrl });
  });
  afterAll(() => engine?.stop());

  it('offers the session tools; the SDK runs their calls in the session and hands errors back as tool errors', async () => {
    const { id } = await client.sessions.create({ metadata: { agent: 'vercel-ai-e2e' } });
    const answer = await drive(engine.baseUrl, id, [
      { toolName: 'bash', input: { command: 'echo from-ai > made.txt; cat made.txt' } },
      { toolName: 'python', input: { code: 'print(6 * 7)' } },
      { toolName: 'bash', input: { command: 'exit 4' } },
    ]);
    expect(answer.names).toEqual(expect.arrayContaining(['bash', 'python', 'read', 'write', 'ls']));
    expect(answer.bash.inputSchema.properties).toHaveProperty('command');
    expect(answer.answers).toEqual([
      { toolCallId: 'call_1', type: 'tool-result', output: expect.stringContaining('from-ai') },
      { toolCallId: 'call_2', type: 'tool-result', output: expect.stringContaining('42') },
      { toolCallId: 'call_3', type: 'tool-error', error: expect.stringContaining('[exit_code]\n4') },
    ]);
    expect(answer.text).toBe('done');
    // The call ran in the session: its file is there.
    const made = await client.actions.run(id, { type: 'file', op: 'read', path: 'made.txt' });
    expect(made.output).toMatchObject({ content: 'from-ai\n' });
    await client.sessions.delete(id);
  });
});
