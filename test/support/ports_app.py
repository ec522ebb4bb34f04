"""A small server for the ports proxy's tests and bench, run inside a session's sandbox (Python stdlib only).

    python3 ports_app.py PORT

GET /                 "hello from the session"
GET /headers          the request's path and headers, as JSON
GET /blob?bytes=N     N bytes (0, 1, ..., 255, 0, ...), streamed with a Content-Length
POST /echo            the request body back as it arrives (the answer's head goes out before the body is read)
GET /events           server-sent events 1, 2, 3: each after the previous one was followed by GET /next, so a
                      client sees event n only if the proxy passed it on before the client asked for n + 1
GET /next             lets /events send its next event
GET /redirect         302 to /target, with a cookie at Path=/
GET /ws               a WebSocket that echoes every text and binary message (RFC 6455, no extensions)
"""

import base64
import hashlib
import json
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

CHUNK = 64 * 1024
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PATTERN = bytes(range(256)) * (CHUNK // 256)
NEXT = threading.Semaphore(0)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        sys.stderr.write("%s %s\n" % (self.command, self.path))

    def send_body(self, status, body, content_type="text/plain; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - the base class's naming
        url = urlparse(self.path)
        if self.headers.get("Upgrade", "").lower() == "websocket" and url.path == "/ws":
            return self.websocket()
        if url.path == "/":
            return self.send_body(200, b"hello from the session\n")
        if url.path == "/headers":
            seen = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
            return self.send_body(200, json.dumps(seen).encode(), "application/json")
        if url.path == "/blob":
            return self.blob(int(parse_qs(url.query).get("bytes", ["0"])[0]))
        if url.path == "/events":
            return self.events()
        if url.path == "/next":
            NEXT.release()
            return self.send_body(204, b"")
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/target")
            self.send_header("Set-Cookie", "visited=1; Path=/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self.send_body(404, b"not found\n")

    def do_POST(self):  # noqa: N802 - the base class's naming
        if urlparse(self.path).path != "/echo":
            return self.send_body(404, b"not found\n")
        length = int(self.headers.get("Content-Length", "0"))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        left = length
        while left > 0:
            chunk = self.rfile.read1(min(CHUNK, left))
            if not chunk:
                break
            self.wfile.write(chunk)
            left -= len(chunk)
        return None

    def blob(self, size):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        left = size
        while left > 0:
            part = PATTERN[: min(CHUNK, left)]
            self.wfile.write(part)
            left -= len(part)

    def events(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for n in (1, 2, 3):
            if n > 1 and not NEXT.acquire(timeout=30):
                return
            self.wfile.write(b"event: tick\ndata: %d\n\n" % n)
            self.wfile.flush()

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            frame = self.read_frame()
            if frame is None:
                return
            opcode, payload = frame
            if opcode == 8:
                self.send_frame(8, payload[:2])
                return
            if opcode == 9:
                self.send_frame(10, payload)
            elif opcode in (1, 2):
                self.send_frame(opcode, payload)

    def read_frame(self):
        head = self.rfile.read(2)
        if len(head) < 2:
            return None
        opcode = head[0] & 0x0F
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack(">H", self.rfile.read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4) if head[1] & 0x80 else b""
        payload = self.rfile.read(length)
        if mask and length:
            key = (mask * (length // 4 + 1))[:length]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(length, "big")
        return opcode, payload

    def send_frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        self.wfile.write(head + payload)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print("listening", flush=True)
    server.serve_forever()
