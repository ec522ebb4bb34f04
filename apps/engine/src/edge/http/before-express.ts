import type { IncomingMessage, Server, ServerResponse } from 'node:http';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Puts `handler` in front of the Express app that serves `server`: a request it takes (it answers true) never
 * reaches the app, any other goes on to it unchanged. For traffic the engine only passes through (the ports proxy),
 * whose cost per request would otherwise be mostly the app's routing.
 */
export function handleBeforeExpress(
  server: Server,
  handler: (req: IncomingMessage, res: ServerResponse) => boolean,
): void {
  const app = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (handler(req, res)) return;
    for (const listener of app) listener.call(server, req, res);
  });
}
