"""A small web app of the kind an agent writes and then tests with the browser tier (test/e2e/browser-local-app).

Standard library only, so it runs in any sandbox: `python3 -u todo_app.py HTTP_PORT WS_PORT`.

- `GET /` is a page with a form (`POST /add` then a redirect back), a button that fetches `/api/greet`, and a live
  line fed by a WebSocket to the second port (`ws://localhost:WS_PORT/live`); `GET /go?to=URL` redirects there;
- every request, and each WebSocket message, is logged on stdout: the test reads them through the process logs.
"""

import base64
import hashlib
import html
import http.server
import json
import socketserver
import sys
import threading
import urllib.parse

HTTP_PORT = int(sys.argv[1])
WS_PORT = int(sys.argv[2])
ITEMS: list[str] = []
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

PAGE = """<!doctype html>
<html><head><title>Todo</title>
<style>body {{ font: 18px sans-serif; margin: 2em; background: #fffbe6; }} h1 {{ color: #b35900; }}</style>
</head><body>
<h1>Todo</h1>
<form method="post" action="/add"><input id="item" name="item"><button id="save">Save</button></form>
<ul id="items">{items}</ul>
<button id="greet">Greet</button> <span id="greeting">not greeted</span>
<p id="live">connecting</p>
<script>
document.getElementById("greet").onclick = async () => {{
  const answer = await fetch("/api/greet?name=browser");
  document.getElementById("greeting").textContent = (await answer.json()).message;
}};
const ws = new WebSocket("ws://localhost:{ws_port}/live");
ws.onopen = () => ws.send("hello from the page");
ws.onmessage = (event) => {{ document.getElementById("live").textContent = event.data; }};
ws.onerror = () => {{ document.getElementById("live").textContent = "websocket failed"; }};
</script>
</body></html>
"""


def log(line: str) -> None:
    print(line, flush=True)


class App(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        log(f"http {self.command} {self.path} host={self.headers.get('Host')}")

    def send(self, status: int, kind: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/":
            items = "".join(f"<li>{html.escape(i)}</li>" for i in ITEMS)
            page = PAGE.format(items=items, ws_port=WS_PORT).encode()
            self.send(200, "text/html; charset=utf-8", page)
        elif url.path == "/go":
            # A redirect wherever `to` says: the browser's proxy decides where it may go.
            target = urllib.parse.parse_qs(url.query).get("to", ["/"])[0]
            self.send(302, "text/plain", b"moved\n", {"Location": target})
        elif url.path == "/api/greet":
            name = urllib.parse.parse_qs(url.query).get("name", ["nobody"])[0]
            body = json.dumps({"message": f"hello, {name}, from the sandbox"}).encode()
            self.send(200, "application/json", body)
        else:
            self.send(404, "text/plain", b"not found\n")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        item = form.get("item", [""])[0]
        ITEMS.append(item)
        log(f"added {item!r}")
        self.send(303, "text/plain", b"saved\n", {"Location": "/"})


class Live(socketserver.StreamRequestHandler):
    """One WebSocket (RFC 6455, text frames under 126 bytes, as this page sends): answers each message."""

    def handle(self) -> None:
        headers = {}
        request_line = self.rfile.readline().decode().strip()
        while line := self.rfile.readline().decode().strip():
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        key = headers["sec-websocket-key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        log(f"ws {request_line} host={headers.get('host')}")
        self.wfile.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
        )
        while message := self.read_text():
            log(f"ws message {message!r}")
            self.send_text(f"live: the sandbox got {message!r}")

    def read_text(self) -> str | None:
        head = self.rfile.read(2)
        if len(head) < 2 or head[0] & 0x0F == 0x8:  # closed, or a close frame
            return None
        length = head[1] & 0x7F
        mask = self.rfile.read(4)
        data = self.rfile.read(length)
        return bytes(b ^ mask[i % 4] for i, b in enumerate(data)).decode()

    def send_text(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(bytes([0x81, len(data)]) + data)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    live = Server(("127.0.0.1", WS_PORT), Live)
    threading.Thread(target=live.serve_forever, daemon=True).start()
    web = http.server.ThreadingHTTPServer(("127.0.0.1", HTTP_PORT), App)
    log(f"listening on http://127.0.0.1:{HTTP_PORT}/ and ws://127.0.0.1:{WS_PORT}/")
    web.serve_forever()
