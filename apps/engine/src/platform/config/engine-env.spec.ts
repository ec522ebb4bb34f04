import * as path from 'node:path';
import { problemsOf } from './config.testing';
import { loadEngineConfig } from './engine-config';

describe('loadEngineConfig: what the libraries used to read from the environment', () => {
  it('names the sandbox image tag file in the working directory', () => {
    expect(loadEngineConfig({}).sandbox.imageTagFile).toBe(
      path.join(process.cwd(), '.runtime', 'sandbox-image.tag'),
    );
    const c = loadEngineConfig({ SWITCHYARD_DATA_DIR: 'data' }, '/srv/switchyard');
    expect(c.sandbox.imageTagFile).toBe('/srv/switchyard/.runtime/sandbox-image.tag');
    expect(c.dataDir).toBe('/srv/switchyard/data');
  });

  it('keeps the values of the engine’s secret-looking variables, 8 characters or more', () => {
    const { engineSecrets } = loadEngineConfig({
      SWITCHYARD_API_KEYS: 'aaaaaaaaaaaaaaaa',
      AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG',
      GITHUB_TOKEN: 'ghp_short',
      DB_PASSWD: 'hunter22',
      SHORT_TOKEN: 'abc1234',
      HOME: '/root/very/long/path',
    }).redaction;
    expect(engineSecrets).toEqual(['aaaaaaaaaaaaaaaa', 'wJalrXUtnFEMI/K7MDENG', 'ghp_short', 'hunter22']);
  });

  it.each([
    [undefined, undefined],
    ['', undefined],
    ['unix:///var/run/docker.sock', 'unix:///var/run/docker.sock'],
    ['tcp://10.0.0.5:2376', 'tcp://10.0.0.5:2376'],
    ['docker.internal:2375', 'docker.internal:2375'],
    ['ssh://me@build-host', 'ssh://me@build-host'],
  ])('carries DOCKER_HOST=%j as %j', (value, expected) => {
    expect(loadEngineConfig(value === undefined ? {} : { DOCKER_HOST: value }).sandbox.dockerHost).toBe(
      expected,
    );
  });

  it('refuses a DOCKER_HOST dockerode could not use, naming it', () => {
    expect(problemsOf({ DOCKER_HOST: 'tcp://[::1' }).map((p) => p.variable)).toEqual(['DOCKER_HOST']);
  });
});

describe('loadEngineConfig: checks between variables', () => {
  it('names every variable out of order with another at once', () => {
    expect(
      problemsOf({
        SWITCHYARD_MAX_TIMEOUT_MS: '20000',
        SWITCHYARD_POOL_MIN: '17',
        SWITCHYARD_BROWSER_MAX_CONTEXTS: '2',
        SWITCHYARD_BROWSER_MAX_DEDICATED: '3',
        SWITCHYARD_SESSION_TTL_SECONDS: '7200',
        SWITCHYARD_MAX_SESSION_TTL_SECONDS: '3600',
      }),
    ).toEqual([
      { variable: 'SWITCHYARD_DEFAULT_TIMEOUT_MS', message: 'must not exceed SWITCHYARD_MAX_TIMEOUT_MS' },
      { variable: 'SWITCHYARD_POOL_MIN', message: 'must not exceed SWITCHYARD_POOL_MAX' },
      { variable: 'SWITCHYARD_BROWSER_TIMEOUT_MS', message: 'must not exceed SWITCHYARD_MAX_TIMEOUT_MS' },
      {
        variable: 'SWITCHYARD_BROWSER_MAX_DEDICATED',
        message: 'must not exceed SWITCHYARD_BROWSER_MAX_CONTEXTS',
      },
      {
        variable: 'SWITCHYARD_SESSION_TTL_SECONDS',
        message: 'must not exceed SWITCHYARD_MAX_SESSION_TTL_SECONDS',
      },
    ]);
  });

  it('refuses a tier maximum below the default timeout, and accepts one equal to it', () => {
    expect(
      problemsOf({ SWITCHYARD_POOLED_MAX_TIMEOUT_MS: '1000', SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS: '2000' }),
    ).toEqual([
      {
        variable: 'SWITCHYARD_POOLED_MAX_TIMEOUT_MS',
        message: 'must not be below SWITCHYARD_DEFAULT_TIMEOUT_MS',
      },
      {
        variable: 'SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS',
        message: 'must not be below SWITCHYARD_DEFAULT_TIMEOUT_MS',
      },
    ]);
    expect(loadEngineConfig({ SWITCHYARD_POOLED_MAX_TIMEOUT_MS: '30000' }).sandbox.pooled.maxTimeoutMs).toBe(
      30_000,
    );
  });
});
