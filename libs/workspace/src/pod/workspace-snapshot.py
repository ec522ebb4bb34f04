# The workspace tool's `snapshot` op, in Python, for the snapshots the engine takes before and after every code action
# in a Kubernetes session pod. The whole tool (workspace-tool.ts) is a node program, and a node process costs
# 120-260 ms to start in a one-CPU pod against 15-20 ms for python3: two of them would cost a code action more than
# the run itself. Copied to dist/pod/ by scripts/build-pod-tools.mjs; run by the pod's runner as the sandbox user.
#
# Request on stdin: {"root"?, "maxEntries"?, "maxScanEntries"?} (workspace-tool.protocol.ts, SnapshotToolRequest).
# Answer on stdout: the tool's own answer, {"ok": true, "snapshot": {"entries": [[rel, value], ...], "partial": b}}
# or {"ok": false, "error": {...}}. The walk is WorkspaceManager.snapshot's (workspace-fs.ts `walk`): depth first,
# children in UTF-16 code-unit order (JavaScript's `<`, which the engine's changedPaths compares with), directories
# opened without following links and checked against the path they were reached by (one swapped for a link is
# skipped), never a link followed, `scanned` counting every entry against maxScanEntries, at most maxEntries files
# and links recorded. Values are "size:mtime_ns:ino": compared only with values this script wrote.
import json
import os
import stat
import sys

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def js_name(name):
    """The name as node's readdir decodes it (invalid UTF-8 as U+FFFD): node then lstats that name, so an entry whose
    name is not UTF-8 is skipped as vanished, here as on the host."""
    return os.fsencode(name).decode("utf-8", "replace")


def code_units(name):
    return name.encode("utf-16-be", "surrogatepass")


def read_dir_verified(abs_dir):
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


def walk(abs_dir, segs, state, entries, max_entries, max_scan):
    listing = read_dir_verified(abs_dir)
    if listing is None:
        return
    for name, st in listing:
        if state["scanned"] >= max_scan:
            state["partial"] = True
            return
        state["scanned"] += 1
        rel = segs + [name]
        if not stat.S_ISDIR(st.st_mode):
            if len(entries) == max_entries:
                state["partial"] = True
                return
            entries.append(["/".join(rel), "%d:%s:%d" % (st.st_size, st.st_mtime_ns, st.st_ino)])
        else:
            walk(os.path.join(abs_dir, name), rel, state, entries, max_entries, max_scan)
        if state["partial"]:
            return


def positive(request, key, default):
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("%s must be a positive integer" % key)
    return value


def main():
    try:
        request = json.loads(sys.stdin.read() or "{}")
        if not isinstance(request, dict):
            raise ValueError("the request is not a JSON object")
        root = request.get("root", "/workspace")
        max_entries = positive(request, "maxEntries", 10000)
        max_scan = positive(request, "maxScanEntries", 100000)
    except ValueError as err:
        return {
            "ok": False,
            "error": {"name": "WorkspaceToolError", "code": "BAD_REQUEST", "message": str(err), "details": {}},
        }
    try:
        start = os.path.realpath(root)
        if not stat.S_ISDIR(os.lstat(start).st_mode):
            raise FileNotFoundError(root)
    except OSError:
        return {
            "ok": False,
            "error": {
                "name": "NotFoundError",
                "code": "NOT_FOUND",
                "message": "workspace %s does not exist" % root,
                "details": {"root": root},
            },
        }
    entries = []
    state = {"scanned": 0, "partial": False}
    walk(start, [], state, entries, max_entries, max_scan)
    return {"ok": True, "snapshot": {"entries": entries, "partial": state["partial"]}}


sys.stdout.write(json.dumps(main(), ensure_ascii=True) + "\n")
