import {
  buildContainerSpec,
  CODE_LOADER,
  CODE_TMPFS_FLOOR,
  CODE_TARGET,
  containerStdin,
  EGRESS_LOADER,
  PYTHON_LOADER,
} from './container-spec';
import { resolveContainerOptions } from './container.options';

const MiB = 1024 * 1024;
const HOSTS = '/srv/engine/sandbox-hosts';
const options = resolveContainerOptions({ engineInstanceId: 'engine-1' });
const job = {
  actionId: 'act-1',
  sessionId: 'sess-1',
  language: 'python' as const,
  code: 'print("€")',
  env: { PATH: '/usr/bin:/bin', HOME: '/tmp', FOO: 'a=b c' },
  workspaceDir: '/data/ws/sess-1',
};
const spec = buildContainerSpec({
  job,
  image: 'switchyard/sandbox:abc',
  options,
  name: 'switchyard-act-1-x',
  hostsFile: HOSTS,
});
const host = spec.HostConfig!;

describe('buildContainerSpec', () => {
  it('runs the image as the sandbox user in /workspace, never privileged', () => {
    expect(spec).toMatchObject({
      name: 'switchyard-act-1-x',
      Image: 'switchyard/sandbox:abc',
      User: '10001:10001',
      WorkingDir: '/workspace',
      Tty: false,
    });
    expect(host.Privileged).toBe(false);
  });

  it('applies every container setting of SECURITY.md', () => {
    expect(host.CapDrop).toEqual(['ALL']);
    expect(host.CapAdd).toBeUndefined();
    expect(host.SecurityOpt).toEqual(['no-new-privileges']); // and no seccomp=unconfined: Docker's default profile
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.Tmpfs?.['/tmp']).toBe('rw,nosuid,nodev,size=64m,nr_inodes=16384,mode=1777');
    expect(host.NetworkMode).toBe('none');
    expect(spec.NetworkDisabled).toBe(true);
    expect(host.PidsLimit).toBe(128);
    expect(host.Memory).toBe(512 * MiB);
    expect(host.MemorySwap).toBe(host.Memory);
    expect(host.NanoCpus).toBe(1e9);
    expect(host.Ulimits).toEqual([
      { Name: 'nofile', Soft: 256, Hard: 256 },
      { Name: 'fsize', Soft: 64 * MiB, Hard: 64 * MiB },
      { Name: 'core', Soft: 0, Hard: 0 },
    ]);
    expect(host.Ulimits?.map((u) => u.Name)).not.toContain('nproc');
    expect(host.Init).toBe(true);
    expect(host.LogConfig).toEqual({ Type: 'none', Config: {} });
    expect(host.IpcMode).toBe('private');
    expect(host.ShmSize).toBe(64 * MiB);
    expect(host.AutoRemove).toBe(false);
  });

  it('labels the container with engine, session, tier and action', () => {
    expect(spec.Labels).toEqual({
      'dev.switchyard.engine': 'engine-1',
      'dev.switchyard.session': 'sess-1',
      'dev.switchyard.tier': 'container',
      'dev.switchyard.action': 'act-1',
    });
  });

  it('binds only the workspace, read-write, and its own /etc/hosts, read-only; never the Docker socket', () => {
    expect(host.Binds).toEqual(['/data/ws/sess-1:/workspace:rw', `${HOSTS}:/etc/hosts:ro`]);
    expect(host.Mounts).toBeUndefined();
    expect(host.Devices).toBeUndefined();
    expect(JSON.stringify(spec)).not.toContain('docker.sock');
  });

  it('passes exactly the job environment', () => {
    expect(spec.Env).toEqual(['PATH=/usr/bin:/bin', 'HOME=/tmp', 'FOO=a=b c']);
  });

  it('has python load its code from stdin into a private tmpfs itself, with no shell started first', () => {
    expect(spec.Entrypoint).toEqual(['/usr/bin/python3', '-c', PYTHON_LOADER]);
    // The code's length comes on stdin (`containerStdin`), not in the settings.
    expect(spec.Cmd).toEqual([CODE_TARGET.python]);
    // Room for any code up to 1 MiB in one size, so the settings do not depend on the code.
    expect(host.Tmpfs?.['/run/switchyard']).toBe(
      'rw,nosuid,nodev,noexec,size=1028k,nr_inodes=16,mode=0700,uid=10001,gid=10001',
    );
    expect(spec).toMatchObject({ OpenStdin: true, StdinOnce: true, AttachStdin: true });
  });

  it('has the same settings whatever the code up to 1 MiB, and room for larger code', () => {
    const of = (code: string) =>
      buildContainerSpec({ job: { ...job, code }, image: 'i', options, hostsFile: HOSTS });
    expect(of('x')).toEqual(of('y'.repeat(CODE_TMPFS_FLOOR)));
    expect(of('z'.repeat(2 * CODE_TMPFS_FLOOR)).HostConfig?.Tmpfs?.['/run/switchyard']).toContain(
      'size=2052k',
    );
  });

  it('loads other languages, and python with egress, with the shell loader, then execs the interpreter', () => {
    const bash = buildContainerSpec({
      job: { ...job, language: 'bash' },
      image: 'i',
      options,
      hostsFile: HOSTS,
    });
    expect(bash.Entrypoint).toEqual(['/bin/sh', '-c', CODE_LOADER, 'switchyard-loader']);
    expect(bash.Cmd?.slice(0, 2)).toEqual([CODE_TARGET.bash, '/bin/bash']);
    const egress = { socketDir: '/srv/egress/s1' };
    const py = buildContainerSpec({
      job: { ...job, egress } as never,
      image: 'i',
      options,
      hostsFile: HOSTS,
    });
    expect(py.Entrypoint).toEqual(['/bin/sh', '-c', EGRESS_LOADER, 'switchyard-loader']);
    expect(py.Cmd?.slice(0, 3)).toEqual([CODE_TARGET.python, '/usr/bin/python3', '-c']);
    expect(py.Cmd?.[3]).toContain(CODE_TARGET.python);
  });

  it.each([
    ['node', ['/usr/bin/node', '/run/switchyard/main.js']],
    ['bash', ['/bin/bash', '--noprofile', '--norc', '/run/switchyard/main.sh']],
  ] as const)('runs %s on its code file', (language, argv) => {
    const s = buildContainerSpec({ job: { ...job, language }, image: 'i', options, hostsFile: HOSTS });
    expect(s.Cmd).toEqual([CODE_TARGET[language], ...argv]);
    expect(s.name).toBeUndefined();
  });

  it('follows the configured limits and user', () => {
    const custom = resolveContainerOptions({
      user: '2000:3000',
      limits: {
        memoryBytes: 256 * MiB,
        nanoCpus: 5e8,
        pids: 64,
        tmpfsBytes: 10 * 1024,
        nofile: 64,
        fsizeBytes: 1000,
      },
    });
    const s = buildContainerSpec({ job, image: 'i', options: custom, hostsFile: HOSTS });
    expect(s.User).toBe('2000:3000');
    expect(s.HostConfig).toMatchObject({
      Memory: 256 * MiB,
      MemorySwap: 256 * MiB,
      NanoCpus: 5e8,
      PidsLimit: 64,
      ShmSize: 10 * 1024,
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=10k,nr_inodes=1024,mode=1777' },
      Ulimits: [
        { Name: 'nofile', Soft: 64, Hard: 64 },
        { Name: 'fsize', Soft: 1000, Hard: 1000 },
        { Name: 'core', Soft: 0, Hard: 0 },
      ],
    });
    expect(s.HostConfig?.Tmpfs?.['/run/switchyard']).toContain('uid=2000,gid=3000');
  });
});

describe('containerStdin', () => {
  it("is a line with the code's byte length, the code bytes, then the stdin bytes", () => {
    // '€' is 3 bytes in UTF-8: the loaders count bytes.
    expect(containerStdin({ code: 'print("€")', stdin: 'in€' }).toString()).toBe('12\nprint("€")in€');
    expect(containerStdin({ code: 'x' }).toString()).toBe('1\nx');
  });
});

describe('buildContainerSpec with read-only binds', () => {
  it("binds the operator's shared files at the same path, read-only", () => {
    const withCa = buildContainerSpec({
      job,
      image: 'switchyard/sandbox:test',
      options: resolveContainerOptions({ engineInstanceId: 'engine-1', readOnlyBinds: ['/d/ca/bundle.pem'] }),
      hostsFile: HOSTS,
    });
    expect(withCa.HostConfig!.Binds).toEqual([
      '/data/ws/sess-1:/workspace:rw',
      `${HOSTS}:/etc/hosts:ro`,
      '/d/ca/bundle.pem:/d/ca/bundle.pem:ro',
    ]);
  });

  it('refuses a bind that is not an absolute path, naming the option', () => {
    expect(() => resolveContainerOptions({ readOnlyBinds: ['relative.pem'] })).toThrow(
      /container\.readOnlyBinds\[0\]/,
    );
    expect(() => resolveContainerOptions({ readOnlyBinds: ['/a:/b'] })).toThrow(
      /container\.readOnlyBinds\[0\]/,
    );
  });
});
