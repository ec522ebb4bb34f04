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

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['SWITCHYARD_LOG_LEVEL', 'loud'],
    ['SWITCHYARD_API_KEYS', 'short'],
    ['SWITCHYARD_ALLOW_WEAKER_TIER', 'maybe'],
    ['SWITCHYARD_RISK_THRESHOLDS', '50,40,90'],
    ['SWITCHYARD_OUTPUT_MAX_BYTES', '12kb'],
    ['SWITCHYARD_DEFAULT_TIMEOUT_MS', '999999999'],
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
