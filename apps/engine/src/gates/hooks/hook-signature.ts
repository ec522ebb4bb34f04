import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The `X-Switchyard-Signature` header of a hook delivery: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
 * with the hook's secret. A receiver recomputes it over the raw body and refuses stale timestamps (replays).
 */
export function signBody(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** Checks a signature header against the body (for receivers and tests); `toleranceSeconds` bounds its age. */
export function verifySignature(
  secret: string,
  body: string,
  header: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=', 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds || typeof parts.v1 !== 'string')
    return false;
  const expected = Buffer.from(signBody(secret, body, t).split('v1=')[1], 'hex');
  const given = Buffer.from(parts.v1, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
