import { NO_RISK, type Clock } from '@switchyard/common';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import { ActionEnvelopes, type EnvelopeFields } from './action-envelope';

/** The envelope lays a run's output out flat, in the order callers and the graph's record have always seen. */
describe('ActionEnvelopes', () => {
  const clock: Clock = { now: () => new Date('2024-01-01T00:00:02.000Z'), monotonic: () => 0 };
  const envelopes = new ActionEnvelopes(clock, new SecretRedactor([/sk-[a-z0-9]+/g]));
  const at: EnvelopeFields = {
    id: 'act_1',
    sessionId: 'ses_1',
    type: 'code',
    startedAt: '2024-01-01T00:00:00.000Z',
    durationMs: 2000,
  };

  it("lays a code run's output out flat, keeping its redaction flag and leaving its stdout as the tier made it", () => {
    const run = {
      exitCode: 1,
      stdout: 'out sk-notredactedhere\n',
      stderr: 'err\n',
      truncated: { stdout: true, stderr: false },
      redacted: true,
    };
    const result = envelopes.envelope(at, {
      status: 'failed',
      tier: 'pooled',
      risk: NO_RISK,
      run,
      files: [],
    });
    expect(JSON.stringify(result)).toBe(
      JSON.stringify({
        id: 'act_1',
        sessionId: 'ses_1',
        type: 'code',
        status: 'failed',
        exitCode: 1,
        stdout: 'out sk-notredactedhere\n',
        stderr: 'err\n',
        truncated: { stdout: true, stderr: false },
        durationMs: 2000,
        startedAt: '2024-01-01T00:00:00.000Z',
        endedAt: '2024-01-01T00:00:02.000Z',
        tier: 'pooled',
        risk: NO_RISK,
        redacted: true,
      }),
    );
  });

  it('answers no output fields for an action that ran no code, and no truncation', () => {
    const result = envelopes.envelope(
      { ...at, type: 'file' },
      { status: 'succeeded', tier: 'engine', risk: NO_RISK, output: { path: 'a' }, files: [] },
    );
    expect(result).not.toHaveProperty('stdout');
    expect(result).not.toHaveProperty('stderr');
    expect(result).not.toHaveProperty('exitCode');
    expect(result.truncated).toEqual({ stdout: false, stderr: false });
    expect(result.output).toEqual({ path: 'a' });
  });

  it('leaves a run without an exit code without one', () => {
    const run = { stdout: '', stderr: '', truncated: { stdout: false, stderr: false } };
    const result = envelopes.envelope(at, {
      status: 'timed_out',
      tier: 'subprocess',
      risk: NO_RISK,
      run,
      files: [],
    });
    expect(result).not.toHaveProperty('exitCode');
    expect(result).not.toHaveProperty('redacted');
    expect(result).toMatchObject({ stdout: '', stderr: '' });
  });
});
