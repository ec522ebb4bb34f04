import { DEFAULT_SECRET_PATTERNS, REDACTED } from '@switchyard/sandbox';
import { SecretRedactor } from './secret-redactor';

describe('SecretRedactor', () => {
  const redactor = new SecretRedactor([...DEFAULT_SECRET_PATTERNS, /acme_[0-9]{8}/]);

  it('redacts configured patterns and whole private key blocks, and says so', () => {
    const pem = '-----BEGIN EC PRIVATE KEY-----\nAAAA\nBBBB\n-----END EC PRIVATE KEY-----';
    expect(redactor.text(`id acme_12345678\n${pem}\nend`)).toEqual({
      text: `id ${REDACTED}\n${REDACTED}\nend`,
      redacted: true,
    });
    expect(redactor.text('-----BEGIN PRIVATE KEY-----\ncut off here').text).toBe(REDACTED);
    expect(redactor.text('nothing to see')).toEqual({ text: 'nothing to see', redacted: false });
  });

  it('walks nested values without touching the original', () => {
    const value = { matches: [{ line: 'token acme_00000000' }], count: 1 };
    const r = redactor.value(value);
    expect(r).toEqual({ value: { matches: [{ line: `token ${REDACTED}` }], count: 1 }, redacted: true });
    expect(value.matches[0].line).toBe('token acme_00000000');
  });
});
