import {
  explainKubeError,
  type KubeOrigin,
  toKubeError,
  toPodInfo,
  toSocketError,
} from './client-node-mapping';
import { KubeApiError } from './kubernetes.errors';

const ORIGIN: KubeOrigin = {
  server: 'https://127.0.0.1:6443',
  source: 'KUBECONFIG /k/kubeconfig, context test',
  settings: 'KUBECONFIG (or SWITCHYARD_K8S_CONTEXT)',
};

const httpError = (statusCode: number, message?: string) => ({
  statusCode,
  body: message === undefined ? {} : { message },
});

describe('toKubeError: what the client library throws, as the engine answers it', () => {
  it.each([
    [401, 'KUBE_FORBIDDEN', 'unavailable', false],
    [403, 'KUBE_FORBIDDEN', 'unavailable', false],
    [404, 'KUBE_NOT_FOUND', 'internal', false],
    [409, 'KUBE_CONFLICT', 'internal', false],
    [422, 'KUBE_INVALID', 'internal', false],
    [400, 'KUBE_INVALID', 'internal', false],
    [429, 'KUBE_API', 'unavailable', true],
    [500, 'KUBE_API', 'unavailable', true],
    [503, 'KUBE_API', 'unavailable', true],
    [418, 'KUBE_API', 'internal', false],
  ])('HTTP %i is %s, kind %s (retriable: %s)', (status, code, kind, retriable) => {
    const err = toKubeError('create pod p', httpError(status, 'the words'));
    expect(err).toMatchObject({ code, kind, retriable, status });
    expect(err.message).toBe('create pod p: the words');
  });

  it('no answer at all is KUBE_UNAVAILABLE, a socket timeout KUBE_TIMEOUT: both unavailable and retriable', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(toKubeError('version', refused)).toMatchObject({
      code: 'KUBE_UNAVAILABLE',
      kind: 'unavailable',
      retriable: true,
      message: 'version: connect ECONNREFUSED 127.0.0.1:1',
      details: { errno: 'ECONNREFUSED' },
    });
    const slow = Object.assign(new Error('ESOCKETTIMEDOUT'), { code: 'ESOCKETTIMEDOUT' });
    expect(toKubeError('list pods', slow)).toMatchObject({ code: 'KUBE_TIMEOUT', kind: 'unavailable' });
  });
});

describe('explainKubeError: the cluster’s failures, with the server and the setting to change', () => {
  it('a server that does not answer is named with where it came from', () => {
    const err = explainKubeError(
      new KubeApiError('KUBE_UNAVAILABLE', 'create pod p: connect ECONNREFUSED 127.0.0.1:6443', {
        retriable: true,
      }),
      ORIGIN,
    );
    expect(err).toMatchObject({ code: 'KUBE_UNAVAILABLE', kind: 'unavailable', retriable: true });
    expect(err.message).toBe(
      'create pod p: connect ECONNREFUSED 127.0.0.1:6443; the Kubernetes API server https://127.0.0.1:6443 (from ' +
        'KUBECONFIG /k/kubeconfig, context test) does not answer: start it, or set KUBECONFIG (or ' +
        'SWITCHYARD_K8S_CONTEXT) to a cluster that answers',
    );
    expect(err.details).toMatchObject({ server: 'https://127.0.0.1:6443' });
  });

  it('refused credentials (401) and a missing right (403) say so apart, keeping the status', () => {
    const unauthorized = explainKubeError(toKubeError('version', httpError(401, 'Unauthorized')), ORIGIN);
    expect(unauthorized).toMatchObject({ code: 'KUBE_FORBIDDEN', status: 401, kind: 'unavailable' });
    expect(unauthorized.message).toBe(
      "version: Unauthorized; the API server https://127.0.0.1:6443 does not accept the engine's credentials (from " +
        'KUBECONFIG /k/kubeconfig, context test): renew them, or set KUBECONFIG (or SWITCHYARD_K8S_CONTEXT) to ' +
        'credentials it accepts',
    );
    const forbidden = explainKubeError(
      toKubeError('exec in p/runner (python3)', httpError(403, 'pods "p" is forbidden')),
      ORIGIN,
    );
    expect(forbidden).toMatchObject({ code: 'KUBE_FORBIDDEN', status: 403 });
    expect(forbidden.message).toBe(
      'exec in p/runner (python3): pods "p" is forbidden; the cluster refuses the engine\'s account (from ' +
        'KUBECONFIG /k/kubeconfig, context test) this right: grant it (docs/kubernetes.md lists the rights the ' +
        'engine uses), or set KUBECONFIG (or SWITCHYARD_K8S_CONTEXT) to an account that has it',
    );
  });

  it('failures about the call, not the cluster, are left as they are', () => {
    const conflict = toKubeError('claim pod p', httpError(409, 'the object has been modified'));
    expect(explainKubeError(conflict, ORIGIN)).toBe(conflict);
  });
});

describe('toSocketError: an attach or exec WebSocket that did not open', () => {
  const wsError = (message: string, code?: string) => ({
    message,
    error: Object.assign(new Error(message), code === undefined ? {} : { code }),
  });

  it('the upgrade refused with 403 is the right missing (pods/exec, pods/attach)', () => {
    expect(toSocketError('attach p/runner', wsError('Unexpected server response: 403'))).toMatchObject({
      code: 'KUBE_FORBIDDEN',
      status: 403,
      kind: 'unavailable',
      message: 'attach p/runner: HTTP 403',
    });
  });

  it('404 is no such pod; a 5xx is the server failing', () => {
    expect(toSocketError('exec in p', wsError('Unexpected server response: 404'))).toMatchObject({
      code: 'KUBE_NOT_FOUND',
    });
    expect(toSocketError('exec in p', wsError('Unexpected server response: 503'))).toMatchObject({
      code: 'KUBE_API',
      kind: 'unavailable',
    });
  });

  it('no connection is KUBE_UNAVAILABLE; anything else stays a broken stream', () => {
    expect(
      toSocketError('attach p', wsError('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED')),
    ).toMatchObject({ code: 'KUBE_UNAVAILABLE', kind: 'unavailable', retriable: true });
    expect(toSocketError('attach p', wsError('Invalid WebSocket frame'))).toMatchObject({
      code: 'KUBE_STREAM',
      kind: 'internal',
      retriable: true,
      message: 'attach p: Invalid WebSocket frame',
    });
  });
});

describe('toPodInfo: the scheduler’s condition', () => {
  it('carries PodScheduled (status, reason, words) when a scheduler looked, and nothing when none did', () => {
    const pod = {
      metadata: { name: 'p', uid: 'u', resourceVersion: '1' },
      status: {
        phase: 'Pending',
        conditions: [
          { type: 'Initialized', status: 'True' },
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/1 nodes are available: 1 Insufficient memory.',
          },
        ],
      },
    };
    expect(toPodInfo(pod as never).scheduled).toEqual({
      status: 'False',
      reason: 'Unschedulable',
      message: '0/1 nodes are available: 1 Insufficient memory.',
    });
    expect(toPodInfo({ metadata: { name: 'q' }, status: { phase: 'Pending' } }).scheduled).toBeUndefined();
  });
});
