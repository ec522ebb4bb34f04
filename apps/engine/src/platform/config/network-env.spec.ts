import { problemsOf } from './config.testing';
import { loadEngineConfig } from './engine-config';

describe('network settings', () => {
  it('default to no network at all', () => {
    const { network } = loadEngineConfig({});
    expect(network.bound.isEmpty).toBe(true);
    expect(network.default.isEmpty).toBe(true);
    expect(network.resolve.size).toBe(0);
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
