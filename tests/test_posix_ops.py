"""Every FUSE operation through real syscalls on a mounted TierFS volume. ctest runs it
twice: with removals deleting at once, and with the trash on (TIERFS_TEST_TRASH_DAYS=1, the
default of `tierfs format`), under which a removed file must behave exactly as unlinked."""

import ctypes
import ctypes.util
import errno
import mmap
import os
import random
import stat
import time

import harness
from harness import Volume, in_child, is_mounted, msg, run, tierfs, wait_for

os.umask(0o022)

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64), ("d_reclen", ctypes.c_ushort),
                ("d_type", ctypes.c_ubyte), ("d_name", ctypes.c_char * 256)]


libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Timespec), ctypes.c_int]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.opendir.argtypes = [ctypes.c_char_p]
libc.opendir.restype = ctypes.c_void_p
libc.readdir.argtypes = [ctypes.c_void_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.telldir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.seekdir.restype = None
libc.closedir.argtypes = [ctypes.c_void_p]


def _check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def renameat2(old, new, flags):
    _check(libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags), "renameat2")


def utimensat(path, atime, mtime):
    """atime/mtime: (sec, nsec) tuples, or UTIME_NOW / UTIME_OMIT."""
    def ts(v):
        return Timespec(0, v) if isinstance(v, int) else Timespec(*v)
    times = (Timespec * 2)(ts(atime), ts(mtime))
    _check(libc.utimensat(AT_FDCWD, os.fsencode(path), times, 0), "utimensat")


def fallocate(fd, mode, offset, length):
    _check(libc.fallocate(fd, mode, offset, length), "fallocate")


def write_file(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


def settled_usage(mnt, quiet=1.0, timeout=20.0):
    """statvfs(mnt) once it has stopped changing for `quiet` seconds. A file that an earlier
    test removed goes when the kernel forgets its inode, which may come a little later (over
    io_uring FORGETs still travel through /dev/fuse, on their own): sampled in between, a
    baseline counts it, and its freeing later hides what the test is looking for."""
    deadline = time.monotonic() + timeout
    last = os.statvfs(mnt)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = os.statvfs(mnt)
        if (now.f_bfree, now.f_ffree) != (last.f_bfree, last.f_ffree):
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class BasicIOTest(harness.TierFSTestCase):
    def test_create_write_read_seek(self):
        p = os.path.join(self.work, "f")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            self.assertEqual(os.write(fd, b"hello world"), 11)
            self.assertEqual(os.lseek(fd, 0, os.SEEK_SET), 0)
            self.assertEqual(os.read(fd, 5), b"hello")
            self.assertEqual(os.lseek(fd, -5, os.SEEK_END), 6)
            self.assertEqual(os.read(fd, 100), b"world")
            self.assertEqual(os.read(fd, 100), b"")
            os.lseek(fd, 6, os.SEEK_SET)
            os.write(fd, b"WORLD!!")
            self.assertEqual(os.pread(fd, 100, 0), b"hello WORLD!!")
            self.assertEqual(os.fstat(fd).st_size, 13)
        finally:
            os.close(fd)
        st = os.stat(p)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        self.assertEqual(st.st_size, 13)
        self.assertEqual(st.st_nlink, 1)
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))
        self.assertEqual(read_file(p), b"hello WORLD!!")

    def test_open_flags(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"0123456789")
        with self.assertRaises(FileExistsError):
            os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with self.assertRaises(FileNotFoundError):
            os.open(os.path.join(self.work, "missing"), os.O_RDONLY)
        with self.assertRaises(FileNotFoundError):
            os.open(os.path.join(self.work, "nodir", "x"), os.O_CREAT | os.O_WRONLY, 0o644)
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"AB")
        os.close(fd)
        self.assertEqual(read_file(p), b"0123456789AB")
        fd = os.open(p, os.O_RDONLY)
        with self.assertRaises(OSError) as cm:
            os.write(fd, b"x")
        self.assertEqual(cm.exception.errno, errno.EBADF)
        os.close(fd)
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        self.assertEqual(os.fstat(fd).st_size, 0)
        os.close(fd)
        self.assertEqual(os.stat(p).st_size, 0)
        with self.assertRaises(IsADirectoryError):
            os.open(self.work, os.O_WRONLY)
        with self.assertRaises(NotADirectoryError):
            os.open(p, os.O_RDONLY | os.O_DIRECTORY)

    def test_o_trunc_then_shorter_write(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"a long first version of the file")
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"short")
        os.close(fd)
        self.assertEqual(read_file(p), b"short")
        self.assertEqual(os.stat(p).st_size, 5)
        with open(p, "w") as f:        # Python's "w" is O_WRONLY|O_CREAT|O_TRUNC
            f.write("xy")
        self.assertEqual(read_file(p), b"xy")

    def test_pwrite_beyond_eof_leaves_zeros(self):
        p = os.path.join(self.work, "f")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        os.pwrite(fd, b"tail", (1 << 20) + 7)
        os.close(fd)
        data = read_file(p)
        self.assertEqual(len(data), (1 << 20) + 11)
        self.assertEqual(data[:(1 << 20) + 7], bytes((1 << 20) + 7))
        self.assertEqual(data[-4:], b"tail")

    def test_unlink_while_open(self):
        p = os.path.join(self.work, "f")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            payload = os.urandom(300000)
            os.write(fd, payload)
            os.fsync(fd)
            os.unlink(p)
            self.assertFalse(os.path.exists(p))
            self.assertNotIn("f", os.listdir(self.work))
            self.assertEqual(os.fstat(fd).st_nlink, 0)
            self.assertEqual(os.pread(fd, len(payload) + 10, 0), payload)
            os.pwrite(fd, b"more", len(payload))
            self.assertEqual(os.pread(fd, 10, len(payload)), b"more")
            # The name is free for a new file meanwhile.
            write_file(p, b"new")
            self.assertEqual(read_file(p), b"new")
            self.assertEqual(os.pread(fd, 4, len(payload)), b"more")
        finally:
            os.close(fd)
        self.assertEqual(read_file(p), b"new")

    def test_reopen_of_a_removed_file_the_kernel_still_holds(self):
        # A process resolved the name (O_PATH holds the kernel's lookup) when another one
        # removed the file and closed its last descriptor: opening what was resolved gets
        # the unlinked file, as on ext4 (it was deleted at that close, and the open failed
        # with ESTALE: the race a lock file's opener and remover run, where the kernel's one
        # retry can lose again). The file goes once the kernel lets go of it.
        p = os.path.join(self.work, "held")
        sv = settled_usage(self.mnt)
        files0 = sv.f_files - sv.f_ffree
        payload = os.urandom(200000)
        write_file(p, payload)
        path_fd = os.open(p, os.O_PATH)
        try:
            fd = os.open(p, os.O_RDWR)
            os.unlink(p)
            os.close(fd)
            again = os.open("/proc/self/fd/%d" % path_fd, os.O_RDONLY)
            try:
                self.assertEqual(os.fstat(again).st_nlink, 0)
                self.assertEqual(os.pread(again, len(payload) + 1, 0), payload)
            finally:
                os.close(again)
        finally:
            os.close(path_fd)
        self.assertFalse(os.path.exists(p))
        if (os.environ.get("TIERFS_TEST_TRASH_DAYS") or "0") == "0":
            def freed():
                s = os.statvfs(self.mnt)
                return s.f_files - s.f_ffree <= files0
            self.assertTrue(wait_for(freed, timeout=30), "the removed file was not deleted after its last lookup")

    def test_rename_over_an_open_file(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        write_file(a, b"new")
        write_file(b, b"old")
        fd = os.open(b, os.O_RDONLY)
        try:
            os.rename(a, b)
            self.assertEqual(os.fstat(fd).st_nlink, 0, "the replaced file has no name left")
            self.assertEqual(os.pread(fd, 10, 0), b"old")
            self.assertEqual(os.stat(b).st_nlink, 1)
        finally:
            os.close(fd)
        self.assertEqual(read_file(b), b"new")

    def test_link_counts_of_a_hard_linked_file_removed_while_open(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        write_file(a, b"linked")
        os.link(a, b)
        fd = os.open(a, os.O_RDONLY)
        try:
            self.assertEqual(os.fstat(fd).st_nlink, 2)
            os.unlink(a)
            self.assertEqual(os.fstat(fd).st_nlink, 1)
            self.assertEqual(os.stat(b).st_nlink, 1)
            os.unlink(b)
            self.assertEqual(os.fstat(fd).st_nlink, 0)
            self.assertEqual(os.pread(fd, 10, 0), b"linked")
        finally:
            os.close(fd)

    def test_a_removed_open_file_stays_usable_through_its_descriptor(self):
        # What those who hold a removed file may do with it, as on ext4: change its mode,
        # truncate it, open it again for writing through /proc/self/fd.
        p = os.path.join(self.work, "f")
        write_file(p, b"0123456789")
        fd = os.open(p, os.O_RDWR)
        try:
            os.unlink(p)
            os.fchmod(fd, 0o600)
            self.assertEqual(stat.S_IMODE(os.fstat(fd).st_mode), 0o600)
            os.ftruncate(fd, 4)
            self.assertEqual(os.fstat(fd).st_size, 4)
            again = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(again, b"xy")
            finally:
                os.close(again)
            self.assertEqual(os.pread(fd, 10, 0), b"0123xy")
            self.assertEqual(os.fstat(fd).st_nlink, 0)
        finally:
            os.close(fd)
        self.assertFalse(os.path.exists(p))

    def test_mmap_shared_write(self):
        p = os.path.join(self.work, "f")
        write_file(p, bytes(1 << 20))
        with open(p, "r+b") as f:
            m = mmap.mmap(f.fileno(), 0)
            m[4096:4096 + 5] = b"mmap!"
            m[-3:] = b"end"
            m.flush()
            m.close()
        data = read_file(p)
        self.assertEqual(data[4096:4101], b"mmap!")
        self.assertEqual(data[-3:], b"end")
        self.assertEqual(len(data), 1 << 20)
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            self.assertEqual(m[4096:4101], b"mmap!")
            m.close()

    def test_fsync_commits_without_close(self):
        p = os.path.join(self.work, "f")
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, os.urandom(1500000))
            os.fsync(fd)
            self.assertEqual(self.vol.info_json(p)["length"], 1500000)
            os.write(fd, os.urandom(700000))
            os.fdatasync(fd)
            self.assertEqual(self.vol.info_json(p)["length"], 2200000)
        finally:
            os.close(fd)

    def test_directory_fsync(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        write_file(os.path.join(d, "x"), b"x")
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fd = os.open(self.mnt, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def test_statfs(self):
        sv = settled_usage(self.mnt)
        self.assertGreater(sv.f_bsize, 0)
        self.assertGreater(sv.f_frsize, 0)
        self.assertGreater(sv.f_blocks, 0)
        self.assertLessEqual(sv.f_bfree, sv.f_blocks)
        self.assertLessEqual(sv.f_bavail, sv.f_bfree)
        self.assertGreaterEqual(sv.f_namemax, 255)
        self.assertGreater(sv.f_files, 0)
        self.assertLessEqual(sv.f_ffree, sv.f_files)
        used0 = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
        files0 = sv.f_files - sv.f_ffree
        for i in range(4):
            write_file(os.path.join(self.work, "s%d" % i), os.urandom(4 << 20))

        def grown():
            s = os.statvfs(self.mnt)
            return ((s.f_blocks - s.f_bfree) * s.f_frsize >= used0 + (16 << 20)
                    and s.f_files - s.f_ffree >= files0 + 4)
        self.assertTrue(wait_for(grown, timeout=30),
                        "statfs does not account 16 MiB / 4 inodes written: before used=%d files=%d, now %r"
                        % (used0, files0, os.statvfs(self.mnt)))

    def test_copy_file_range(self):
        src = os.path.join(self.work, "src")
        dst = os.path.join(self.work, "dst")
        data = os.urandom(5 << 20)
        write_file(src, data)
        write_file(dst, b"D" * 100)
        fs, fd_ = os.open(src, os.O_RDONLY), os.open(dst, os.O_RDWR)
        try:
            done = 0
            want = 3 << 20
            while done < want:
                n = os.copy_file_range(fs, fd_, want - done, (1 << 20) + 3 + done, 50 + done)
                self.assertGreater(n, 0)
                done += n
        finally:
            os.close(fs)
            os.close(fd_)
        out = read_file(dst)
        self.assertEqual(len(out), 50 + (3 << 20))
        self.assertEqual(out[:50], b"D" * 50)
        self.assertEqual(out[50:], data[(1 << 20) + 3:(1 << 20) + 3 + (3 << 20)])
        self.assertEqual(read_file(src), data, "source changed by copy_file_range")

    def test_fallocate(self):
        p = os.path.join(self.work, "f")
        data = os.urandom(3 << 20)
        write_file(p, data)
        fd = os.open(p, os.O_RDWR)
        try:
            # Plain allocation beyond EOF extends the file with zeros.
            fallocate(fd, 0, 0, 4 << 20)
            self.assertEqual(os.fstat(fd).st_size, 4 << 20)
            os.posix_fallocate(fd, (4 << 20), 1000)
            self.assertEqual(os.fstat(fd).st_size, (4 << 20) + 1000)
            # KEEP_SIZE beyond EOF: size unchanged.
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 << 20)
            self.assertEqual(os.fstat(fd).st_size, (4 << 20) + 1000)
            # Punch a hole across a block boundary.
            off, ln = (1 << 20) - 5000, (1 << 20) + 10000
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, ln)
            self.assertEqual(os.fstat(fd).st_size, (4 << 20) + 1000)
        finally:
            os.close(fd)
        out = read_file(p)
        expect = bytearray(data + bytes((1 << 20) + 1000))
        expect[off:off + ln] = bytes(ln)
        self.assertEqual(len(out), len(expect))
        self.assertTrue(out == bytes(expect), "content after fallocate/punch hole differs")

    def test_access(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.chmod(p, 0o755)
        self.assertTrue(os.access(p, os.R_OK | os.W_OK | os.X_OK))
        self.assertFalse(os.access(os.path.join(self.work, "nope"), os.F_OK))


class NamespaceTest(harness.TierFSTestCase):
    def test_mkdir_rmdir(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d, 0o750)
        st = os.stat(d)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o750)
        with self.assertRaises(FileExistsError):
            os.mkdir(d)
        write_file(os.path.join(d, "f"), b"x")
        with self.assertRaises(OSError) as cm:
            os.rmdir(d)
        self.assertEqual(cm.exception.errno, errno.ENOTEMPTY)
        os.mkdir(os.path.join(d, "sub"))
        os.unlink(os.path.join(d, "f"))
        with self.assertRaises(OSError) as cm:
            os.rmdir(d)
        self.assertEqual(cm.exception.errno, errno.ENOTEMPTY)
        with self.assertRaises(NotADirectoryError):
            write_file(os.path.join(self.work, "file"), b"")
            os.rmdir(os.path.join(self.work, "file"))
        with self.assertRaises(FileNotFoundError):
            os.rmdir(os.path.join(self.work, "missing"))
        os.rmdir(os.path.join(d, "sub"))
        os.rmdir(d)
        self.assertFalse(os.path.exists(d))
        with self.assertRaises(FileNotFoundError):
            os.stat(d)
        # Name can be reused as a file.
        write_file(d, b"now a file")
        self.assertEqual(read_file(d), b"now a file")

    def test_mkdir_umask(self):
        old = os.umask(0o027)
        try:
            os.mkdir(os.path.join(self.work, "d"), 0o777)
            fd = os.open(os.path.join(self.work, "f"), os.O_CREAT | os.O_WRONLY, 0o666)
            os.close(fd)
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.work, "d")).st_mode), 0o750)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.work, "f")).st_mode), 0o640)

    def test_directory_link_counts(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        self.assertEqual(os.stat(d).st_nlink, 2)
        for i in range(3):
            os.mkdir(os.path.join(d, "s%d" % i))
        write_file(os.path.join(d, "file"), b"")
        self.assertEqual(os.stat(d).st_nlink, 5)
        os.rmdir(os.path.join(d, "s0"))
        self.assertEqual(os.stat(d).st_nlink, 4)
        os.mkdir(os.path.join(self.work, "other"))
        os.rename(os.path.join(d, "s1"), os.path.join(self.work, "other", "s1"))
        self.assertEqual(os.stat(d).st_nlink, 3)
        self.assertEqual(os.stat(os.path.join(self.work, "other")).st_nlink, 3)

    def test_unlink_errors(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        with self.assertRaises(OSError) as cm:
            os.unlink(d)
        self.assertIn(cm.exception.errno, (errno.EISDIR, errno.EPERM))
        with self.assertRaises(FileNotFoundError):
            os.unlink(os.path.join(self.work, "missing"))
        write_file(os.path.join(self.work, "f"), b"x")
        with self.assertRaises(NotADirectoryError):
            os.stat(os.path.join(self.work, "f", "x"))

    def test_long_names(self):
        ok = "n" * 255
        write_file(os.path.join(self.work, ok), b"x")
        self.assertIn(ok, os.listdir(self.work))
        with self.assertRaises(OSError) as cm:
            write_file(os.path.join(self.work, "n" * 256), b"x")
        self.assertEqual(cm.exception.errno, errno.ENAMETOOLONG)

    def test_unusual_names(self):
        names = ["space name", "ünïcødé", "emoji-\U0001F600", "new\nline", "-dash", ".hidden", "a" * 200, "semi;colon"]
        for n in names:
            write_file(os.path.join(self.work, n), n.encode())
        self.assertEqual(sorted(os.listdir(self.work)), sorted(names))
        for n in names:
            self.assertEqual(read_file(os.path.join(self.work, n)), n.encode())

    def test_rename_file_over_existing(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        write_file(a, b"AAAA")
        write_file(b, b"BBBBBBBB")
        ino_a = os.stat(a).st_ino
        fd_b = os.open(b, os.O_RDONLY)
        try:
            os.rename(a, b)
            self.assertFalse(os.path.exists(a))
            self.assertEqual(read_file(b), b"AAAA")
            self.assertEqual(os.stat(b).st_ino, ino_a)
            # The replaced file stays readable through its open descriptor.
            self.assertEqual(os.pread(fd_b, 100, 0), b"BBBBBBBB")
        finally:
            os.close(fd_b)
        self.assertEqual(sorted(os.listdir(self.work)), ["b"])
        # Rename to itself is a no-op.
        os.rename(b, b)
        self.assertEqual(read_file(b), b"AAAA")
        # Across directories.
        os.mkdir(os.path.join(self.work, "d"))
        os.rename(b, os.path.join(self.work, "d", "c"))
        self.assertEqual(read_file(os.path.join(self.work, "d", "c")), b"AAAA")
        with self.assertRaises(FileNotFoundError):
            os.rename(os.path.join(self.work, "missing"), os.path.join(self.work, "x"))

    def test_rename_over_hard_link_of_itself(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        write_file(a, b"same")
        os.link(a, b)
        os.rename(a, b)   # POSIX: both names refer to the same file, nothing happens
        self.assertTrue(os.path.exists(a))
        self.assertTrue(os.path.exists(b))
        self.assertEqual(os.stat(b).st_nlink, 2)

    def test_rename_directories(self):
        w = self.work
        for n in ("src", "empty", "full", "src/inner"):
            os.mkdir(os.path.join(w, n))
        write_file(os.path.join(w, "src", "f"), b"srcfile")
        write_file(os.path.join(w, "full", "g"), b"g")
        write_file(os.path.join(w, "file"), b"file")
        with self.assertRaises(OSError) as cm:
            os.rename(os.path.join(w, "src"), os.path.join(w, "full"))
        self.assertIn(cm.exception.errno, (errno.ENOTEMPTY, errno.EEXIST))
        with self.assertRaises(NotADirectoryError):
            os.rename(os.path.join(w, "src"), os.path.join(w, "file"))
        with self.assertRaises(IsADirectoryError):
            os.rename(os.path.join(w, "file"), os.path.join(w, "empty"))
        with self.assertRaises(OSError) as cm:
            os.rename(os.path.join(w, "src"), os.path.join(w, "src", "inner", "x"))
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        os.rename(os.path.join(w, "src"), os.path.join(w, "empty"))
        self.assertFalse(os.path.exists(os.path.join(w, "src")))
        self.assertEqual(read_file(os.path.join(w, "empty", "f")), b"srcfile")
        self.assertTrue(os.path.isdir(os.path.join(w, "empty", "inner")))
        # Moving a directory into another updates '..'.
        os.rename(os.path.join(w, "empty"), os.path.join(w, "full", "moved"))
        self.assertEqual(os.stat(os.path.join(w, "full", "moved", "..")).st_ino, os.stat(os.path.join(w, "full")).st_ino)
        self.assertEqual(read_file(os.path.join(w, "full", "moved", "f")), b"srcfile")
        self.assertEqual(sorted(os.listdir(w)), ["file", "full"])

    def test_no_exdev_inside_the_volume(self):
        # One volume is one file system: moves, links and copies between any two of its
        # directories never fail with EXDEV, so `mv` renames instead of copying.
        w = self.work
        os.makedirs(os.path.join(w, "a", "deep", "er"))
        os.makedirs(os.path.join(w, "b"))
        write_file(os.path.join(w, "a", "deep", "er", "f"), b"payload")
        ino = os.stat(os.path.join(w, "a", "deep", "er", "f")).st_ino
        os.rename(os.path.join(w, "a", "deep", "er", "f"), os.path.join(w, "b", "f"))
        os.link(os.path.join(w, "b", "f"), os.path.join(w, "a", "link"))
        os.rename(os.path.join(w, "a", "deep"), os.path.join(w, "b", "deep"))
        self.assertEqual(os.stat(os.path.join(w, "a", "link")).st_ino, ino, "a rename keeps the inode")
        with open(os.path.join(w, "b", "f"), "rb") as src, open(os.path.join(w, "a", "copy"), "wb") as dst:
            self.assertEqual(os.copy_file_range(src.fileno(), dst.fileno(), 7), 7)
        res = harness.run("mv", os.path.join(w, "b", "deep"), os.path.join(w, "a", "moved"))
        self.assertEqual(res[0], 0, harness.msg(*res))
        self.assertTrue(os.path.isdir(os.path.join(w, "a", "moved", "er")))
        self.assertEqual(read_file(os.path.join(w, "a", "copy")), b"payload")

    def test_renameat2_noreplace(self):
        a, b, c = (os.path.join(self.work, n) for n in "abc")
        write_file(a, b"A")
        write_file(b, b"B")
        with self.assertRaises(OSError) as cm:
            renameat2(a, b, RENAME_NOREPLACE)
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        self.assertEqual(read_file(a), b"A")
        self.assertEqual(read_file(b), b"B")
        renameat2(a, c, RENAME_NOREPLACE)
        self.assertFalse(os.path.exists(a))
        self.assertEqual(read_file(c), b"A")

    def test_renameat2_exchange(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        write_file(a, b"AAA")
        write_file(b, b"BBBBB")
        ia, ib = os.stat(a).st_ino, os.stat(b).st_ino
        renameat2(a, b, RENAME_EXCHANGE)
        self.assertEqual(read_file(a), b"BBBBB")
        self.assertEqual(read_file(b), b"AAA")
        self.assertEqual((os.stat(a).st_ino, os.stat(b).st_ino), (ib, ia))
        # File <-> directory in different parents.
        d = os.path.join(self.work, "dir")
        os.mkdir(d)
        os.mkdir(os.path.join(d, "sub"))
        write_file(os.path.join(d, "sub", "inside"), b"in")
        renameat2(a, os.path.join(d, "sub"), RENAME_EXCHANGE)
        self.assertTrue(os.path.isdir(a))
        self.assertEqual(read_file(os.path.join(a, "inside")), b"in")
        self.assertEqual(read_file(os.path.join(d, "sub")), b"BBBBB")
        self.assertEqual(os.stat(a + "/..").st_ino, os.stat(self.work).st_ino)
        with self.assertRaises(FileNotFoundError):
            renameat2(b, os.path.join(self.work, "missing"), RENAME_EXCHANGE)
        self.assertEqual(read_file(b), b"AAA")

    def test_hard_links(self):
        a = os.path.join(self.work, "a")
        write_file(a, b"shared")
        os.mkdir(os.path.join(self.work, "d"))
        b = os.path.join(self.work, "d", "b")
        os.link(a, b)
        sa, sb = os.stat(a), os.stat(b)
        self.assertEqual(sa.st_ino, sb.st_ino)
        self.assertEqual(sa.st_nlink, 2)
        c = os.path.join(self.work, "c")
        os.link(b, c)
        self.assertEqual(os.stat(a).st_nlink, 3)
        with open(c, "ab") as f:
            f.write(b"+more")
        self.assertEqual(read_file(a), b"shared+more")
        self.assertEqual(read_file(b), b"shared+more")
        with self.assertRaises(FileExistsError):
            os.link(a, c)
        with self.assertRaises(OSError) as cm:
            os.link(os.path.join(self.work, "d"), os.path.join(self.work, "dlink"))
        self.assertIn(cm.exception.errno, (errno.EPERM, errno.EISDIR))
        os.unlink(a)
        self.assertEqual(os.stat(b).st_nlink, 2)
        os.unlink(c)
        self.assertEqual(os.stat(b).st_nlink, 1)
        self.assertEqual(read_file(b), b"shared+more")
        os.chmod(b, 0o600)
        os.link(b, a)
        self.assertEqual(stat.S_IMODE(os.stat(a).st_mode), 0o600)

    def test_symlink_readlink(self):
        w = self.work
        write_file(os.path.join(w, "target"), b"T")
        os.symlink("target", os.path.join(w, "rel"))
        os.symlink("../" + os.path.basename(w) + "/target", os.path.join(w, "up"))
        os.symlink("nowhere/at/all", os.path.join(w, "dangling"))
        longt = "x/" * 1000 + "end"
        os.symlink(longt, os.path.join(w, "long"))
        self.assertEqual(os.readlink(os.path.join(w, "rel")), "target")
        self.assertEqual(os.readlink(os.path.join(w, "long")), longt)
        st = os.lstat(os.path.join(w, "rel"))
        self.assertTrue(stat.S_ISLNK(st.st_mode))
        self.assertEqual(st.st_size, len("target"))
        self.assertEqual(read_file(os.path.join(w, "rel")), b"T")
        self.assertEqual(read_file(os.path.join(w, "up")), b"T")
        with self.assertRaises(FileNotFoundError):
            os.stat(os.path.join(w, "dangling"))
        self.assertTrue(os.path.islink(os.path.join(w, "dangling")))
        with self.assertRaises(FileExistsError):
            os.symlink("x", os.path.join(w, "rel"))
        with self.assertRaises(OSError) as cm:
            os.readlink(os.path.join(w, "target"))
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        # A symlink to a directory traverses.
        os.mkdir(os.path.join(w, "realdir"))
        write_file(os.path.join(w, "realdir", "in"), b"in")
        os.symlink("realdir", os.path.join(w, "dirlink"))
        self.assertEqual(read_file(os.path.join(w, "dirlink", "in")), b"in")
        os.unlink(os.path.join(w, "dirlink"))
        self.assertTrue(os.path.isdir(os.path.join(w, "realdir")))

    def test_readdir_listing_and_types(self):
        w = self.work
        expect = {}
        for i in range(300):
            n = "file-%04d" % i
            write_file(os.path.join(w, n), b"")
            expect[n] = "f"
        for i in range(20):
            os.mkdir(os.path.join(w, "dir-%02d" % i))
            expect["dir-%02d" % i] = "d"
        for i in range(10):
            os.symlink("file-0000", os.path.join(w, "link-%d" % i))
            expect["link-%d" % i] = "l"
        seen = {}
        with os.scandir(w) as it:
            for e in it:
                self.assertNotIn(e.name, seen, "duplicate entry %s" % e.name)
                seen[e.name] = ("l" if e.is_symlink() else "d" if e.is_dir(follow_symlinks=False) else
                                "f" if e.is_file(follow_symlinks=False) else "?")
                self.assertEqual(e.inode(), os.lstat(e.path).st_ino, e.name)
        self.assertEqual(seen, expect)
        self.assertEqual(os.listdir(os.path.join(w, "dir-00")), [])

    def _read_all(self, d):
        out = []
        while True:
            ctypes.set_errno(0)
            pos = libc.telldir(d)
            ent = libc.readdir(d)
            if not ent:
                self.assertEqual(ctypes.get_errno(), 0, "readdir failed")
                return out
            name = ent.contents.d_name.decode()
            out.append((pos, name))

    def test_seekdir_telldir(self):
        w = self.work
        names = ["entry-with-a-longish-name-%05d" % i for i in range(1500)]
        for n in names:
            os.close(os.open(os.path.join(w, n), os.O_CREAT | os.O_WRONLY, 0o644))
        d = libc.opendir(os.fsencode(w))
        self.assertTrue(d)
        try:
            entries = self._read_all(d)
            listed = [n for _, n in entries if n not in (".", "..")]
            self.assertEqual(sorted(listed), sorted(names))
            self.assertEqual(len(listed), len(set(listed)))
            rng = random.Random(1234)
            for idx in [0, 1, len(entries) // 2, len(entries) - 1] + rng.sample(range(len(entries)), 10):
                libc.seekdir(d, entries[idx][0])
                rest = [n for _, n in self._read_all(d)]
                self.assertEqual(rest, [n for _, n in entries[idx:]],
                                 "seekdir to the cookie of entry %d does not resume there" % idx)
        finally:
            libc.closedir(d)

    def test_readdir_while_unlinking(self):
        w = self.work
        names = ["n%04d" % i for i in range(1200)]
        for n in names:
            os.close(os.open(os.path.join(w, n), os.O_CREAT | os.O_WRONLY, 0o644))
        d = libc.opendir(os.fsencode(w))
        try:
            seen = []
            removed = set()
            while True:
                ent = libc.readdir(d)
                if not ent:
                    break
                name = ent.contents.d_name.decode()
                if name in (".", ".."):
                    continue
                seen.append(name)
                if len(seen) % 3 == 0:
                    # Remove an entry already returned: entries not touched must still come
                    # exactly once.
                    os.unlink(os.path.join(w, name))
                    removed.add(name)
        finally:
            libc.closedir(d)
        self.assertEqual(len(seen), len(set(seen)), "readdir returned duplicates while entries were removed")
        self.assertEqual(set(seen), set(names))
        self.assertEqual(sorted(os.listdir(w)), sorted(set(names) - removed))


if __name__ == "__main__":
    harness.main()
