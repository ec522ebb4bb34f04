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
