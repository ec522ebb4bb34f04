import { problemsOf } from './config.testing';
import { loadEngineConfig } from './engine-config';

describe('network settings', () => {
  it('default to no network at all', () => {
    const { network } = loadEngineConfig({});
    expect(network.bound.isEmpty).toBe(true);
    expect(network.default.isEmpty).toBe(true);
    expect(network.resolve.size).toBe(0);
    expect(network.upstream).toBeUndefined();
    expect(network.trustedNets).toEqual([]);
    expect(network.sandboxCaFile).toBeUndefined();
  });

  it('parse the bound, a default within it, and test-only resolutions', () => {
    const { network } = loadEngineConfig({
      SWITCHYARD_EGRESS_ALLOWED: 'pypi.org, *.pythonhosted.org',
      SWITCHYARD_EGRESS_DEFAULT: 'files.pythonhosted.org',
      SWITCHYARD_EGRESS_RESOLVE: 'pypi.test=127.0.0.11',
    });
    expect(network.bound.allow).toEqual(['pypi.org', '*.pythonhosted.org']);
    expect(network.default.allows('files.pythonhosted.org', 443)).toBe(true);
    expect(network.resolve.get('pypi.test')).toBe('127.0.0.11');
  });

  it('name the variable at fault', () => {
    expect(problemsOf({ SWITCHYARD_EGRESS_ALLOWED: '10.0.0.1' })[0].variable).toBe(
      'SWITCHYARD_EGRESS_ALLOWED',
    );
    expect(
      problemsOf({ SWITCHYARD_EGRESS_ALLOWED: 'pypi.org', SWITCHYARD_EGRESS_DEFAULT: 'github.com' })[0],
    ).toMatchObject({
      variable: 'SWITCHYARD_EGRESS_DEFAULT',
      message: expect.stringContaining('github.com'),
    });
    expect(problemsOf({ SWITCHYARD_EGRESS_RESOLVE: 'pypi.test' })[0].variable).toBe(
      'SWITCHYARD_EGRESS_RESOLVE',
    );
  });
});

describe('operator egress settings', () => {
  it('parse an upstream proxy, with its credentials as a Basic authorization', () => {
    expect(
      loadEngineConfig({ SWITCHYARD_EGRESS_UPSTREAM_PROXY: 'http://proxy.corp:3128' }).network.upstream,
    ).toEqual({
      host: 'proxy.corp',
      port: 3128,
    });
    const withCredentials = loadEngineConfig({
      SWITCHYARD_EGRESS_UPSTREAM_PROXY: 'http://u:p@127.0.0.1:8080',
    });
    expect(withCredentials.network.upstream).toEqual({
      host: '127.0.0.1',
      port: 8080,
      authorization: `Basic ${Buffer.from('u:p').toString('base64')}`,
    });
  });

  it('refuse an upstream the egress proxy cannot speak to, naming the variable', () => {
    for (const bad of ['https://proxy:3128', 'proxy:3128', 'http://proxy:3128/path']) {
      expect(problemsOf({ SWITCHYARD_EGRESS_UPSTREAM_PROXY: bad })[0].variable).toBe(
        'SWITCHYARD_EGRESS_UPSTREAM_PROXY',
      );
    }
  });

  it('parse trusted networks to canonical CIDRs', () => {
    const { network } = loadEngineConfig({
      SWITCHYARD_EGRESS_TRUSTED_NETS: '10.20.0.0/16, 203.0.113.80, fd00::/8',
    });
    expect(network.trustedNets).toEqual(['10.20.0.0/16', '203.0.113.80/32', 'fd00::/8']);
  });

  it('refuse trusted networks that are not ranges, or that reach loopback, metadata or "this host"', () => {
    for (const bad of [
      'pypi.internal',
      '10.0.0.0/33',
      '127.0.0.0/8',
      '0.0.0.0/0',
      '169.254.169.254',
      '::/0',
      '::ffff:10.0.0.0/104',
    ]) {
      expect(problemsOf({ SWITCHYARD_EGRESS_TRUSTED_NETS: bad })[0]).toMatchObject({
        variable: 'SWITCHYARD_EGRESS_TRUSTED_NETS',
        message: expect.stringContaining(bad),
      });
    }
  });

  it('take an absolute CA file on Docker, and refuse it on Kubernetes naming both variables', () => {
    expect(loadEngineConfig({ SWITCHYARD_SANDBOX_CA_FILE: '/etc/corp/ca.pem' }).network.sandboxCaFile).toBe(
      '/etc/corp/ca.pem',
    );
    expect(problemsOf({ SWITCHYARD_SANDBOX_CA_FILE: 'ca.pem' })[0].variable).toBe(
      'SWITCHYARD_SANDBOX_CA_FILE',
    );
    expect(
      problemsOf({
        SWITCHYARD_SANDBOX_CA_FILE: '/etc/corp/ca.pem',
        SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
      }),
    ).toEqual([
      {
        variable: 'SWITCHYARD_SANDBOX_CA_FILE',
        message: expect.stringContaining('SWITCHYARD_SANDBOX_BACKEND=kubernetes'),
      },
    ]);
  });
});
