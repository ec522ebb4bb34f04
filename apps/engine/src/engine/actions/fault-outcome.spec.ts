import { SwitchyardError, type ErrorKind, type RiskAssessment } from '@switchyard/common';
import { faultOutcome, isEngineFault } from './fault-outcome';

class Fault extends SwitchyardError {
  constructor(
    readonly code: string,
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
  }
}

const risk: RiskAssessment = { score: 1, level: 'low', reasons: [] };

describe('faultOutcome', () => {
  it('records infrastructure that is not there as a denied TIER_UNAVAILABLE naming the cause', () => {
    const err = new Fault(
      'KUBE_UNAVAILABLE',
      'unavailable',
      'the API server does not answer: check KUBECONFIG',
    );
    expect(faultOutcome(err, 'pooled', risk)).toEqual({
      status: 'denied',
      tier: 'pooled',
      risk,
      error: {
        class: 'policy',
        code: 'TIER_UNAVAILABLE',
        message: 'the API server does not answer: check KUBECONFIG',
      },
      files: [],
    });
    expect(isEngineFault(err)).toBe(false);
  });

  it('records a bound met as a denied limit with the error code', () => {
    const err = new Fault('QUEUE_FULL', 'rate_limited', 'too many actions queued');
    expect(faultOutcome(err, 'subprocess', risk)).toMatchObject({
      status: 'denied',
      error: { class: 'limit', code: 'QUEUE_FULL', message: 'too many actions queued' },
    });
    expect(isEngineFault(err)).toBe(false);
  });

  it('keeps an error of its own as an internal error with code and message', () => {
    const err = new Fault('SNAPSHOT_FAILED', 'internal', 'the walk failed');
    expect(faultOutcome(err, 'pooled', risk)).toMatchObject({
      status: 'error',
      error: { class: 'internal', code: 'SNAPSHOT_FAILED', message: 'the walk failed' },
    });
    expect(isEngineFault(err)).toBe(true);
  });

  it('never passes on the message of a foreign error (it may carry host details)', () => {
    const out = faultOutcome(new Error('ENOENT /var/lib/secret/path'), 'pooled', risk);
    expect(out).toMatchObject({
      status: 'error',
      error: { class: 'internal', message: 'internal error while running the action' },
    });
    expect(JSON.stringify(out)).not.toContain('/var/lib');
    expect(isEngineFault(new Error('x'))).toBe(true);
  });
});
