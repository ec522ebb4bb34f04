import { InvalidInputError } from '@switchyard/common';
import { readHooks } from './hook-file';
import { signBody, verifySignature } from './hook-signature';
import { backoffMs } from './hooked-action';

const SECRET = 'a-secret-of-16-chars+';

describe('hook files', () => {
  it('reads hooks with the phase defaults: a before-hook one short try, an after-hook many', () => {
    expect(
      readHooks({
        hooks: [
          { name: 'audit', phase: 'before', url: 'http://127.0.0.1:9/a', secret: SECRET },
          {
            name: 'sink',
            phase: 'after',
            url: 'https://hooks.example/x?k=1',
            secret: SECRET,
            match: { type: 'code' },
          },
        ],
      }),
    ).toEqual([
      {
        name: 'audit',
        phase: 'before',
        url: 'http://127.0.0.1:9/a',
        secret: SECRET,
        timeoutMs: 2000,
        retries: 0,
        onFailure: 'allow',
      },
      {
        name: 'sink',
        phase: 'after',
        url: 'https://hooks.example/x?k=1',
        secret: SECRET,
        timeoutMs: 5000,
        retries: 8,
        onFailure: 'allow',
        match: { type: 'code' },
      },
    ]);
  });

  it.each([
    [{ hooks: [{ name: 'x', phase: 'during', url: 'http://a/', secret: SECRET }] }, 'hooks[0].phase'],
    [{ hooks: [{ name: 'x', phase: 'after', url: 'ftp://a/', secret: SECRET }] }, 'hooks[0].url'],
    [{ hooks: [{ name: 'x', phase: 'after', url: 'http://a/', secret: 'short' }] }, 'hooks[0].secret'],
    [
      { hooks: [{ name: 'x', phase: 'after', url: 'http://a/', secret: SECRET, retries: 99 }] },
      'hooks[0].retries',
    ],
    [
      { hooks: [{ name: 'x', phase: 'after', url: 'http://a/', secret: SECRET, colour: 1 }] },
      'hooks[0].colour',
    ],
    [
      {
        hooks: [
          { name: 'x', phase: 'after', url: 'http://a/', secret: SECRET },
          { name: 'x', phase: 'before', url: 'http://a/', secret: SECRET },
        ],
      },
      'hooks[1].name',
    ],
    [
      { hooks: [{ name: 'x', phase: 'after', url: 'http://a/', secret: SECRET, match: { nope: 1 } }] },
      'hooks[0].match.nope',
    ],
    [{}, 'hooks'],
  ])('refuses %j naming %s', (doc, field) => {
    let caught: unknown;
    try {
      readHooks(doc);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidInputError);
    expect((caught as InvalidInputError).field).toBe(field);
  });
});

describe('hook signatures', () => {
  it('verifies what it signed, and nothing changed, late or signed with another secret', () => {
    const body = '{"event":"action.completed"}';
    const header = signBody(SECRET, body, 1_800_000_000);
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/);
    expect(verifySignature(SECRET, body, header, 1_800_000_010)).toBe(true);
    expect(verifySignature(SECRET, `${body} `, header, 1_800_000_010)).toBe(false);
    expect(verifySignature('another-secret-0123', body, header, 1_800_000_010)).toBe(false);
    expect(verifySignature(SECRET, body, header, 1_800_001_000)).toBe(false);
    expect(verifySignature(SECRET, body, 'nonsense', 1_800_000_010)).toBe(false);
  });

  it('backs off doubling, capped, with ±20 % jitter', () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(n, 500, 60_000, () => 0.5))).toEqual([500, 1000, 2000, 4000]);
    expect(backoffMs(20, 500, 60_000, () => 0.5)).toBe(60_000);
    expect(backoffMs(1, 500, 60_000, () => 0)).toBe(400);
    expect(backoffMs(1, 500, 60_000, () => 1)).toBe(600);
  });
});
