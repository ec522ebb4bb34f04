# The file transfer API's work inside a Kubernetes session pod (PUT/GET /v1/sessions/:id/files/content and
# /files/archive): the engine execs `python3 -I -S -c <this file> <op> <root> ...` in the session pod's runner
# container, as the sandbox user, with the bytes streamed over the exec's stdin or stdout. Copied to dist/pod/ by
# scripts/build-pod-tools.mjs. Python because it is in the sandbox image (bookworm's 3.11) and starts in ~20 ms.
#
# Paths: the engine has already refused lexical traversal (the path guard); here every component is opened relative
# to its parent's descriptor with O_NOFOLLOW, so nothing is ever reached through a link the walk did not check. A link
# on the way is followed only when its target, taken lexically, stays inside the root (else PATH_SYMLINK_ESCAPE), as
# the host's guard does.
#
# Ops (argv after the root):
#   read REL START END   one line of JSON ({"ok": true, "size", "mtimeMs", "start", "end"} or {"ok": false,
#                        "error": {"code", "message", ...}}), then the bytes START..END (inclusive; -1 -1: the whole
#                        file; END -1: to its end)
#   write REL OVERWRITE MAX_WORKSPACE_BYTES
#                        stdin: frames (below); answer {"ok": true, "size", "sha256"} written atomically (a temporary
#                        file beside it, renamed over it once whole)
#   tar-out REL          one line of JSON, then `tar -c` of the directory (entries relative to it; see tar_create)
#   tar-in REL MAX_WORKSPACE_BYTES MAX_ENTRIES
#                        stdin: frames carrying a tar (gzip, bzip2, xz accepted); extracted into a staging directory
#                        beside its entries with explicit checks of every member, then moved into place; answer
#                        {"ok": true, "files", "directories", "bytes"}
#
# Frames: a 4-byte big-endian length then that many bytes; a zero length ends the upload. Stdin ending without it is
# an upload that failed on the engine's side (the client went away): nothing is kept.
import errno
import hashlib
import json
import os
import secrets
import signal
import stat
import struct
import sys
import tarfile
import zlib

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
MAX_LINK_HOPS = 8
MAX_SCAN_ENTRIES = 1_000_000
CHUNK = 1 << 20
TMP_PREFIX = ".switchyard-upload-"


# The entries of the directory (not `.` itself: its owner and mode are not the archive's to carry), as the host's
# download does: files, directories and links; no fifos, sockets, devices or hard-linked files; no upload in flight;
# from the root, not the session's home (.home).
def tar_create(at_root):
    skip = "-path ./.home -o " if at_root else ""
    return (
        "find . -mindepth 1 \\( %s-name '%s*' \\) -prune -o "
        "\\( -type d -o -type l -o \\( -type f -links 1 \\) \\) -printf '%%P\\0' | "
        "tar -c -f - --numeric-owner --no-recursion --null -T -"
    ) % (skip, TMP_PREFIX)


class Refusal(Exception):
    def __init__(self, code, message, **details):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Aborted(Exception):
    """The engine ended stdin without the final frame, or a signal came: nothing may be kept."""


def on_signal(signum, _frame):
    raise Aborted("signal %d" % signum)


def answer(doc):
    sys.stdout.buffer.write(json.dumps(doc, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


# ---------------------------------------------------------------------------------------------------------- paths


def split_rel(rel):
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise Refusal("PATH_ESCAPE", "the path climbs out of the workspace", path=rel)
    return parts


def lexical(base, target):
    """`target` of a link found at components `base` (its directory), as components from the root; None: outside."""
    out = [] if target.startswith("/") else list(base)
    for p in target.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not out:
                return None
            out.pop()
        else:
            out.append(p)
    return out


class Root:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.fd = os.open(self.path, DIR_FLAGS)

    def inside(self, base, target):
        """`target` of a link found in the directory `base` (components from the root), as components from the root;
        None when it leads outside."""
        if target.startswith("/"):
            if target != self.path and not target.startswith(self.path + "/"):
                return None
            target = target[len(self.path) :] or "/"
        return lexical(base, target)

    def link_target(self, dir_fd, name, done, rest, rel):
        """The components a link leads to (its target from the root, then what followed it), or a refusal."""
        parts = self.inside(done, os.readlink(name, dir_fd=dir_fd))
        if parts is None:
            raise Refusal("PATH_SYMLINK_ESCAPE", "%s goes through a link leading outside the workspace" % rel, path=rel)
        return parts + rest

    def walk(self, parts, rel, make=False, made=None):
        """Opens the directory `parts` names (made when `make`, each one made added to `made`); returns (fd, components
        it was reached by)."""
        hops = 0
        while True:
            fd = os.dup(self.fd)
            done = []
            restart = None
            for i, name in enumerate(parts):
                try:
                    nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        os.close(fd)
                        raise Refusal("FILE_NOT_FOUND", "%s does not exist" % rel, path=rel) from None
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                        if made is not None:
                            made.append(done + [name])
                    except FileExistsError:
                        pass
                    nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError as err:
                    if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                        os.close(fd)
                        raise  # EACCES and the like: main answers them
                    st = os.lstat(name, dir_fd=fd)
                    if not stat.S_ISLNK(st.st_mode):
                        os.close(fd)
                        raise Refusal(
                            "ENOTDIR", "%s: %s is not a directory" % (rel, "/".join(parts[: i + 1])), path=rel
                        ) from err
                    try:
                        restart = self.link_target(fd, name, done, parts[i + 1 :], rel)
                    finally:
                        os.close(fd)
                    break
                os.close(fd)
                fd = nfd
                done.append(name)
            if restart is None:
                return fd, done
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise Refusal("PATH_SYMLINK_CHAIN", "%s goes through too many links" % rel, path=rel)
            parts = restart

    def entry(self, rel, make_parents=False):
        """(parent fd, name, lstat or None, components from the root) of the entry `rel` names, links on the way and at
        its end resolved."""
        parts = split_rel(rel)
        if not parts:
            raise Refusal("PATH_IS_ROOT", "the path names the workspace root itself", path=rel)
        for _ in range(MAX_LINK_HOPS + 1):
            pfd, done = self.walk(parts[:-1], rel, make_parents)
            name = parts[-1]
            try:
                st = os.lstat(name, dir_fd=pfd)
            except FileNotFoundError:
                return pfd, name, None, done + [name]
            if not stat.S_ISLNK(st.st_mode):
                return pfd, name, st, done + [name]
            try:
                parts = self.link_target(pfd, name, done, [], rel)
            finally:
                os.close(pfd)
            if not parts:
                raise Refusal("NOT_A_FILE", "%s is a directory" % rel, path=rel)
        raise Refusal("PATH_SYMLINK_CHAIN", "%s goes through too many links" % rel, path=rel)

    def usage(self):
        """Bytes of every file under the root (their apparent sizes, as the host's file API counts them)."""
        total = 0
        scanned = 0
        stack = [os.dup(self.fd)]
        while stack:
            fd = stack.pop()
            try:
                with os.scandir(fd) as it:
                    for e in it:
                        scanned += 1
                        if scanned > MAX_SCAN_ENTRIES:
                            return total
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISREG(st.st_mode):
                            total += st.st_size
                        elif stat.S_ISDIR(st.st_mode):
                            try:
                                stack.append(os.open(e.name, DIR_FLAGS, dir_fd=fd))
                            except OSError:
                                pass
            finally:
                os.close(fd)
        return total


# ---------------------------------------------------------------------------------------------------------- stdin


class Frames:
    """The framed upload as a file object (tarfile reads it in stream mode)."""

    def __init__(self, stream):
        self.stream = stream
        self.left = 0
        self.ended = False

    def _exact(self, n):
        buf = self.stream.read(n)
        if buf is None or len(buf) < n:
            raise Aborted("the upload ended before its last frame")
        return buf

    def read(self, n=-1):
        if self.ended:
            return b""
        while self.left == 0:
            (self.left,) = struct.unpack(">I", self._exact(4))
            if self.left == 0:
                self.ended = True
                return b""
        want = self.left if n is None or n < 0 else min(n, self.left)
        buf = self.stream.read(min(want, CHUNK))
        if not buf:
            raise Aborted("the upload ended before its last frame")
        self.left -= len(buf)
        return buf

    def drain(self):
        """After tarfile stopped reading: the rest must be padding, then the final frame."""
        while self.read(CHUNK):
            pass


# ------------------------------------------------------------------------------------------------------------ ops


def op_read(root, rel, start, end):
    pfd, name, st, _ = root.entry(rel)
    try:
        if st is None:
            raise Refusal("FILE_NOT_FOUND", "%s does not exist" % rel, path=rel)
        if not stat.S_ISREG(st.st_mode):
            raise Refusal("NOT_A_FILE", "%s is not a regular file" % rel, path=rel)
        fd = os.open(name, FILE_FLAGS, dir_fd=pfd)
    finally:
        os.close(pfd)
    os.set_blocking(fd, True)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise Refusal("NOT_A_FILE", "%s is not a regular file" % rel, path=rel)
    size = st.st_size
    if start < 0:
        start, end = 0, size - 1
    elif start >= size or (end >= 0 and end < start):
        raise Refusal("RANGE_NOT_SATISFIABLE", "the range is outside the file's %d bytes" % size, size=size)
    elif end < 0 or end >= size:
        end = size - 1
    answer({"ok": True, "size": size, "mtimeMs": st.st_mtime_ns / 1e6, "start": start, "end": end})
    out = sys.stdout.fileno()
    offset = start
    left = end - start + 1
    while left > 0:
        try:
            n = os.sendfile(out, fd, offset, min(left, CHUNK))
        except OSError:
            n = os.write(out, os.pread(fd, min(left, CHUNK), offset))
        if n == 0:
            break  # the file shrank meanwhile: the engine sees fewer bytes than announced and fails the download
        offset += n
        left -= n


def op_write(root, rel, overwrite, max_bytes):
    pfd, name, st, real = root.entry(rel, make_parents=True)
    tmp = None
    try:
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise Refusal("NOT_A_FILE", "%s is a directory" % rel, path=rel)
        if st is not None and not overwrite:
            raise Refusal("FILE_EXISTS", "%s exists (overwrite=false)" % rel, path=rel)
        old = st.st_size if st is not None and stat.S_ISREG(st.st_mode) else 0
        room = max_bytes - root.usage() + old
        tmp = "%s%s.%s" % (TMP_PREFIX, secrets.token_hex(6), name[:180])
        mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=pfd)
        digest = hashlib.sha256()
        size = 0
        frames = Frames(sys.stdin.buffer)
        try:
            while True:
                buf = frames.read(CHUNK)
                if not buf:
                    break
                size += len(buf)
                if size > room:
                    raise Refusal(
                        "WORKSPACE_FULL",
                        "%s: the upload would take the workspace past its %d-byte cap; delete files first"
                        % (rel, max_bytes),
                        path=rel,
                        cap=max_bytes,
                    )
                digest.update(buf)
                view = memoryview(buf)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        if overwrite:
            os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        else:
            # A link fails when the name exists: no clobbering a file made meanwhile.
            try:
                os.link(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)
            except FileExistsError:
                raise Refusal("FILE_EXISTS", "%s exists (overwrite=false)" % rel, path=rel) from None
            os.unlink(tmp, dir_fd=pfd)
        tmp = None
        answer({"ok": True, "size": size, "sha256": digest.hexdigest(), "realPath": "/".join(real)})
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=pfd)
            except OSError:
                pass
        os.close(pfd)


def op_tar_out(root, rel):
    fd, _ = root.walk(split_rel(rel), rel)
    os.fchdir(fd)
    os.close(fd)
    answer({"ok": True})
    os.execv("/bin/sh", ["sh", "-c", tar_create(not split_rel(rel))])


class Extraction:
    """One archive going into a staging directory inside the destination: every member checked before it is made."""

    def __init__(self, root, rel, dest_parts, dest_fd, max_bytes, max_entries):
        self.rel = rel
        self.max_entries = max_entries
        self.entries = 0
        self.root = root
        self.dest_parts = dest_parts
        self.dest = dest_fd
        self.room = max_bytes - root.usage()
        self.max_bytes = max_bytes
        self.stage_name = TMP_PREFIX + secrets.token_hex(6)
        os.mkdir(self.stage_name, 0o700, dir_fd=dest_fd)
        self.stage = os.open(self.stage_name, DIR_FLAGS, dir_fd=dest_fd)
        self.files = 0
        self.dirs = 0
        self.bytes = 0

    def refuse(self, member, code, why):
        raise Refusal(code, "archive entry %s %s" % (json.dumps(member.name[:200]), why), entry=member.name[:200])

    def parts(self, member, name):
        if name.startswith("/"):
            self.refuse(member, "PATH_ABSOLUTE", "is an absolute path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            self.refuse(member, "PATH_ESCAPE", "climbs out with ..")
        if any("\0" in p for p in parts):
            self.refuse(member, "PATH_NUL", "has a NUL byte")
        return parts

    def parent(self, member, parts):
        """The staged directory holding `parts`, made as needed; never through a link."""
        fd = os.dup(self.stage)
        for name in parts[:-1]:
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                self.refuse(member, "ARCHIVE_INVALID", "goes through a link or a file of the archive")
            os.close(fd)
            fd = nfd
        return fd

    def clear(self, fd, name):
        """An earlier member of the same name gives way (tar's own rule), but never a directory."""
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise Refusal("EISDIR", "archive entry %s replaces a directory of the archive" % json.dumps(name[:200]))
        os.unlink(name, dir_fd=fd)

    def add(self, tar, member):
        self.entries += 1
        if self.entries > self.max_entries:
            raise Refusal("ARCHIVE_INVALID", "the archive holds more than %d entries" % self.max_entries, field="body")
        parts = self.parts(member, member.name)
        if not parts:
            return  # "." itself
        if member.isdir():
            fd = self.parent(member, parts + ["x"])
            os.close(fd)
            self.dirs += 1
            return
        if member.issym():
            # Where the link will be, from the root: its target must stay inside the workspace.
            if self.root.inside(self.dest_parts + parts[:-1], member.linkname) is None:
                self.refuse(member, "PATH_SYMLINK_ESCAPE", "is a link leading outside the workspace")
        elif member.islnk():
            target = self.parts(member, member.linkname)
            if not target:
                self.refuse(member, "ARCHIVE_INVALID", "is a hard link to the directory itself")
        elif not member.isreg():
            self.refuse(member, "ARCHIVE_INVALID", "is a device, fifo or other special file")
        fd = self.parent(member, parts)
        name = parts[-1]
        try:
            self.clear(fd, name)
            if member.issym():
                os.symlink(member.linkname, name, dir_fd=fd)
            elif member.islnk():
                # A copy, as on the host: the file API refuses hard-linked files.
                tfd = self.parent(member, target)
                try:
                    src = os.open(target[-1], FILE_FLAGS, dir_fd=tfd)
                except OSError:
                    self.refuse(member, "ARCHIVE_INVALID", "is a hard link to a file not in the archive")
                finally:
                    os.close(tfd)
                with os.fdopen(src, "rb") as f:
                    os.set_blocking(src, True)
                    st = os.fstat(src)
                    if not stat.S_ISREG(st.st_mode):
                        self.refuse(member, "ARCHIVE_INVALID", "is a hard link to something not a file")
                    self.write(f, st.st_size, st.st_mode, member.mtime, fd, name)
            else:
                self.write(tar.extractfile(member), member.size, member.mode, member.mtime, fd, name)
            self.files += 1
        finally:
            os.close(fd)

    def write(self, src, size, mode, mtime, dir_fd, name):
        if size > self.room - self.bytes:
            raise Refusal(
                "WORKSPACE_FULL",
                "the archive would take the workspace past its %d-byte cap; delete files first" % self.max_bytes,
                path=self.rel,
                cap=self.max_bytes,
            )
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            while True:
                buf = src.read(CHUNK)
                if not buf:
                    break
                view = memoryview(buf)
                while view:
                    view = view[os.write(fd, view) :]
            self.bytes += size
            # No setuid, setgid or sticky bits, and the owner can always read and write what it uploaded.
            os.fchmod(fd, (mode & 0o777) | 0o600)
            os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)

    def merge(self, src_fd, dst_fd):
        """Moves the staged entries into place: directories merge, anything else replaces what was there."""
        for name in os.listdir(src_fd):
            st = os.lstat(name, dir_fd=src_fd)
            try:
                dst = os.lstat(name, dir_fd=dst_fd)
            except FileNotFoundError:
                dst = None
            if stat.S_ISDIR(st.st_mode) and dst is not None and stat.S_ISDIR(dst.st_mode):
                sfd = os.open(name, DIR_FLAGS, dir_fd=src_fd)
                dfd = os.open(name, DIR_FLAGS, dir_fd=dst_fd)
                try:
                    self.merge(sfd, dfd)
                finally:
                    os.close(sfd)
                    os.close(dfd)
                continue
            if dst is not None and stat.S_ISDIR(dst.st_mode):
                raise Refusal("EISDIR", "%s is a directory in the workspace; the archive has a file there" % name[:200])
            if dst is not None and stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dst_fd)
            os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)

    def remove_stage(self):
        def rm(fd):
            for name in os.listdir(fd):
                st = os.lstat(name, dir_fd=fd)
                if stat.S_ISDIR(st.st_mode):
                    sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                    try:
                        os.chmod(sub, 0o700)
                        rm(sub)
                    finally:
                        os.close(sub)
                    os.rmdir(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)

        try:
            rm(self.stage)
        finally:
            os.close(self.stage)
            os.rmdir(self.stage_name, dir_fd=self.dest)


def op_tar_in(root, rel, max_bytes, max_entries):
    parts = split_rel(rel)
    made = []
    dest, dest_parts = root.walk(parts, rel or ".", make=True, made=made)
    ex = None
    ok = False
    try:
        ex = Extraction(root, rel, dest_parts, dest, max_bytes, max_entries)
        frames = Frames(sys.stdin.buffer)
        try:
            with tarfile.open(fileobj=frames, mode="r|*") as tar:
                for member in tar:
                    ex.add(tar, member)
        except (tarfile.TarError, EOFError, zlib.error) as err:
            raise Refusal(
                "ARCHIVE_INVALID", "the body is not a tar archive (gzip, bzip2 or xz accepted): %s" % err, field="body"
            ) from None
        frames.drain()
        ex.merge(ex.stage, dest)
        ok = True
        answer({"ok": True, "files": ex.files, "directories": ex.dirs, "bytes": ex.bytes})
    finally:
        if ex is not None:
            ex.remove_stage()
        os.close(dest)
        if not ok:
            # A refused archive leaves nothing, not even the directories made for it.
            for d in reversed(made):
                try:
                    fd, _ = root.walk(d[:-1], rel)
                    try:
                        os.rmdir(d[-1], dir_fd=fd)
                    finally:
                        os.close(fd)
                except (OSError, Refusal):
                    break


def main(argv):
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    op, root_path, rel = argv[1], argv[2], argv[3]
    os.umask(0o022)
    try:
        root = Root(root_path)
        if op == "read":
            op_read(root, rel, int(argv[4]), int(argv[5]))
        elif op == "write":
            op_write(root, rel, argv[4] == "1", int(argv[5]))
        elif op == "tar-out":
            op_tar_out(root, rel)
        elif op == "tar-in":
            op_tar_in(root, rel, int(argv[4]), int(argv[5]))
        else:
            raise Refusal("BAD_OP", "unknown op %r" % op)
    except Refusal as r:
        answer({"ok": False, "error": {"code": r.code, "message": r.message, **r.details}})
        return 2
    except Aborted as a:
        answer({"ok": False, "error": {"code": "ABORTED", "message": "the upload was abandoned: %s" % a}})
        return 3
    except BrokenPipeError:
        return 4  # the reader went away
    except OSError as err:
        # The filesystem's own refusal (a read-only directory the code made, the volume full): the caller's to fix.
        code = {
            errno.EACCES: "EACCES",
            errno.EPERM: "EACCES",
            errno.ENOSPC: "WORKSPACE_FULL",
            errno.EDQUOT: "WORKSPACE_FULL",
            errno.ENOTDIR: "ENOTDIR",
            errno.EISDIR: "EISDIR",
        }
        answer(
            {
                "ok": False,
                "error": {
                    "code": code.get(err.errno, "IO_ERROR"),
                    "message": "%s: %s" % (rel, err.strerror or err),
                    "path": rel,
                },
            }
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
