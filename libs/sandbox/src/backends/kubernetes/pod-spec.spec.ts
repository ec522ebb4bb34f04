import { resolveKubernetesOptions } from './kubernetes.options';
import {
  RESERVE_CONTAINER,
  RUNNER_RESERVE_BYTES,
  RUNNER_ENTRY,
  claimLabels,
  cpuQuantity,
  engineSelector,
  labelValue,
  networkPolicyManifest,
  oneOffPodManifest,
  podName,
  sessionPodManifest,
  sessionPodSpecHash,
} from './pod-spec';

const MiB = 2 ** 20;
const options = resolveKubernetesOptions({
  image: 'switchyard/sandbox:t1',
  engineId: 'host-1:42:999:abcd',
  nodeName: 'switchyard-node',
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  runtimeClassName: 'gvisor',
  limits: {
    pooled: { memoryBytes: 256 * MiB, cpus: 0.5, workspaceBytes: 100 * MiB, tmpBytes: 32 * MiB },
    container: { memoryBytes: 128 * MiB, cpus: 0.25 },
  },
});

const session = sessionPodManifest({
  name: 'sy-s-1',
  image: 'switchyard/sandbox:t1',
  engineId: options.engineId,
  limits: options.limits.pooled,
  options,
  state: 'warm',
  specHash: 'abc',
});
const oneOff = oneOffPodManifest({
  name: 'sy-c-1',
  image: 'switchyard/sandbox:t1',
  engineId: options.engineId,
  limits: options.limits.container,
  options,
  sessionId: 'ses_1',
  actionId: 'act_1',
  activeDeadlineSeconds: 700,
});

describe('session and one-off pod manifests', () => {
  it.each([
    ['session', session],
    ['one-off', oneOff],
  ])('%s pods have every SECURITY.md container setting Kubernetes can express', (_kind, pod) => {
    const { spec } = pod;
    expect(spec.securityContext).toEqual({
      runAsUser: 10001,
      runAsGroup: 10001,
      runAsNonRoot: true,
      fsGroup: 10001,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(spec).toMatchObject({
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      hostname: 'sandbox',
      nodeName: 'switchyard-node',
      nodeSelector: { 'kubernetes.io/os': 'linux' },
    });
    expect(spec.containers).toHaveLength(1);
    const [c] = spec.containers;
    expect(c.securityContext).toEqual({
      runAsUser: 10001,
      runAsGroup: 10001,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c).toMatchObject({ stdin: true, stdinOnce: false, tty: false, imagePullPolicy: 'Never' });
    // Memory and ephemeral storage are requested in full; CPU at the (lower) cpuRequest.
    expect(c.resources.requests).toEqual({ ...c.resources.limits, cpu: '100m' });
    expect(Object.keys(c.resources.limits).sort()).toEqual(['cpu', 'ephemeral-storage', 'memory']);
    // The only writable places are size-limited emptyDirs.
    for (const v of spec.volumes) expect(v.emptyDir.sizeLimit).toMatch(/^\d+$/);
    expect(c.volumeMounts.map((m) => m.mountPath).sort()).toEqual(['/run/switchyard', '/tmp', '/workspace']);
  });

  it('sizes the pod from its tier limits', () => {
    const c = session.spec.containers[0];
    expect(c.resources.limits).toEqual({
      cpu: '500m',
      memory: String(256 * MiB),
      'ephemeral-storage': String(100 * MiB + 128 * MiB),
    });
    const volumes = Object.fromEntries(session.spec.volumes.map((v) => [v.name, v.emptyDir]));
    expect(volumes).toEqual({
      tmp: { medium: 'Memory', sizeLimit: String(32 * MiB) },
      code: { medium: 'Memory', sizeLimit: String(8 * MiB) },
      workspace: { sizeLimit: String(100 * MiB) },
    });
    expect(oneOff.spec.containers[0].resources.limits.cpu).toBe('250m');
    expect(cpuQuantity(0.0001)).toBe('1m');
  });

  it('gives a session pod a memory reserve above its runner (an init container whose limit sizes the pod)', () => {
    expect(session.spec.initContainers).toHaveLength(1);
    const [reserve] = session.spec.initContainers!;
    const runner = session.spec.containers[0];
    expect(reserve).toMatchObject({
      name: RESERVE_CONTAINER,
      image: runner.image,
      command: ['/bin/true'],
      securityContext: runner.securityContext,
      volumeMounts: [],
    });
    expect(reserve.resources.limits).toEqual({
      cpu: '500m',
      memory: String(256 * MiB + RUNNER_RESERVE_BYTES),
    });
    // What the pod reserves on its node is the runner's, not the reserve's limit.
    expect(Number(reserve.resources.requests.memory)).toBeLessThan(Number(runner.resources.requests.memory));
    // Only the session pod's runner leaves (and is restarted) when its memory stays full after an OOM.
    const flag = (c: typeof runner) => c.env?.find((e) => e.name === 'SWITCHYARD_RUNNER_RESTART_WHEN_PINNED');
    expect(flag(runner)).toEqual({ name: 'SWITCHYARD_RUNNER_RESTART_WHEN_PINNED', value: '1' });
    expect(flag(reserve)).toBeUndefined();
    expect(oneOff.spec.initContainers).toBeUndefined();
    expect(flag(oneOff.spec.containers[0])).toBeUndefined();
  });

  it('restarts a session pod runner in place, never a one-off one; only one-off pods get the RuntimeClass', () => {
    expect(session.spec.restartPolicy).toBe('Always');
    expect(session.spec.runtimeClassName).toBeUndefined();
    expect(oneOff.spec.restartPolicy).toBe('Never');
    expect(oneOff.spec.runtimeClassName).toBe('gvisor');
    expect(oneOff.spec.activeDeadlineSeconds).toBe(700);
  });

  it('starts the runner through the entry point that sets the rlimits and waits for the wake byte', () => {
    const c = session.spec.containers[0];
    expect(c.command.slice(0, 4)).toEqual(['/usr/bin/python3', '-I', '-c', RUNNER_ENTRY]);
    expect(c.command.slice(4)).toEqual(['256', String(64 * MiB)]);
    expect(RUNNER_ENTRY).toContain('os.read(0, 1)');
    expect(RUNNER_ENTRY).toContain('RLIMIT_CORE, (0, 0)');
    expect(RUNNER_ENTRY).toContain('/opt/switchyard/runner/runner.py');
  });

  it('labels pods for selection and keeps the exact ids in annotations', () => {
    expect(session.metadata.labels).toEqual({
      'switchyard.dev/sandbox': 'true',
      'switchyard.dev/engine': 'host-1_42_999_abcd',
      'switchyard.dev/tier': 'session',
      'switchyard.dev/state': 'warm',
      'switchyard.dev/spec': 'abc',
    });
    expect(session.metadata.annotations['switchyard.dev/engine-id']).toBe('host-1:42:999:abcd');
    expect(oneOff.metadata.labels).toMatchObject({
      'switchyard.dev/tier': 'container',
      'switchyard.dev/session': 'ses_1',
      'switchyard.dev/action': 'act_1',
    });
    expect(claimLabels('e:1:2:3', 'ses/x')).toEqual({
      labels: {
        'switchyard.dev/state': 'claimed',
        'switchyard.dev/engine': 'e_1_2_3',
        'switchyard.dev/session': 'ses_x',
      },
      annotations: { 'switchyard.dev/engine-id': 'e:1:2:3', 'switchyard.dev/session-id': 'ses/x' },
    });
    expect(engineSelector('e:1:2:3', { 'switchyard.dev/state': 'warm' })).toBe(
      'switchyard.dev/sandbox=true,switchyard.dev/engine=e_1_2_3,switchyard.dev/state=warm',
    );
  });

  it('makes label values valid, hashing what cannot be made readable', () => {
    expect(labelValue('abc')).toBe('abc');
    expect(labelValue('a:b/c')).toBe('a_b_c');
    const long = labelValue('x'.repeat(80));
    expect(long).toMatch(/^h[0-9a-f]{40}$/);
    expect(labelValue('_x')).toMatch(/^h[0-9a-f]{40}$/);
    expect(labelValue('x'.repeat(80))).toBe(long);
  });

  it('names pods as DNS labels', () => {
    expect(podName('session')).toMatch(/^sy-s-[0-9a-f]{10}$/);
    expect(podName('one-off', 'Act_42/..x')).toMatch(/^sy-c-act-42-x-[0-9a-f]{10}$/);
    expect(podName('one-off', 'A'.repeat(100)).length).toBeLessThanOrEqual(63);
  });

  it('hashes what makes session pods interchangeable', () => {
    const a = sessionPodSpecHash('img:1', options.limits.pooled, options);
    expect(sessionPodSpecHash('img:1', { ...options.limits.pooled }, { ...options })).toBe(a);
    expect(sessionPodSpecHash('img:2', options.limits.pooled, options)).not.toBe(a);
    expect(
      sessionPodSpecHash('img:1', { ...options.limits.pooled, memoryBytes: 64 * MiB }, options),
    ).not.toBe(a);
    expect(sessionPodSpecHash('img:1', options.limits.pooled, { ...options, nodeName: 'other' })).not.toBe(a);
  });

  it('denies all ingress and egress of every sandbox pod', () => {
    expect(networkPolicyManifest().spec).toEqual({
      podSelector: { matchLabels: { 'switchyard.dev/sandbox': 'true' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
  });
});
