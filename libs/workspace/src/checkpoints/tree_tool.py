"""The tree tool, run by `TreeTool` (tree-tool.ts) as `python3 -I -S -c <this file's text>`: counts, copies and
compares workspace trees for checkpoints. One JSON request per line on stdin, one reply per line on stdout, matched
by id (requests run in threads).

It runs as root, over trees that sandboxed code writes while it works (a background process may be running), so it
never resolves a path inside a tree: each directory is opened relative to its parent's fd with O_NOFOLLOW, and every
create, rename, unlink, chown and utime names one entry relative to a directory fd. A link swapped in by a racing
process is met as a link (copied as one, or ELOOP), never followed. It also stays on the tree's filesystem, and
`TreeTool` jails it besides (only the directories it serves are bound).

What a checkpoint keeps: regular files (their data, modes, owners, times), directories and symlinks (as links,
whatever they point at: they are never followed). Fifos, sockets and devices are not data: they are not counted, not
copied (`sync` skips them and removes them from the destination), not compared, and `prune` takes them out of a tree
made some other way (a fork's image copy).

Files: `FICLONE` (a reflink: no data copied, btrfs shares the extents) when source and destination share a
filesystem, else copy_file_range (or reads and writes across filesystems). Identity: with `trust: "inode"` (a btrfs
snapshot and its subvolume) a file whose inode number, ctime and size match is the same file, untouched since the
snapshot (ctime cannot be set, and snapshots keep inode numbers); with `trust: "content"` (a copy on another
filesystem) files of equal metadata are compared byte by byte.

Standard library only, one file: it is passed as the `-c` argument, never imported.
"""

import difflib
import errno
import fcntl
import json
import os
import stat
import sys
import threading

FICLONE = 0x40049409
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 256
CHUNK = 1 << 20
tmp_lock = threading.Lock()
tmp_seq = [0]


def kind(st):
    m = st.st_mode
    if stat.S_ISDIR(m):
        return 'dir'
    if stat.S_ISREG(m):
        return 'file'
    if stat.S_ISLNK(m):
        return 'symlink'
    return 'other'


def open_top(path):
    return os.open(path, O_DIR)


def open_sub(parent, name, dev):
    fd = os.open(name, O_DIR, dir_fd=parent)
    if os.fstat(fd).st_dev != dev and not same_fs(fd, parent):
        os.close(fd)
        raise OSError(errno.EXDEV, 'another filesystem is mounted at ' + name)
    return fd


def same_fs(a, b):
    # btrfs subvolumes have a device number each: the same filesystem is the same fsid.
    try:
        return os.fstatvfs(a).f_fsid == os.fstatvfs(b).f_fsid
    except OSError:
        return False


def listing(fd):
    out = {}
    with os.scandir(fd) as it:
        for e in it:
            out[e.name] = e.stat(follow_symlinks=False)
    return out


def tmp_name():
    with tmp_lock:
        tmp_seq[0] += 1
        return '.switchyard-restore~%d~%d' % (os.getpid(), tmp_seq[0])


def same_meta(a, b):
    return (
        a.st_size == b.st_size
        and a.st_mtime_ns == b.st_mtime_ns
        and a.st_mode == b.st_mode
        and a.st_uid == b.st_uid
        and a.st_gid == b.st_gid
    )


def same_contents(sdir, ddir, name):
    s = os.open(name, O_FILE, dir_fd=sdir)
    try:
        d = os.open(name, O_FILE, dir_fd=ddir)
        try:
            if not (stat.S_ISREG(os.fstat(s).st_mode) and stat.S_ISREG(os.fstat(d).st_mode)):
                return False
            while True:
                a = os.read(s, CHUNK)
                b = os.read(d, CHUNK)
                if a != b:
                    return False
                if not a:
                    return True
        finally:
            os.close(d)
    finally:
        os.close(s)


def same_file(sdir, ddir, name, s, d, trust):
    if not same_meta(s, d):
        return False
    if trust == 'inode':
        return s.st_ino == d.st_ino and s.st_ctime_ns == d.st_ctime_ns
    return same_contents(sdir, ddir, name)


def set_meta(fd, st):
    os.fchown(fd, st.st_uid, st.st_gid)  # before the mode: chown clears set-id bits
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_data(src, dst, size):
    try:
        fcntl.ioctl(dst, FICLONE, src)
        return 0
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTTY, errno.ENOSYS):
            raise
    copied = 0
    try:
        while True:
            n = os.copy_file_range(src, dst, CHUNK * 8, copied, copied)
            if n == 0:
                return copied
            copied += n
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    while True:  # across filesystems, where the kernel will not copy_file_range
        data = os.pread(src, CHUNK, copied)
        if not data:
            return copied
        view = memoryview(data)
        while view:
            n = os.pwrite(dst, view, copied)
            view = view[n:]
            copied += n


def copy_file(sdir, ddir, name, st, stats):
    src = os.open(name, O_FILE, dir_fd=sdir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return
        tmp = tmp_name()
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=ddir)
        try:
            try:
                stats['bytesCopied'] += copy_data(src, dst, st.st_size)
                set_meta(dst, st)
            finally:
                os.close(dst)
            os.rename(tmp, name, src_dir_fd=ddir, dst_dir_fd=ddir)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=ddir)
            except OSError:
                pass
            raise
    finally:
        os.close(src)
    stats['copied'] += 1


def copy_link(sdir, ddir, name, st, stats):
    target = os.readlink(name, dir_fd=sdir)
    tmp = tmp_name()
    os.symlink(target, tmp, dir_fd=ddir)
    try:
        os.chown(tmp, st.st_uid, st.st_gid, dir_fd=ddir, follow_symlinks=False)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=ddir, follow_symlinks=False)
        os.rename(tmp, name, src_dir_fd=ddir, dst_dir_fd=ddir)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=ddir)
        except OSError:
            pass
        raise
    stats['copied'] += 1


def remove(parent, name, st, dev, depth=0):
    if kind(st) != 'dir':
        os.unlink(name, dir_fd=parent)
        return
    if depth > MAX_DEPTH:
        raise OSError(errno.ELOOP, 'directories nested too deep')
    fd = open_sub(parent, name, dev)
    try:
        for child, cst in listing(fd).items():
            remove(fd, child, cst, dev, depth + 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def sync_dir(s, d, dev, trust, stats, depth):
    # Makes directory d hold exactly what s holds (then its own metadata is the caller's to set).
    if depth > MAX_DEPTH:
        raise OSError(errno.ELOOP, 'directories nested too deep')
    src = listing(s)
    dst = listing(d)
    for name, dst_st in dst.items():
        src_st = src.get(name)
        if src_st is None or kind(src_st) != kind(dst_st) or kind(src_st) == 'other':
            remove(d, name, dst_st, dev)
            stats['removed'] += 1
            dst[name] = None
    for name, st in src.items():
        k = kind(st)
        have = dst.get(name)
        if k == 'dir':
            if have is None:
                os.mkdir(name, 0o700, dir_fd=d)
                stats['copied'] += 1
            cs = os.open(name, O_DIR, dir_fd=s)
            try:
                cd = open_sub(d, name, dev)
                try:
                    sync_dir(cs, cd, dev, trust, stats, depth + 1)
                    set_meta(cd, st)
                finally:
                    os.close(cd)
            finally:
                os.close(cs)
        elif k == 'file':
            if have is not None and same_file(s, d, name, st, have, trust):
                stats['kept'] += 1
            else:
                copy_file(s, d, name, st, stats)
        elif k == 'symlink':
            if (
                have is not None
                and os.readlink(name, dir_fd=d) == os.readlink(name, dir_fd=s)
                and have.st_uid == st.st_uid
                and have.st_gid == st.st_gid
            ):
                stats['kept'] += 1
            else:
                copy_link(s, d, name, st, stats)
        else:
            stats['skipped'] += 1  # fifos and sockets: not data; devices cannot be made in a sandbox


def counts_of(fd, depth, out):
    if depth > MAX_DEPTH:
        raise OSError(errno.ELOOP, 'directories nested too deep')
    for name, st in listing(fd).items():
        k = kind(st)
        if k == 'dir':
            out['directories'] += 1
            sub = os.open(name, O_DIR, dir_fd=fd)
            try:
                counts_of(sub, depth + 1, out)
            finally:
                os.close(sub)
        elif k != 'other':  # fifos, sockets, devices: not data, never in a checkpoint, not counted
            out['files'] += 1
            if k == 'file':
                out['bytes'] += st.st_size


def op_count(r):
    out = {'files': 0, 'directories': 0, 'bytes': 0}
    fd = open_top(r['root'])
    try:
        counts_of(fd, 0, out)
    finally:
        os.close(fd)
    return out


def prune_dir(fd, dev, depth, out):
    # Unlinks every fifo, socket and device under fd; a directory that lost one keeps its times.
    if depth > MAX_DEPTH:
        raise OSError(errno.ELOOP, 'directories nested too deep')
    before = os.fstat(fd)
    dropped = 0
    for name, st in listing(fd).items():
        k = kind(st)
        if k == 'other':
            os.unlink(name, dir_fd=fd)
            dropped += 1
        elif k == 'dir':
            sub = open_sub(fd, name, dev)
            try:
                prune_dir(sub, dev, depth + 1, out)
            finally:
                os.close(sub)
    if dropped:
        os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))
        out['dropped'] += dropped


def op_prune(r):
    out = {'dropped': 0}
    fd = open_top(r['root'])
    try:
        prune_dir(fd, os.fstat(fd).st_dev, 0, out)
    finally:
        os.close(fd)
    return out


def op_sync(r):
    stats = {'copied': 0, 'removed': 0, 'kept': 0, 'skipped': 0, 'bytesCopied': 0}
    s = open_top(r['src'])
    try:
        d = open_top(r['dst'])
        try:
            top = os.fstat(s)
            sync_dir(s, d, os.fstat(d).st_dev, r['trust'], stats, 0)
            set_meta(d, top)
        finally:
            os.close(d)
    finally:
        os.close(s)
    return stats


class Differ:
    def __init__(self, r):
        self.trust = r['trust']
        self.max_entries = r['maxEntries']
        self.max_text = r['maxTextBytes']
        self.budget = r['maxDiffBytes']
        self.added, self.removed, self.modified = [], [], []
        self.truncated = False

    def full(self):
        if len(self.added) + len(self.removed) + len(self.modified) >= self.max_entries:
            self.truncated = True
            return True
        return False

    def entry(self, path, st):
        e = {'path': path, 'type': kind(st)}
        if kind(st) == 'file':
            e['size'] = st.st_size
        return e

    def all_of(self, fd, prefix, st, into, depth):
        # A directory only on one side: it and everything in it.
        if self.full():
            return
        into.append(self.entry(prefix, st))
        if kind(st) != 'dir' or depth > MAX_DEPTH:
            return
        sub = os.open(prefix.rsplit('/', 1)[-1], O_DIR, dir_fd=fd)
        try:
            for name, cst in sorted(listing(sub).items()):
                if kind(cst) != 'other':
                    self.all_of(sub, prefix + '/' + name, cst, into, depth + 1)
        finally:
            os.close(sub)

    def read_text(self, fd, name):
        f = os.open(name, O_FILE, dir_fd=fd)
        try:
            data = os.read(f, self.max_text + 1)
        finally:
            os.close(f)
        if len(data) > self.max_text or b'\0' in data:
            return None
        try:
            return data.decode('utf-8')
        except UnicodeDecodeError:
            return None

    def modified_file(self, a, b, name, path, sa, sb):
        e = {'path': path, 'type': 'file', 'sizeBefore': sa.st_size, 'sizeAfter': sb.st_size}
        if stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
            e['modeBefore'] = '%04o' % stat.S_IMODE(sa.st_mode)
            e['modeAfter'] = '%04o' % stat.S_IMODE(sb.st_mode)
        changed = sa.st_size != sb.st_size or not same_contents(a, b, name)
        if not changed and 'modeBefore' not in e:
            return
        if changed:
            before = self.read_text(a, name) if sa.st_size <= self.max_text else None
            after = self.read_text(b, name) if sb.st_size <= self.max_text else None
            if before is None or after is None:
                big = sa.st_size > self.max_text or sb.st_size > self.max_text
                e['diffOmitted'] = 'too_large' if big else 'binary'
            else:
                text = ''.join(
                    difflib.unified_diff(before.splitlines(True), after.splitlines(True), 'a/' + path, 'b/' + path)
                )
                if len(text.encode()) <= self.budget:
                    e['diff'] = text
                    self.budget -= len(text.encode())
                else:
                    e['diffOmitted'] = 'budget'
        else:
            e['contentUnchanged'] = True
        self.modified.append(e)

    def walk(self, a, b, prefix, depth):
        if depth > MAX_DEPTH:
            raise OSError(errno.ELOOP, 'directories nested too deep')
        # Fifos and sockets are not data: checkpoints do not keep them, so they are not differences either.
        la = {k: v for k, v in listing(a).items() if kind(v) != 'other'}
        lb = {k: v for k, v in listing(b).items() if kind(v) != 'other'}
        for name in sorted(set(la) | set(lb)):
            if self.full():
                return
            path = prefix + name
            sa, sb = la.get(name), lb.get(name)
            if sb is None:
                self.all_of(a, path, sa, self.removed, depth)
            elif sa is None:
                self.all_of(b, path, sb, self.added, depth)
            elif kind(sa) != kind(sb):
                self.all_of(a, path, sa, self.removed, depth)
                self.all_of(b, path, sb, self.added, depth)
            elif kind(sa) == 'dir':
                ca = os.open(name, O_DIR, dir_fd=a)
                try:
                    cb = os.open(name, O_DIR, dir_fd=b)
                    try:
                        self.walk(ca, cb, path + '/', depth + 1)
                    finally:
                        os.close(cb)
                finally:
                    os.close(ca)
            elif kind(sa) == 'file':
                if (
                    self.trust == 'inode'
                    and sa.st_ino == sb.st_ino
                    and sa.st_ctime_ns == sb.st_ctime_ns
                    and same_meta(sa, sb)
                ):
                    continue
                self.modified_file(a, b, name, path, sa, sb)
            elif kind(sa) == 'symlink':
                ta, tb = os.readlink(name, dir_fd=a), os.readlink(name, dir_fd=b)
                if ta != tb:
                    self.modified.append({'path': path, 'type': 'symlink', 'targetBefore': ta, 'targetAfter': tb})


def op_diff(r):
    d = Differ(r)
    a = open_top(r['a'])
    try:
        b = open_top(r['b'])
        try:
            d.walk(a, b, '', 0)
        finally:
            os.close(b)
    finally:
        os.close(a)
    return {'added': d.added, 'removed': d.removed, 'modified': d.modified, 'truncated': d.truncated}


OPS = {'count': op_count, 'sync': op_sync, 'diff': op_diff, 'prune': op_prune}
out = sys.stdout
lock = threading.Lock()


def serve(r):
    try:
        reply = OPS[r['op']](r)
        reply['ok'] = True
    except OSError as e:
        reply = {
            'ok': False,
            'errno': errno.errorcode.get(e.errno, str(e.errno)),
            'message': e.strerror or str(e),
            'path': e.filename if isinstance(e.filename, str) else None,
        }
    except Exception as e:
        reply = {'ok': False, 'errno': 'EINVAL', 'message': repr(e)}
    reply['id'] = r.get('id')
    line = json.dumps(reply, ensure_ascii=True) + '\n'
    with lock:
        out.write(line)
        out.flush()


out.write('{"ready":true}\n')
out.flush()
for line in sys.stdin.buffer:
    threading.Thread(target=serve, args=(json.loads(line),), daemon=True).start()
