import { ConfigError, loadEngineConfig } from './engine-config';

describe('loadEngineConfig', () => {
  it('applies documented defaults with an empty environment', () => {
    const c = loadEngineConfig({});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(c.apiKeys).toEqual([]);
    expect(c.sessions.defaultTtlSeconds).toBe(3600);
    expect(c.sandbox.defaultTimeoutMs).toBe(30_000);
    expect(c.sandbox.output).toEqual({ maxBytes: 1024 * 1024, maxLines: 2000 });
    expect(c.sandbox.riskThresholds).toEqual({ medium: 20, high: 50, critical: 80 });
    expect(c.sandbox.allowWeakerTier).toBe(false);
  });

  it('parses values from strings', () => {
    const c = loadEngineConfig({
      PORT: '9090',
      SWITCHYARD_API_KEYS: 'aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb',
      SWITCHYARD_ALLOW_WEAKER_TIER: 'true',
      SWITCHYARD_RISK_THRESHOLDS: '20,50,80',
      SWITCHYARD_LOG_LEVEL: 'debug',
    });
    expect(c.port).toBe(9090);
    expect(c.apiKeys).toEqual(['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb']);
    expect(c.sandbox.allowWeakerTier).toBe(true);
    expect(c.sandbox.riskThresholds).toEqual({ medium: 20, high: 50, critical: 80 });
    expect(c.logLevel).toBe('debug');
  });

  it('configures both container tiers and the pool', () => {
    const defaults = loadEngineConfig({}).sandbox;
    expect(defaults.image).toBeUndefined();
    expect(defaults.pool).toMatchObject({ min: 2, max: 16, maxSessions: 16, acquireTimeoutMs: 10_000 });
    expect(defaults.pooled).toEqual({
      memoryBytes: 512 * 2 ** 20,
      nanoCpus: 1e9,
      pids: 128,
      maxTimeoutMs: 300_000,
      outputMaxBytes: 2 ** 20,
    });
    const c = loadEngineConfig({
      SWITCHYARD_SANDBOX_IMAGE: 'registry.local/switchyard/sandbox:1.2',
      SWITCHYARD_POOL_MIN: '1',
      SWITCHYARD_POOL_MAX: '3',
      SWITCHYARD_POOL_MOUNT_ROOT: '/srv/switchyard/pooled',
      SWITCHYARD_POOLED_CPUS: '0.5',
      SWITCHYARD_POOLED_MAX_TIMEOUT_MS: '60000',
      SWITCHYARD_CONTAINER_MEMORY_BYTES: String(256 * 2 ** 20),
      SWITCHYARD_CONTAINER_PIDS: '64',
      SWITCHYARD_CONTAINER_OUTPUT_MAX_BYTES: '4096',
    }).sandbox;
    expect(c.image).toBe('registry.local/switchyard/sandbox:1.2');
    expect(c.pool).toMatchObject({ min: 1, max: 3, mountRoot: '/srv/switchyard/pooled' });
    expect(c.pooled).toMatchObject({ nanoCpus: 5e8, maxTimeoutMs: 60_000 });
    expect(c.container).toMatchObject({ memoryBytes: 256 * 2 ** 20, pids: 64, outputMaxBytes: 4096 });
  });

  it('configures the Kubernetes backend', () => {
    const c = loadEngineConfig(
      {
        SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
        KUBECONFIG: 'cluster/kubeconfig',
        SWITCHYARD_K8S_CONTEXT: 'ci',
        SWITCHYARD_K8S_NAMESPACE: 'agents',
        SWITCHYARD_K8S_RUNTIME_CLASS: 'gvisor',
        SWITCHYARD_K8S_NODE_SELECTOR: 'pool=sandboxes, zone=a',
        SWITCHYARD_K8S_IMAGE_PULL_POLICY: 'IfNotPresent',
        SWITCHYARD_K8S_CPU_REQUEST: '0.25',
        SWITCHYARD_K8S_POD_START_TIMEOUT_MS: '5000',
      },
      '/srv/engine',
    ).kubernetes;
    expect(c).toMatchObject({
      backend: 'kubernetes',
      kubeconfigPath: '/srv/engine/cluster/kubeconfig',
      context: 'ci',
      namespace: 'agents',
      runtimeClassName: 'gvisor',
      nodeSelector: { pool: 'sandboxes', zone: 'a' },
      imagePullPolicy: 'IfNotPresent',
      cpuRequest: 0.25,
      podStartTimeoutMs: 5000,
    });
    expect(loadEngineConfig({}).kubernetes).toMatchObject({
      backend: 'docker',
      namespace: 'switchyard',
      podStartTimeoutMs: 60_000,
    });
  });

  it('takes egress settings with the Kubernetes backend (pods reach the proxy over their runner)', () => {
    const config = loadEngineConfig({
      SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
      SWITCHYARD_EGRESS_ALLOWED: 'pypi.org',
      SWITCHYARD_EGRESS_DEFAULT: 'pypi.org',
    });
    expect(config.network.bound.isEmpty).toBe(false);
    expect(config.network.default.isEmpty).toBe(false);
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['SWITCHYARD_LOG_LEVEL', 'loud'],
    ['SWITCHYARD_API_KEYS', 'short'],
    ['SWITCHYARD_ALLOW_WEAKER_TIER', 'maybe'],
    ['SWITCHYARD_RISK_THRESHOLDS', '50,40,90'],
    ['SWITCHYARD_OUTPUT_MAX_BYTES', '12kb'],
    ['SWITCHYARD_DEFAULT_TIMEOUT_MS', '999999999'],
    ['SWITCHYARD_SANDBOX_IMAGE', 'not an image!'],
    ['SWITCHYARD_POOL_MIN', '17'],
    ['SWITCHYARD_POOL_MAX', '0'],
    ['SWITCHYARD_POOL_STARTS', '0'],
    ['SWITCHYARD_POOL_DEMAND_WINDOW_MS', '5'],
    ['SWITCHYARD_POOLED_PIDS', '1000'],
    ['SWITCHYARD_CONTAINER_PIDS', '10'],
    ['SWITCHYARD_CONTAINER_CPUS', 'two'],
    ['SWITCHYARD_POOLED_MAX_TIMEOUT_MS', '1000'],
    ['SWITCHYARD_POOL_MOUNT_ROOT', 'relative/dir'],
    ['SWITCHYARD_SANDBOX_BACKEND', 'podman'],
    ['SWITCHYARD_K8S_NAMESPACE', 'Not_A_Namespace'],
    ['SWITCHYARD_K8S_NODE_SELECTOR', 'zone'],
    ['SWITCHYARD_K8S_NODE_NAME', 'UPPER'],
    ['SWITCHYARD_K8S_RUNTIME_CLASS', 'a b'],
    ['SWITCHYARD_K8S_IMAGE_PULL_POLICY', 'Sometimes'],
    ['SWITCHYARD_K8S_CPU_REQUEST', '0'],
    ['SWITCHYARD_K8S_POD_START_TIMEOUT_MS', '10'],
  ])('rejects %s=%s naming the variable', (name, value) => {
    let error: unknown;
    try {
      loadEngineConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain(name);
  });
});
