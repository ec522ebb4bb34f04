"""The loop helper, run as root by `HelperLoopHost` (loop-host-helper.ts) as `python3 -I -S -c <this file's text>`
(`-I -S` keeps the environment and site-packages out): loop attach (LOOP_CTL_GET_FREE + LOOP_CONFIGURE, auto-clear),
mount(2) and umount2(2) through ctypes, mkfs, and btrfs subvolumes and snapshots through their ioctls. One JSON
request per line on stdin, one reply per line on stdout (matched by id: formats run in threads and answer out of
order).

A btrfs workspace image holds the workspace in the subvolume `ws` (what the workspace directory mounts) and its
checkpoints as read-only snapshots in `checkpoints/`, reached through a second mount of the image's top level that
only the engine sees.

Standard library only, one file: it is passed as the `-c` argument, never imported.
"""

import ctypes
import errno
import fcntl
import json
import os
import struct
import subprocess
import sys
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
LOOP_SET_FD, LOOP_CLR_FD, LOOP_SET_STATUS64, LOOP_GET_STATUS64 = 0x4C00, 0x4C01, 0x4C04, 0x4C05
LOOP_CONFIGURE, LOOP_CTL_GET_FREE = 0x4C0A, 0x4C82
LO_FLAGS_AUTOCLEAR, MS_NOSUID, MS_NODEV, MS_MOVE, MNT_DETACH = 4, 2, 4, 8192, 2
BTRFS_MAGIC_OFFSET, BTRFS_MAGIC = 0x10040, b'_BHRfS_M'
BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SNAP_CREATE_V2, BTRFS_IOC_SNAP_DESTROY = 0x5000940E, 0x50009417, 0x5000940F
BTRFS_SUBVOL_RDONLY = 2
FIFREEZE, FITHAW = 0xC0045877, 0xC0045878


def check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def info64(name):
    # struct loop_info64: device, inode, rdevice, offset, sizelimit; number, encrypt type, key size, flags; names
    return struct.pack('=5Q4I64s64s32s2Q', 0, 0, 0, 0, 0, 0, 0, 0, LO_FLAGS_AUTOCLEAR, name[:63], b'', b'', 0, 0)


def configure(dev, backing, name):
    try:
        fcntl.ioctl(dev, LOOP_CONFIGURE, struct.pack('=2I', backing, 0) + info64(name) + bytes(64))
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTTY):
            raise
        fcntl.ioctl(dev, LOOP_SET_FD, backing)  # kernels before 5.8
        try:
            fcntl.ioctl(dev, LOOP_SET_STATUS64, info64(name))
        except OSError:
            fcntl.ioctl(dev, LOOP_CLR_FD)
            raise


def attach(image):
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    ctl = os.open('/dev/loop-control', os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(64):
            n = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
            dev = os.open('/dev/loop%d' % n, os.O_RDWR | os.O_CLOEXEC)
            try:
                configure(dev, backing, os.fsencode(image))
                return dev, n
            except OSError as e:
                os.close(dev)
                if e.errno != errno.EBUSY:  # EBUSY: taken by another process since GET_FREE
                    raise
        raise OSError(errno.EBUSY, 'no free loop device')
    finally:
        os.close(ctl)
        os.close(backing)


def attached(image):
    # The loop device the image is still attached to (a dead engine's mount elsewhere holds it), opened so that it
    # cannot be detached and reused meanwhile; its inode is checked, the name alone could be a former file's.
    real = os.fsencode(os.path.realpath(image))
    ino = os.stat(image).st_ino
    for entry in os.listdir('/sys/block'):
        try:
            with open('/sys/block/%s/loop/backing_file' % entry, 'rb') as f:
                if f.read().rstrip(b'\n') != real:
                    continue
            dev = os.open('/dev/' + entry, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if struct.unpack_from('=Q', fcntl.ioctl(dev, LOOP_GET_STATUS64, bytes(232)), 8)[0] == ino:
                return dev, int(entry[4:])
        except OSError:
            pass
        os.close(dev)
    return None


def is_btrfs(image):
    with open(image, 'rb') as f:
        f.seek(BTRFS_MAGIC_OFFSET)
        return f.read(8) == BTRFS_MAGIC


def mount_loop(image, target, fresh, fstype, data):
    dev, n = (not fresh and attached(image)) or attach(image)
    try:
        check(libc.mount(b'/dev/loop%d' % n, os.fsencode(target), fstype, MS_NOSUID | MS_NODEV, data))
    finally:
        os.close(dev)  # auto-clear: the device goes with the last unmount, or now if the mount failed


def mount_image(r):
    if is_btrfs(r['image']):
        mount_loop(r['image'], r['target'], r['fresh'], b'btrfs', b'subvol=ws,discard')
    else:
        mount_loop(r['image'], r['target'], r['fresh'], b'ext4', b'discard')


def mount_root(r):
    # The image's top level (the workspace subvolume and the checkpoints), through the loop device its workspace
    # mount holds: two mounts of one btrfs filesystem.
    mount_loop(r['image'], r['target'], False, b'btrfs', b'subvolid=5,discard')


# The btrfs ioctls take 4 KiB structs: passed as mutable buffers (fcntl copies at most 1 KiB of immutable ones).
def vol_args(name):
    # struct btrfs_ioctl_vol_args: fd, name[4088]
    return bytearray(struct.pack('=q4088s', 0, os.fsencode(name)))


def vol_args_v2(source_fd, flags, name):
    # struct btrfs_ioctl_vol_args_v2: fd, transid, flags, 4 unused u64, name[4040]
    return bytearray(struct.pack('=qQQ4Q4040s', source_fd, 0, flags, 0, 0, 0, 0, os.fsencode(name)))


def snapshot(r):
    # A snapshot of subvolume r['source'] named r['name'] in directory r['parent']; read-only unless asked.
    src = os.open(r['source'], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    parent = os.open(r['parent'], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = BTRFS_SUBVOL_RDONLY if r.get('readonly', True) else 0
        fcntl.ioctl(parent, BTRFS_IOC_SNAP_CREATE_V2, vol_args_v2(src, flags, r['name']), True)
    finally:
        os.close(src)
        os.close(parent)


def delete_subvolume(r):
    parent = os.open(r['parent'], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.ioctl(parent, BTRFS_IOC_SNAP_DESTROY, vol_args(r['name']), True)
    finally:
        os.close(parent)


def copy_sparse(src_path, dst_path):
    src = os.open(src_path, os.O_RDONLY | os.O_CLOEXEC)
    dst = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(src).st_size
        os.ftruncate(dst, size)
        pos = 0
        while pos < size:
            try:
                start = os.lseek(src, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break  # only a hole is left
                raise
            end = os.lseek(src, start, os.SEEK_HOLE)
            left, off = end - start, start
            while left > 0:
                n = os.copy_file_range(src, dst, left, off, off)
                if n == 0:
                    break
                left -= n
                off += n
            pos = end
        os.fsync(dst)
    except BaseException:
        os.close(dst)
        os.unlink(dst_path)
        raise
    finally:
        os.close(src)
    os.close(dst)


def copy_image(r):
    # The filesystem is frozen (writes wait, everything written is in the image) while its image is copied; the
    # copy then gets a filesystem id of its own (btrfstune -m: a superblock write), so that both mount at once.
    root = os.open(r['root'], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(root, FIFREEZE, 0)
        try:
            copy_sparse(r['image'], r['dest'])
        finally:
            fcntl.ioctl(root, FITHAW, 0)
    finally:
        os.close(root)
    p = subprocess.run(
        ['btrfstune', '-m', r['dest']], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if p.returncode != 0:
        os.unlink(r['dest'])
        raise OSError(errno.EIO, 'btrfstune: %s' % (p.stderr.decode(errors='replace').strip()[-500:] or p.returncode))


def thaw(r):
    root = os.open(r['root'], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(root, FITHAW, 0)
    except OSError as e:
        if e.errno != errno.EINVAL:  # not frozen
            raise
    finally:
        os.close(root)


def init_btrfs(image, scratch, owner):
    # The workspace subvolume (owned by the sandbox uid) and the checkpoints directory (the engine's) at the top.
    os.mkdir(scratch, 0o700)
    try:
        mount_loop(image, scratch, True, b'btrfs', b'')
        try:
            top = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fcntl.ioctl(top, BTRFS_IOC_SUBVOL_CREATE, vol_args('ws'), True)
            finally:
                os.close(top)
            ws = os.path.join(scratch, 'ws')
            if owner:
                os.chown(ws, owner[0], owner[1])
            os.chmod(ws, 0o755)
            os.mkdir(os.path.join(scratch, 'checkpoints'), 0o700)
        finally:
            check(libc.umount2(os.fsencode(scratch), 0))
    finally:
        os.rmdir(scratch)


def take_spare(r):
    os.rename(r['spare_image'], r['image'])
    check(libc.mount(os.fsencode(r['spare_mount']), os.fsencode(r['target']), None, MS_MOVE, None))
    return {'then': lambda: os.rmdir(r['spare_mount'])}  # the workspace is ready without waiting for that


def remove_workspace(r):
    # Held across the unmount, the filesystem's teardown (a sync, the loop device's release: milliseconds) waits
    # for the fd to close, after the reply.
    try:
        held = os.open(r['target'], os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        held = None

    def release():
        if held is not None:
            os.close(held)
        os.unlink(r['trashed'])

    try:
        os.rename(r['image'], r['trashed'])
    except OSError:
        if held is not None:
            os.close(held)
        raise
    if libc.umount2(os.fsencode(r['target']), MNT_DETACH) != 0 and ctypes.get_errno() not in (
        errno.EINVAL,
        errno.ENOENT,
    ):
        e = ctypes.get_errno()
        release()
        raise OSError(e, os.strerror(e))
    try:
        os.rmdir(r['target'])
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY):  # files put there while unmounted stay
            release()
            raise
    return {'then': release}


def umount(r):
    check(libc.umount2(os.fsencode(r['target']), MNT_DETACH))


def detach(r):
    dev = os.open(r['device'], os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(dev, LOOP_CLR_FD)
    finally:
        os.close(dev)


def format_image(r):
    fd = os.open(r['image'], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, r['bytes'])
    finally:
        os.close(fd)
    stderr = []
    for argv in r['commands']:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stderr.append(p.stderr.decode(errors='replace')[-2000:])
        if p.returncode != 0:
            os.unlink(r['image'])
            raise OSError(errno.EIO, '%s: %s' % (argv[0], stderr[-1].strip() or 'exit %d' % p.returncode))
    if r.get('btrfs'):
        try:
            init_btrfs(r['image'], r['btrfs']['scratch'], r['btrfs'].get('owner'))
        except BaseException:
            os.unlink(r['image'])
            raise
    return {'stderr': stderr}


OPS = {
    'mount_image': mount_image,
    'take_spare': take_spare,
    'remove_workspace': remove_workspace,
    'umount': umount,
    'detach': detach,
    'format': format_image,
    'mount_root': mount_root,
    'snapshot': snapshot,
    'delete_subvolume': delete_subvolume,
    'copy_image': copy_image,
    'thaw': thaw,
}
out = sys.stdout
lock = threading.Lock()


def quietly(fn):
    try:
        fn()
    except OSError:
        pass  # what is left goes at the next start-up


def serve(r):
    then = None
    try:
        reply = OPS[r['op']](r) or {}
        then = reply.pop('then', None)
        reply['ok'] = True
    except OSError as e:
        reply = {'ok': False, 'errno': errno.errorcode.get(e.errno, str(e.errno)), 'message': e.strerror or str(e)}
    except Exception as e:
        reply = {'ok': False, 'errno': 'EINVAL', 'message': repr(e)}
    reply['id'] = r.get('id')
    with lock:
        out.write(json.dumps(reply) + '\n')
        out.flush()
    if then:
        threading.Thread(target=quietly, args=(then,), daemon=True).start()


out.write('{"ready":true}\n')
out.flush()
for line in sys.stdin.buffer:
    r = json.loads(line)
    if r.get('op') in ('format', 'copy_image', 'snapshot', 'delete_subvolume'):
        threading.Thread(target=serve, args=(r,), daemon=True).start()
    else:
        serve(r)
