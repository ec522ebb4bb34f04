import { InvalidInputError } from '@switchyard/common';
import { EgressPolicy } from './egress-policy';

describe('EgressPolicy', () => {
  it('allows exact names and subdomains of *.domain on ports 80 and 443 unless a port is given', () => {
    const p = EgressPolicy.parse(['PyPI.org.', '*.pythonhosted.org', 'git.example:8443'], 'network.allow');
    expect(p.allow).toEqual(['pypi.org', '*.pythonhosted.org', 'git.example:8443']);
    expect(p.allows('pypi.org', 443)).toBe(true);
    expect(p.allows('PYPI.ORG', 80)).toBe(true);
    expect(p.allows('pypi.org', 22)).toBe(false);
    expect(p.allows('files.pythonhosted.org', 443)).toBe(true);
    expect(p.allows('pythonhosted.org', 443)).toBe(false);
    expect(p.allows('evilpythonhosted.org', 443)).toBe(false);
    expect(p.allows('git.example', 8443)).toBe(true);
    expect(p.allows('git.example', 443)).toBe(false);
    expect(p.allows('sub.pypi.org', 443)).toBe(false);
  });

  it('refuses addresses and malformed entries, naming the entry', () => {
    for (const bad of ['10.0.0.1', '169.254.169.254', 'a b', 'http://x.org', 'x.org:99999', '*.', '']) {
      if (bad === '') continue;
      expect(() => EgressPolicy.parse(['ok.org', bad], 'network.allow')).toThrow(InvalidInputError);
      try {
        EgressPolicy.parse(['ok.org', bad], 'network.allow');
      } catch (err) {
        expect((err as InvalidInputError).field).toBe('network.allow[1]');
      }
    }
  });

  it('says what a policy asks beyond a bound', () => {
    const bound = EgressPolicy.parse(['pypi.org', '*.pythonhosted.org', 'git.example:8443'], 'b');
    const within = EgressPolicy.parse(['pypi.org', 'files.pythonhosted.org', '*.x.pythonhosted.org'], 'p');
    expect(within.beyond(bound)).toEqual([]);
    const over = EgressPolicy.parse(['pypi.org:8080', 'github.com', '*.org', 'git.example'], 'p');
    expect(over.beyond(bound)).toEqual(['pypi.org:8080', 'github.com', '*.org', 'git.example']);
    expect(EgressPolicy.parse(['*'], 'p').beyond(bound)).toEqual(['*']);
    expect(EgressPolicy.parse(['*', 'github.com'], 'p').beyond(EgressPolicy.parse(['*'], 'b'))).toEqual([]);
    expect(EgressPolicy.none.isEmpty).toBe(true);
  });
});
