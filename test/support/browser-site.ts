import { createHash } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * A small website for browser tests, served on a loopback address (127.0.0.2 by default, so tests can
 * allowlist exactly it and prove that 127.0.0.1, `127.1`, `localhost`… are still refused).
 *
 * Pages: `/` (text and links), `/form` → `/submit` (echoes the fields), `/cookie/set?v=`, `/cookie/show`,
 * `/download` (an attachment link), `/upload` (a file input that reports what it got), `/redirect?to=`,
 * `/slow?ms=`, `/hang` (never answers), `/ws?to=` (opens websockets), `/sw` (registers a service worker),
 * `/subresource?src=` (an image from elsewhere), `/big?kb=`. Every request path is logged in `hits`.
 */
export class BrowserSite {
  /** Request paths (with query) in arrival order, websocket upgrades as `WS <path>`. */
  readonly hits: string[] = [];
  private readonly waiters: { path: string; resolve: () => void }[] = [];
  private readonly sockets = new Set<Duplex>();

  private constructor(private readonly server: http.Server) {}

  static async start(host = '127.0.0.2'): Promise<BrowserSite> {
    const server = http.createServer();
    const site = new BrowserSite(server);
    server.on('request', (req, res) => site.handle(req, res));
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => site.upgrade(req, socket));
    server.on('connection', (s: Duplex) => {
      site.sockets.add(s);
      s.on('close', () => site.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return site;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get host(): string {
    return (this.server.address() as AddressInfo).address;
  }

  url(p = '/'): string {
    return `http://${this.host}:${this.port}${p}`;
  }

  /** Resolves when a request whose path starts with `prefix` arrives (or has arrived). */
  waitFor(prefix: string): Promise<void> {
    if (this.hits.some((h) => h.startsWith(prefix))) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ path: prefix, resolve }));
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private hit(p: string): void {
    this.hits.push(p);
    for (const w of this.waiters.filter((x) => p.startsWith(x.path))) {
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve();
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://site');
    this.hit(`${url.pathname}${url.search}`);
    const html = (body: string, status = 200, headers: http.OutgoingHttpHeaders = {}) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers });
      res.end(`<!doctype html><html><head><meta charset="utf-8">${body}</html>`);
    };
    const q = (k: string) => url.searchParams.get(k) ?? '';
    switch (url.pathname) {
      case '/':
        return html(
          '<title>Switchyard test home</title></head><body><h1>Welcome home</h1>' +
            '<p id="intro">This page is served on loopback for the browser tests.</p>' +
            '<nav><a href="/form">The form</a> <a href="/cookie/show">Cookies</a> ' +
            '<a href="https://example.invalid/away">Away</a></nav></body>',
        );
      case '/form':
        return html(
          '<title>Form</title></head><body><form action="/submit" method="get">' +
            '<label>Name <input id="name" name="name"></label>' +
            '<select id="color" name="color"><option value="red">Red</option><option value="blue">Blue</option></select>' +
            '<label><input id="agree" type="checkbox" name="agree" value="yes"> Agree</label>' +
            '<textarea id="note" name="note"></textarea>' +
            '<button id="go" type="submit">Send</button></form></body>',
        );
      case '/submit':
        return html(
          `<title>Submitted</title></head><body><div id="result">name=${esc(q('name'))};color=${esc(q('color'))};` +
            `agree=${esc(q('agree'))};note=${esc(q('note'))}</div></body>`,
        );
      case '/cookie/set':
        return html(`<title>Set</title></head><body>set ${esc(q('v'))}</body>`, 200, {
          'set-cookie': `flavor=${encodeURIComponent(q('v'))}; Path=/; SameSite=Lax`,
        });
      case '/cookie/show':
        return html(
          `<title>Cookies</title></head><body><div id="cookies">[${esc(req.headers.cookie ?? '')}]</div></body>`,
        );
      case '/download':
        return html(
          '<title>Download</title></head><body><a id="get" href="/files/report.csv">report</a></body>',
        );
      case '/files/report.csv':
        res.writeHead(200, {
          'content-type': 'text/csv',
          'content-disposition': 'attachment; filename="report.csv"',
        });
        return void res.end('id,value\n1,alpha\n2,beta\n');
      case '/upload':
        return html(
          '<title>Upload</title></head><body><input id="file" type="file"><div id="got">nothing</div><script>' +
            'document.getElementById("file").addEventListener("change", async (e) => {' +
            ' const f = e.target.files[0]; const t = await f.text();' +
            ' document.getElementById("got").textContent = f.name + ":" + f.size + ":" + t; });' +
            '</script></body>',
        );
      case '/redirect':
        res.writeHead(302, { location: q('to') });
        return void res.end();
      case '/slow': {
        const t = setTimeout(
          () => html('<title>Slow</title></head><body>slow done</body>'),
          Number(q('ms')) || 1000,
        );
        res.on('close', () => clearTimeout(t));
        return;
      }
      case '/hang':
        return; // never answers
      case '/ws': {
        const targets = url.searchParams.getAll('to');
        const script = targets
          .map(
            (t, i) =>
              `try { const s${i} = new WebSocket(${JSON.stringify(t)});` +
              ` s${i}.onopen = () => report(${i}, "open"); s${i}.onerror = () => report(${i}, "error"); }` +
              ` catch (e) { report(${i}, "throw"); }`,
          )
          .join('\n');
        return html(
          '<title>WS</title></head><body><div id="ws"></div><script>' +
            'const seen = {}; function report(i, s) { if (seen[i]) return; seen[i] = s;' +
            ' document.getElementById("ws").textContent = Object.keys(seen).sort().map(k => k + "=" + seen[k]).join(" "); }\n' +
            `${script}</script></body>`,
        );
      }
      case '/sw':
        return html(
          '<title>SW</title></head><body><div id="sw">pending</div><script>' +
            'navigator.serviceWorker.register("/sw.js").then(async () => {' +
            ' const regs = await navigator.serviceWorker.getRegistrations();' +
            ' document.getElementById("sw").textContent = "registrations=" + regs.length; },' +
            ' (e) => { document.getElementById("sw").textContent = "refused " + e.name; });' +
            '</script></body>',
        );
      case '/sw.js':
        res.writeHead(200, { 'content-type': 'text/javascript' });
        return void res.end('self.addEventListener("fetch", () => {});');
      case '/subresource':
        return html(`<title>Sub</title></head><body><p>with an image</p><img src="${esc(q('src'))}"></body>`);
      case '/big':
        return html(
          `<title>Big</title></head><body><pre>${'x'.repeat((Number(q('kb')) || 1) * 1024)}</pre></body>`,
        );
      default:
        return html('<title>Not found</title></head><body>not found</body>', 404);
    }
  }

  /** Accepts every websocket handshake (then stays silent). */
  private upgrade(req: http.IncomingMessage, socket: Duplex): void {
    this.hit(`WS ${req.url ?? ''}`);
    const key = req.headers['sec-websocket-key'] ?? '';
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
  }
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
