"""A stand-in for the session's egress proxy: a Unix socket that answers every connection, in a thread."""

import socket
import threading


class ProxyStub:
    """Accepts on `path`; for each connection reads the request head, records it and answers `answer`. With
    `hold`, it keeps the connections open (never answers) until closed."""

    def __init__(self, path, answer=b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", hold=False):
        self.answer = answer
        self.hold = hold
        self.heads = []
        self.held = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(16)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            if self.hold:
                self.held.append(conn)
                continue
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                self.heads.append(head)
                conn.sendall(self.answer)

    def close(self):
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(5)
        for conn in self.held:
            conn.close()
