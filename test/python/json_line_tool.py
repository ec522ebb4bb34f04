"""A workspace tool (libs/workspace/src/**/*.py) run as the engine runs it: `python3 -I -S -c <its source>`, one JSON
request per line on stdin, one reply per line on stdout after a `{"ready": true}` line."""

import json
import subprocess


class JsonLineTool:
    def __init__(self, path, python="/usr/bin/python3"):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        self.proc = subprocess.Popen(
            [python, "-I", "-S", "-c", source],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        self.first = json.loads(self.proc.stdout.readline())
        self.next_id = 0
        self.early = {}

    def call(self, op, **fields):
        self.next_id += 1
        self.proc.stdin.write((json.dumps({"op": op, "id": self.next_id, **fields}) + "\n").encode())
        self.proc.stdin.flush()
        return self.wait(self.next_id)

    def wait(self, request_id):
        while request_id not in self.early:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the tool exited")
            reply = json.loads(line)
            self.early[reply["id"]] = reply
        return self.early.pop(request_id)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()
