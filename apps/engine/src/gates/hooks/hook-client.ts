import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock } from '@switchyard/common';
import type { HookDefinition } from './hook-file';
import { signBody } from './hook-signature';

/** What one delivery attempt got back. */
export interface HookReply {
  status: number;
  /** The body, at most 64 KiB of it. */
  body: string;
}

const MAX_REPLY_BYTES = 64 * 1024;

/** The engine's only HTTP client of hooks: signs each body and bounds each attempt by the hook's timeout. */
@Injectable()
export class HookClient {
  constructor(@Inject(CLOCK) private readonly clock: Clock) {}

  /** POSTs the body; rejects for a network error or the timeout (the message says which). */
  async post(hook: HookDefinition, event: string, deliveryId: string, body: string): Promise<HookReply> {
    const signature = signBody(hook.secret, body, Math.floor(this.clock.now().getTime() / 1000));
    let res: Response;
    try {
      res = await fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'switchyard-hooks',
          'x-switchyard-event': event,
          'x-switchyard-delivery': deliveryId,
          'x-switchyard-signature': signature,
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(hook.timeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (e.name === 'TimeoutError') throw new Error(`no answer within ${hook.timeoutMs} ms`);
      throw new Error(e.cause?.code ?? e.cause?.message ?? e.message);
    }
    const text = await readCapped(res);
    return { status: res.status, body: text };
  }
}

async function readCapped(res: Response): Promise<string> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  // A hook's answer is read up to the cap, then the rest is dropped with the connection.
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (size >= MAX_REPLY_BYTES) break;
  }
  return Buffer.concat(chunks).subarray(0, MAX_REPLY_BYTES).toString('utf8');
}
