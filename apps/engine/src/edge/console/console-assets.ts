import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { errorBody } from '../../platform/validation/error-body';

/** What the console's build writes to dist/console/ (scripts/build-console.mjs), by name, with its type. */
const ASSETS: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'console.js.map': 'application/json; charset=utf-8',
  'console.js.LEGAL.txt': 'text/plain; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'terminal.js': 'text/javascript; charset=utf-8',
  'terminal.js.map': 'application/json; charset=utf-8',
  'terminal.js.LEGAL.txt': 'text/plain; charset=utf-8',
  'xterm.css': 'text/css; charset=utf-8',
};

/**
 * The page may load only its own script and stylesheet and talk only to this engine. Inline styles are allowed:
 * Cytoscape.js adds a small stylesheet for its container. Images may be data: URLs: a code cell's image results
 * are drawn from them. No frame may load anything (frame-src falls back to 'none'): a cell's HTML result is drawn
 * in a sandboxed srcdoc frame, which fetches nothing and carries a stricter policy of its own
 * (apps/console/src/html-frame.ts). `connect-src 'self'` also covers WebSockets to this same host and port (ws: from
 * an http: page, wss: from https:): the terminal pane attaches there, and nowhere else.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The checkout (or install) this engine runs from: the first folder above it with a package.json. */
function projectRoot(from: string): string {
  let dir = from;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return from;
    dir = up;
  }
  return dir;
}

/** The built console, read once; undefined when it was not built. */
function loadAssets(dir: string): Map<string, Buffer> | undefined {
  if (!existsSync(path.join(dir, 'index.html'))) return undefined;
  const files = new Map<string, Buffer>();
  for (const name of Object.keys(ASSETS)) {
    const file = path.join(dir, name);
    if (existsSync(file)) files.set(name, readFileSync(file));
  }
  return files;
}

/**
 * Serves the web console at `/console` (GET and HEAD), without an API key: the page holds no data, and asks for
 * a key when the API wants one. Not part of the API document.
 */
export function installConsole(
  app: INestApplication,
  dir = path.join(projectRoot(__dirname), 'dist', 'console'),
): void {
  const files = loadAssets(dir);
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (req.path !== '/console' && !req.path.startsWith('/console/')) return next();
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      res
        .status(405)
        .json(
          errorBody('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${req.path}; it takes GET, HEAD`),
        );
      return;
    }
    if (!files) {
      res
        .status(503)
        .json(
          errorBody(
            'CONSOLE_NOT_BUILT',
            `the console was not built (${dir} is missing): run \`npm run build\``,
          ),
        );
      return;
    }
    const name =
      req.path === '/console' || req.path === '/console/' ? 'index.html' : req.path.slice('/console/'.length);
    const body = Object.hasOwn(ASSETS, name) ? files.get(name) : undefined;
    if (!body) {
      res.status(404).json(errorBody('NOT_FOUND', `the console has no ${req.path}`));
      return;
    }
    res.setHeader('Content-Type', ASSETS[name]);
    res.setHeader('Content-Security-Policy', CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Cache-Control', 'no-cache');
    res.status(200).end(req.method === 'HEAD' ? undefined : body);
  });
}
