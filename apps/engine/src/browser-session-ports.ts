import type { Provider } from '@nestjs/common';
import { BROWSER_SESSION_PORTS, type SessionPortDialer } from '@switchyard/browser';
import { SessionPorts } from '@switchyard/sandbox';

/**
 * The browser tier's view of sessions' ports: the same rules as the HTTP proxy to a session's port
 * (SWITCHYARD_PORTS_ENABLED, SWITCHYARD_PORTS_ALLOWED; existing boxes only, never one opened for it).
 */
export function sessionPortDialer(ports: SessionPorts): SessionPortDialer {
  return {
    refusal: (port) => {
      try {
        ports.check(port);
        return undefined;
      } catch (err) {
        return err instanceof Error ? err.message : String(err);
      }
    },
    connect: async (sessionId, port) => (await ports.connect(sessionId, port)).stream,
  };
}

/**
 * `localhost` in a session's pages is that session's own sandbox: the browser tier opens those ports through
 * `SessionPorts`. Wired here, in the composition root, so that neither library knows the other: the browser tier sees
 * a `SessionPortDialer`, nothing of sandboxes.
 */
export const browserSessionPorts: Provider = {
  provide: BROWSER_SESSION_PORTS,
  useFactory: sessionPortDialer,
  inject: [SessionPorts],
};
