"""The skill SDK for python bodies: `main(input, ctx)` gets the skill's input and a `ctx` whose `call(name, input)`
runs another tool or skill of the session as an action of its own (linked to this one by CALLED_BY), through the
Unix socket the engine gave this action (SWITCHYARD_CALL_SOCKET) -- never the network. What `main` returns is the
skill's output, checked against its output schema by the engine. Standard library only."""

import json
import os
import socket
import sys
import threading

__all__ = ["CallError", "Context", "run"]


class CallError(Exception):
    """A call that did not run to an end: unknown tool, bad input, refused by a policy, timed out, the depth limit.
    `code` says which; `result` is the call's result when it ran (a `failed` call is a result, not a CallError)."""

    def __init__(self, message, code=None, result=None):
        super().__init__(message)
        self.code = code
        self.result = result


class Context:
    """The body's way back to the engine: one connection, requests answered in any order."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # `@name`: an abstract socket (a Kubernetes pod's, made by its runner), `\0name` as an address.
        self._sock.connect("\0" + path[1:] if path.startswith("@") else path)
        self._reader = self._sock.makefile("r", encoding="utf-8", newline="\n")
        self._lock = threading.Lock()
        self._next = 0
        self._answers = {}

    def _request(self, body):
        with self._lock:
            self._next += 1
            rid = self._next
            self._sock.sendall((json.dumps(dict(body, id=rid)) + "\n").encode("utf-8"))
            while rid not in self._answers:
                line = self._reader.readline()
                if not line:
                    raise CallError("the engine closed the skill's channel", "CHANNEL_CLOSED")
                answer = json.loads(line)
                self._answers[answer.get("id")] = answer
            return self._answers.pop(rid)

    def call(self, name, input=None):
        """Runs tool or skill `name` with `input` (a dict) and returns its result: a dict with `actionId`, `status`
        (`succeeded` or `failed`), `exitCode`, `stdout`, `stderr`, `output` (a skill's: {"skill", "value"}) and
        `error`. Raises CallError when it could not run to an end."""
        answer = self._request({"op": "call", "name": name, "input": {} if input is None else input})
        if not answer.get("ok"):
            err = answer.get("error") or {}
            raise CallError(err.get("message", "the call failed"), err.get("code"))
        result = answer["result"]
        if result.get("status") not in ("succeeded", "failed"):
            err = result.get("error") or {}
            raise CallError("%s %s: %s" % (name, result.get("status"), err.get("message", "")), err.get("code"), result)
        return result

    def skill(self, name, input=None):
        """Calls skill `name` and returns the value its `main` returned; raises CallError unless it succeeded."""
        result = self.call(name, input)
        if result.get("status") != "succeeded":
            err = result.get("error") or {}
            raise CallError(
                "skill %s failed: %s" % (name, err.get("message", result.get("stderr", ""))), err.get("code"), result
            )
        return (result.get("output") or {}).get("value")

    def _input(self):
        return self._request({"op": "input"})["input"]

    def _return(self, output):
        answer = self._request({"op": "return", "output": output})
        if not answer.get("ok"):
            raise CallError((answer.get("error") or {}).get("message", "the output was refused"), "OUTPUT_REFUSED")


def run(main):
    """The entry the engine appends to a skill's body."""
    path = os.environ.get("SWITCHYARD_CALL_SOCKET")
    if not path:
        sys.stderr.write("switchyard: this code runs as a skill only (no SWITCHYARD_CALL_SOCKET)\n")
        sys.exit(2)
    if not callable(main):
        sys.stderr.write("switchyard: a skill's main.py defines main(input, ctx)\n")
        sys.exit(2)
    ctx = Context(path)
    output = main(ctx._input(), ctx)
    try:
        json.dumps(output)
    except (TypeError, ValueError) as err:
        sys.stderr.write("switchyard: main returned something JSON cannot hold: %s\n" % err)
        sys.exit(2)
    ctx._return(output)
