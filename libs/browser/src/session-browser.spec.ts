import type { EgressAttempt, EgressProxy } from '@switchyard/network';
import { SessionBrowser } from './session-browser';
import { FakeContext } from './testing';

/** A connection to the session's port 3000, as the egress proxy reports it. */
const attempt = (seq: number, bytesIn = 10): EgressAttempt => ({
  seq,
  via: 'HTTP',
  host: 'localhost',
  port: 3000,
  allowed: true,
  local: true,
  reason: "the session's own sandbox port",
  bytesIn,
  bytesOut: 0,
  startedAt: seq,
  endedAt: seq,
});

describe('SessionBrowser: connections to the session’s own ports, listed once each', () => {
  it('lists ended and still open connections once, in order, whichever action ends first after them', () => {
    let open: EgressAttempt[] = [];
    const egress = { openAttempts: () => open } as unknown as EgressProxy;
    const context = new FakeContext(
      {
        proxyServer: 'http://127.0.0.1:1',
        egressDenialHeader: 'x',
        acceptDownloads: false,
        requestGuard: async () => undefined,
      },
      'shared',
    );
    const sb = new SessionBrowser('a', 'shared', context, egress, 0);
    sb.recordLocal(attempt(2));
    sb.recordLocal(attempt(1));
    // A WebSocket still open when the action ends: listed with its bytes so far.
    open = [{ ...attempt(3, 4), via: 'CONNECT' }];
    expect(sb.takeLocalEgress().map((r) => [r.bytesIn])).toEqual([[10], [10], [4]]);
    // It ends later: not listed again. A connection made between actions goes to the next one.
    open = [];
    sb.recordLocal(attempt(3, 99));
    sb.recordLocal(attempt(4));
    expect(sb.takeLocalEgress()).toEqual([
      {
        host: 'localhost',
        port: 3000,
        allowed: true,
        reason: "the session's own sandbox port",
        bytesIn: 10,
        bytesOut: 0,
      },
    ]);
    expect(sb.takeLocalEgress()).toEqual([]);
  });
});
