import { ConfigError, loadEngineConfig } from './engine-config';

describe('loadEngineConfig: browser tier', () => {
  it('has documented defaults', () => {
    expect(loadEngineConfig({}).browser).toEqual({
      enabled: true,
      executablePath: '/usr/bin/chromium',
      allowlist: [],
      evaluate: false,
      maxContexts: 16,
      maxDedicated: 4,
      timeoutMs: 30_000,
      idleMs: 600_000,
      maxArtifactBytes: 50 * 1024 * 1024,
      prelaunch: false,
    });
  });

  it('parses every variable', () => {
    const b = loadEngineConfig({
      SWITCHYARD_BROWSER_ENABLED: 'false',
      SWITCHYARD_BROWSER_EXECUTABLE: '/opt/chromium/chrome',
      SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2, 10.0.0.0/8 ,intranet.example,*.corp.example',
      SWITCHYARD_BROWSER_EVALUATE: 'yes',
      SWITCHYARD_BROWSER_MAX_CONTEXTS: '8',
      SWITCHYARD_BROWSER_MAX_DEDICATED: '2',
      SWITCHYARD_BROWSER_TIMEOUT_MS: '5000',
      SWITCHYARD_BROWSER_IDLE_MS: '60000',
      SWITCHYARD_BROWSER_MAX_ARTIFACT_BYTES: '1048576',
      SWITCHYARD_BROWSER_PRELAUNCH: '1',
    }).browser;
    expect(b).toEqual({
      enabled: false,
      executablePath: '/opt/chromium/chrome',
      allowlist: ['127.0.0.2', '10.0.0.0/8', 'intranet.example', '*.corp.example'],
      evaluate: true,
      maxContexts: 8,
      maxDedicated: 2,
      timeoutMs: 5000,
      idleMs: 60_000,
      maxArtifactBytes: 1_048_576,
      prelaunch: true,
    });
  });

  it.each([
    [{ SWITCHYARD_BROWSER_ALLOWLIST: '10.0.0.0/99' }, 'SWITCHYARD_BROWSER_ALLOWLIST'],
    [{ SWITCHYARD_BROWSER_ALLOWLIST: 'http://intranet' }, 'SWITCHYARD_BROWSER_ALLOWLIST'],
    [{ SWITCHYARD_BROWSER_EXECUTABLE: 'chromium' }, 'SWITCHYARD_BROWSER_EXECUTABLE'],
    [{ SWITCHYARD_BROWSER_EVALUATE: 'maybe' }, 'SWITCHYARD_BROWSER_EVALUATE'],
    [{ SWITCHYARD_BROWSER_MAX_CONTEXTS: '0' }, 'SWITCHYARD_BROWSER_MAX_CONTEXTS'],
    [
      { SWITCHYARD_BROWSER_MAX_CONTEXTS: '2', SWITCHYARD_BROWSER_MAX_DEDICATED: '3' },
      'SWITCHYARD_BROWSER_MAX_DEDICATED',
    ],
    [{ SWITCHYARD_BROWSER_TIMEOUT_MS: '400000' }, 'SWITCHYARD_BROWSER_TIMEOUT_MS'],
    [{ SWITCHYARD_BROWSER_IDLE_MS: '10' }, 'SWITCHYARD_BROWSER_IDLE_MS'],
  ])('refuses %j naming %s', (env, variable) => {
    try {
      loadEngineConfig(env);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems.map((p) => p.variable)).toContain(variable);
      return;
    }
    throw new Error('expected a ConfigError');
  });
});
