import { buildContainerConfig, POOLED_LABELS, RUNNER_CMD } from './container-config';
import { DEFAULT_POOLED_LIMITS } from './pooled.options';

describe('buildContainerConfig', () => {
  const config = buildContainerConfig({
    image: 'switchyard/sandbox:abc',
    name: 'switchyard-pooled-k1',
    engineId: 'host:1:2',
    mountKey: 'k1',
    mountPoint: '/tmp/switchyard-pooled/k1',
    limits: { ...DEFAULT_POOLED_LIMITS, memoryBytes: 256 * 2 ** 20, pids: 100 },
    hostsFile: '/data/sandbox-etc/sandbox-hosts',
  });
  const host = config.HostConfig!;

  it('applies every container setting of SECURITY.md', () => {
    expect(config.User).toBe('10001:10001');
    // No network set-up at all (only lo), with `NetworkMode: none` as a second guard.
    expect(config.NetworkDisabled).toBe(true);
    expect(host).toMatchObject({
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Privileged: false,
      ReadonlyRootfs: true,
      NetworkMode: 'none',
      PidsLimit: 100,
      Memory: 256 * 2 ** 20,
      MemorySwap: 256 * 2 ** 20,
      NanoCpus: 1e9,
      Init: true,
      LogConfig: { Type: 'none' },
      IpcMode: 'private',
    });
    expect(host.Tmpfs?.['/tmp']).toBe('rw,nosuid,nodev,size=64m,nr_inodes=16384,mode=1777');
    expect(host.Ulimits).toEqual([
      { Name: 'nofile', Soft: 256, Hard: 256 },
      { Name: 'fsize', Soft: 64 * 2 ** 20, Hard: 64 * 2 ** 20 },
      { Name: 'core', Soft: 0, Hard: 0 },
    ]);
    expect(host.SecurityOpt?.join()).not.toMatch(/unconfined/);
  });

  it('labels the container for the reaper, never for a session (labels cannot change after create)', () => {
    expect(config.Labels).toEqual({
      [POOLED_LABELS.engine]: 'host:1:2',
      [POOLED_LABELS.tier]: 'pooled',
      [POOLED_LABELS.mountKey]: 'k1',
    });
  });

  it('mounts only its own mount point at /workspace (slave propagation), its own egress directory (read-only), relay directory and the read-only /etc/hosts, never the Docker socket', () => {
    expect(host.Mounts).toEqual([
      {
        Type: 'bind',
        Source: '/tmp/switchyard-pooled/k1',
        Target: '/workspace',
        ReadOnly: false,
        BindOptions: { Propagation: 'rslave' },
      },
      {
        Type: 'bind',
        Source: '/tmp/switchyard-pooled/k1.egress',
        Target: '/run/switchyard-egress',
        ReadOnly: true,
      },
      {
        Type: 'bind',
        Source: '/tmp/switchyard-pooled/k1.relay',
        Target: '/run/switchyard-relay',
        ReadOnly: false,
      },
      { Type: 'bind', Source: '/data/sandbox-etc/sandbox-hosts', Target: '/etc/hosts', ReadOnly: true },
    ]);
    expect(host.Binds).toBeUndefined();
    expect(JSON.stringify(config)).not.toContain('docker.sock');
  });

  it('runs the runner as the main process with stdin attached, and nothing of the engine environment', () => {
    expect(config.Cmd).toEqual(RUNNER_CMD);
    expect(config).toMatchObject({ OpenStdin: true, StdinOnce: true, AttachStdin: true, Tty: false });
    expect(config.Env).toEqual([
      'PATH=/usr/local/bin:/usr/bin:/bin',
      'LANG=C.UTF-8',
      'HOME=/workspace/.home',
    ]);
  });
});

describe('buildContainerConfig with read-only binds', () => {
  it("mounts the operator's shared files at the same path, read-only, after its own mounts", () => {
    const config = buildContainerConfig({
      image: 'switchyard/sandbox:abc',
      name: 'switchyard-pooled-k2',
      engineId: 'host:1:2',
      mountKey: 'k2',
      mountPoint: '/tmp/switchyard-pooled/k2',
      limits: DEFAULT_POOLED_LIMITS,
      readOnlyBinds: ['/d/ca/bundle.pem', '/d/ca/extra.pem'],
      hostsFile: '/data/sandbox-etc/sandbox-hosts',
    });
    expect(config.HostConfig!.Mounts!.slice(4)).toEqual([
      { Type: 'bind', Source: '/d/ca/bundle.pem', Target: '/d/ca/bundle.pem', ReadOnly: true },
      { Type: 'bind', Source: '/d/ca/extra.pem', Target: '/d/ca/extra.pem', ReadOnly: true },
    ]);
  });
});
