import { RiskPolicy } from './risk-policy';
import { isLoopbackHost, networkTargets, targetsOnlyLoopback } from './loopback-targets';

describe('loopback-only network code', () => {
  it('knows loopback hosts', () => {
    for (const h of [
      'localhost',
      'LOCALHOST',
      'api.localhost',
      '127.0.0.1',
      '127.1.2.3',
      '::1',
      '[::1]',
      '0.0.0.0',
    ]) {
      expect(isLoopbackHost(h)).toBe(true);
    }
    for (const h of [
      'example.com',
      '10.0.0.1',
      '169.254.169.254',
      'localhost.example.com',
      '128.0.0.1',
      '::2',
    ]) {
      expect(isLoopbackHost(h)).toBe(false);
    }
  });

  it('finds URL hosts, quoted host:port literals, shell command arguments and /dev/tcp', () => {
    expect(networkTargets("requests.get('http://127.0.0.1:8000/x')", 'python')).toEqual(['127.0.0.1']);
    expect(networkTargets("s.connect(('localhost', 8000))", 'python')).toEqual(['localhost']);
    expect(networkTargets('curl -s localhost:8000/health', 'bash')).toEqual(['localhost']);
    expect(networkTargets('exec 3<>/dev/tcp/127.0.0.1/80', 'bash')).toEqual(['127.0.0.1']);
    expect(networkTargets("fetch('http://[::1]:3000')", 'node')).toEqual(['[::1]']);
  });

  it('qualifies only when every named target is loopback, and there is one', () => {
    expect(targetsOnlyLoopback('curl http://localhost:8000', 'bash')).toBe(true);
    expect(
      targetsOnlyLoopback("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:8000')", 'python'),
    ).toBe(true);
    expect(targetsOnlyLoopback('curl http://localhost:8000 https://example.com', 'bash')).toBe(false);
    expect(targetsOnlyLoopback('curl "$URL"', 'bash')).toBe(false);
    expect(targetsOnlyLoopback("import requests\nrequests.get(f'http://{host}/')", 'python')).toBe(false);
    expect(targetsOnlyLoopback('import socket\nsocket.create_connection((h, 80))', 'python')).toBe(false);
    expect(targetsOnlyLoopback("fetch('http://169.254.169.254/latest/meta-data')", 'node')).toBe(false);
  });

  it('keeps network code low risk when it only reaches the loopback, and scores the rest as before', () => {
    const policy = new RiskPolicy();
    expect(policy.assess('bash', 'curl -s http://localhost:8000/').level).toBe('low');
    expect(
      policy.assess(
        'python',
        "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:8000').read())",
      ).level,
    ).toBe('low');
    expect(policy.assess('bash', 'curl -s https://example.com/').level).toBe('medium');
    expect(policy.assess('python', 'import requests\nrequests.get(url)').level).toBe('medium');
  });
});

describe('network rule: git remotes', () => {
  it('scores git clone/fetch/pull/push as network use, and local git as not', () => {
    const policy = new RiskPolicy();
    expect(policy.assess('bash', 'git clone https://github.com/x/y').reasons.join()).toContain('network');
    expect(policy.assess('bash', 'cd repo && git -C . pull').level).toBe('medium');
    expect(policy.assess('bash', 'git status && git commit -m x').level).toBe('low');
  });
});
