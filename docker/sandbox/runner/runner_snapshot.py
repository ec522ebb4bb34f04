"""Workspace snapshots: the walk the engine diffs before and after a code action to list the files it changed.

One walk, two ways in. The runner answers `{"op": "snapshot"}` itself, in its own process (a Kubernetes session pod's
two snapshots per code action then cost no process start, no fresh run and no cleanup after one); and
`python3 runner_snapshot.py` runs the same walk as a command, the request on stdin and one JSON answer on stdout
(the parity tests against the engine's host walk run it so).

The walk is WorkspaceManager.snapshot's (libs/workspace/src/workspace-fs.ts `walk`): depth first, children in UTF-16
code-unit order (JavaScript's `<`, which the engine's changedPaths compares with), directories opened without
following links and checked against the path they were reached by (one swapped for a link is skipped), never a link
followed, `scanned` counting every entry against maxScanEntries, at most maxEntries files and links recorded. Values
are "size:mtime_ns:ino": compared only with values this walk wrote. The answer is the workspace tool's own
(workspace-tool.protocol.ts): `{"ok": true, "snapshot": {"entries": [[rel, value], ...], "partial": b}}` or
`{"ok": false, "error": {...}}`.

In the runner a walk never holds the loop for long: it goes on in slices of SLICE_SECONDS between the loop's turns,
so kernels' output, terminals and tunnels keep flowing while a large workspace is walked.
"""

import json
import os
import stat
import sys
import time

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
DEFAULT_MAX_ENTRIES = 10000
DEFAULT_MAX_SCAN = 100000
# How long one slice of a walk may hold the runner's loop.
SLICE_SECONDS = 0.01
# The largest answer sent (what the engine took from the snapshot command's stdout before): past it, a refusal.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


def js_name(name):
    """The name as node's readdir decodes it (invalid UTF-8 as U+FFFD): node then lstats that name, so an entry whose
    name is not UTF-8 is skipped as vanished, here as on the host."""
    return os.fsencode(name).decode("utf-8", "replace")


def code_units(name):
    return name.encode("utf-16-be", "surrogatepass")


def read_dir_verified(abs_dir):
    """[(name, lstat)] of a directory in UTF-16 order, or None when it cannot be opened or is no longer the path it
    was reached by (swapped for a link meanwhile)."""
    try:
        fd = os.open(abs_dir, DIR_FLAGS)
    except OSError:
        return None
    try:
        if os.readlink("/proc/self/fd/%d" % fd) != abs_dir:
            return None
        names = sorted((js_name(n) for n in os.listdir(fd)), key=code_units)
        out = []
        for name in names:
            try:
                out.append((name, os.lstat(name, dir_fd=fd)))
            except FileNotFoundError:
                pass  # vanished meanwhile
        return out
    finally:
        os.close(fd)


class BadRequest(ValueError):
    pass


def positive(request, key, default):
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest("%s must be a positive integer" % key)
    return value


def bounds(request):
    """(maxEntries, maxScanEntries) of a request; BadRequest when one is not a positive integer."""
    if not isinstance(request, dict):
        raise BadRequest("the request is not a JSON object")
    return positive(request, "maxEntries", DEFAULT_MAX_ENTRIES), positive(request, "maxScanEntries", DEFAULT_MAX_SCAN)


def bad_request(message):
    error = {"name": "WorkspaceToolError", "code": "BAD_REQUEST", "message": message, "details": {}}
    return {"ok": False, "error": error}


def not_found(root):
    return {
        "ok": False,
        "error": {
            "name": "NotFoundError",
            "code": "NOT_FOUND",
            "message": "workspace %s does not exist" % root,
            "details": {"root": root},
        },
    }


class Walk:
    """One snapshot's walk, resumable: `step(deadline)` goes on until done (True) or past the deadline (False).

    The recursion of WorkspaceManager.snapshot kept as an explicit stack of (directory, path segments, listing, next
    index), so it can stop between any two entries and go on later exactly where it was."""

    def __init__(self, start, max_entries, max_scan):
        self.max_entries = max_entries
        self.max_scan = max_scan
        self.entries = []
        self.scanned = 0
        self.partial = False
        listing = read_dir_verified(start)
        self.stack = [] if listing is None else [[start, [], listing, 0]]

    def step(self, deadline=None):
        count = 0
        while self.stack and not self.partial:
            count += 1
            if deadline is not None and count % 64 == 0 and time.monotonic() >= deadline:
                return False
            frame = self.stack[-1]
            abs_dir, segs, listing, index = frame
            if index >= len(listing):
                self.stack.pop()
                continue
            frame[3] = index + 1
            name, st = listing[index]
            if self.scanned >= self.max_scan:
                self.partial = True
                break
            self.scanned += 1
            rel = segs + [name]
            if not stat.S_ISDIR(st.st_mode):
                if len(self.entries) == self.max_entries:
                    self.partial = True
                    break
                self.entries.append(["/".join(rel), "%d:%s:%d" % (st.st_size, st.st_mtime_ns, st.st_ino)])
            else:
                child = os.path.join(abs_dir, name)
                child_listing = read_dir_verified(child)
                if child_listing is not None:
                    self.stack.append([child, rel, child_listing, 0])
        self.stack = []
        return True

    def answer(self):
        return {"ok": True, "snapshot": {"entries": self.entries, "partial": self.partial}}


def too_large(entries):
    """Whether the entries' JSON is over MAX_ANSWER_BYTES; encoded only when their characters could make it so (an
    escaped character takes at most 12 bytes)."""
    chars = sum(len(path) + len(value) + 8 for path, value in entries)
    if chars * 12 <= MAX_ANSWER_BYTES:
        return False
    return len(json.dumps(entries, separators=(",", ":"))) > MAX_ANSWER_BYTES


def snapshot(request):
    """The whole walk at once (the command): the tool's answer to a request {"root"?, "maxEntries"?, ...}."""
    try:
        max_entries, max_scan = bounds(request)
    except BadRequest as err:
        return bad_request(str(err))
    root = request.get("root", "/workspace")
    try:
        start = os.path.realpath(root)
        if not stat.S_ISDIR(os.lstat(start).st_mode):
            raise FileNotFoundError(root)
    except (OSError, TypeError, ValueError):
        return not_found(root)
    walk = Walk(start, max_entries, max_scan)
    walk.step()
    return walk.answer()


class Snapshots:
    """The runner's `snapshot` op: `{"op": "snapshot", "id", "maxEntries"?, "maxScanEntries"?, "workspace"}` ->
    `{"ev": "snapshot", "id", "ok": true, "snapshot": {...}}` (or the tool's `ok: false` answer), walked in slices."""

    def __init__(self, runner, workspace_check):
        self.runner = runner
        self.workspace_check = workspace_check  # request -> fd of the checked /workspace, or raises the refusal
        self.walks = []  # [(id, Walk)] still going

    def request(self, request):
        request_id = request.get("id")
        try:
            max_entries, max_scan = bounds(request)
        except BadRequest as err:
            self.finish(request_id, bad_request(str(err)))
            return
        fd = self.workspace_check(request)  # the session's /workspace, as for a run (`workspace` refusal otherwise)
        try:
            start = os.readlink("/proc/self/fd/%d" % fd)
        finally:
            os.close(fd)
        walk = Walk(start, max_entries, max_scan)
        if walk.step(time.monotonic() + SLICE_SECONDS):
            self.finish(request_id, walk.answer())
        else:
            self.walks.append((request_id, walk))

    def finish(self, request_id, answer):
        if answer["ok"] and too_large(answer["snapshot"]["entries"]):
            self.runner.send(
                {
                    "ev": "error",
                    "id": request_id,
                    "code": "snapshot_size",
                    "message": "the snapshot's answer is over %d bytes" % MAX_ANSWER_BYTES,
                }
            )
            return
        self.runner.send({"ev": "snapshot", "id": request_id, **answer})

    def timeout(self):
        return 0.0 if self.walks else None

    def tick(self):
        going = []
        for request_id, walk in self.walks:
            if walk.step(time.monotonic() + SLICE_SECONDS):
                self.finish(request_id, walk.answer())
            else:
                going.append((request_id, walk))
        self.walks = going

    def shutdown(self):
        self.walks = []


def main():
    try:
        request = json.loads(sys.stdin.read() or "{}")
    except ValueError as err:
        answer = bad_request(str(err))
    else:
        answer = snapshot(request)
    sys.stdout.write(json.dumps(answer, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
