import { ConfigError, loadEngineConfig } from './engine-config';

describe('SWITCHYARD_CONTAINER_RUNTIME', () => {
  it('defaults to auto: gVisor for the one-off tier when the Docker engine has it', () => {
    expect(loadEngineConfig({}).sandbox.containerRuntime).toBe('auto');
  });

  it.each(['auto', 'runsc', 'runc'])('takes %s', (value) => {
    expect(loadEngineConfig({ SWITCHYARD_CONTAINER_RUNTIME: value }).sandbox.containerRuntime).toBe(value);
  });

  it.each(['gvisor', 'RUNSC', 'kata', ''])(
    'refuses %j at boot, naming the variable and the choices',
    (value) => {
      let error: unknown;
      try {
        loadEngineConfig({ SWITCHYARD_CONTAINER_RUNTIME: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain('SWITCHYARD_CONTAINER_RUNTIME');
      expect((error as ConfigError).message).toMatch(/auto.*runsc.*runc/);
    },
  );
});

describe('SWITCHYARD_CONTAINER_AHEAD_MAX and SWITCHYARD_CONTAINER_AHEAD_IDLE_MS', () => {
  it('default to 4 containers started ahead, each kept 60 s at most', () => {
    expect(loadEngineConfig({}).sandbox.containerAhead).toEqual({ max: 4, idleMs: 60_000 });
  });

  it('take 0 (none) and other values in range', () => {
    expect(
      loadEngineConfig({ SWITCHYARD_CONTAINER_AHEAD_MAX: '0', SWITCHYARD_CONTAINER_AHEAD_IDLE_MS: '5000' })
        .sandbox.containerAhead,
    ).toEqual({ max: 0, idleMs: 5000 });
  });

  it.each([
    ['SWITCHYARD_CONTAINER_AHEAD_MAX', '65'],
    ['SWITCHYARD_CONTAINER_AHEAD_MAX', 'many'],
    ['SWITCHYARD_CONTAINER_AHEAD_IDLE_MS', '10'],
  ])('refuses %s=%s at boot, naming it', (name, value) => {
    expect(() => loadEngineConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadEngineConfig({ [name]: value })).toThrow(name);
  });
});
