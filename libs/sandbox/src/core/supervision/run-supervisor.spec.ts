import { FakeClock } from '../../../test/fake-clock';
import { REDACTED } from '../output-collector';
import { type KillReason, RunSupervisor } from './run-supervisor';

describe('RunSupervisor', () => {
  let clock: FakeClock;
  let kills: KillReason[];
  let streamed: string[];
  const make = (extra: { forceClose?: { afterMs: number; close: () => void } } = {}) =>
    new RunSupervisor({
      job: {
        output: { maxBytes: 30, maxLines: 100, redact: [/sk-[a-z]+/g] },
        onOutput: (stream, text) => streamed.push(`${stream}:${text}`),
      },
      kill: (reason) => kills.push(reason),
      clock,
      ...extra,
    });

  beforeEach(() => {
    clock = new FakeClock(1000);
    kills = [];
    streamed = [];
  });
  afterEach(() => jest.useRealTimers());

  it('collects both streams within the caps, redacted, and streams what it keeps', () => {
    const s = make();
    expect(s.push('stdout', Buffer.from('key sk-abc\n'))).toBe(true);
    expect(s.push('stderr', Buffer.from('warn\n'))).toBe(true);
    clock.t += 42;
    expect(s.result()).toEqual({
      timedOut: false,
      stdout: `key ${REDACTED}\n`,
      stderr: 'warn\n',
      truncated: { stdout: false, stderr: false },
      redacted: true,
      durationMs: 42,
    });
    expect(streamed).toEqual([`stdout:key ${REDACTED}\n`, 'stderr:warn\n']);
    expect(kills).toEqual([]);
  });

  it('kills once for output past a cap, and reports it', () => {
    const s = make();
    expect(s.push('stdout', Buffer.from(`${'x'.repeat(40)}\n`))).toBe(false);
    expect(s.push('stderr', Buffer.from(`${'y'.repeat(40)}\n`))).toBe(false);
    expect(kills).toEqual(['output']);
    expect(s.reason).toBe('output');
    expect(s.result()).toMatchObject({ timedOut: false, truncated: { stdout: true, stderr: true } });
    expect(s.result().aborted).toBeUndefined();
  });

  it('kills at the timeout, and only for the first reason', () => {
    jest.useFakeTimers();
    const s = make();
    const abort = new AbortController();
    s.watch({ timeoutMs: 50, signal: abort.signal });
    jest.advanceTimersByTime(49);
    expect(kills).toEqual([]);
    jest.advanceTimersByTime(1);
    abort.abort();
    expect(kills).toEqual(['timeout']);
    expect(s.result()).toMatchObject({ timedOut: true });
    s.stop();
  });

  it('kills on abort, at once when the signal fired already', () => {
    const fired = new AbortController();
    fired.abort();
    const early = make();
    early.watch({ signal: fired.signal });
    expect(kills).toEqual(['abort']);
    expect(early.result()).toMatchObject({ timedOut: false, aborted: true });

    kills = [];
    const abort = new AbortController();
    const late = make();
    late.watch({ signal: abort.signal });
    abort.abort();
    expect(kills).toEqual(['abort']);
  });

  it('stop clears the timeout, the abort listener and the force-close backstop', () => {
    jest.useFakeTimers();
    const close = jest.fn();
    const abort = new AbortController();
    const s = make({ forceClose: { afterMs: 100, close } });
    s.watch({ timeoutMs: 50, signal: abort.signal });
    s.stop();
    jest.advanceTimersByTime(1000);
    abort.abort();
    expect(kills).toEqual([]);
    expect(close).not.toHaveBeenCalled();
  });

  it('force-closes a run that does not end after its kill', () => {
    jest.useFakeTimers();
    const close = jest.fn();
    const s = make({ forceClose: { afterMs: 100, close } });
    s.kill('abort');
    jest.advanceTimersByTime(99);
    expect(close).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(close).toHaveBeenCalledTimes(1);
    s.kill('timeout');
    jest.advanceTimersByTime(1000);
    expect(close).toHaveBeenCalledTimes(1);
    s.stop();
  });

  it('collected() says nothing of the kill', () => {
    const s = make();
    s.kill('timeout');
    expect(s.collected()).toMatchObject({ timedOut: false });
    expect(s.collected().aborted).toBeUndefined();
  });
});
