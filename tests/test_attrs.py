"""Inode attributes (mode, owner, size, times), extended attributes and special file types
(fifos, sockets, device nodes) through real syscalls on a mounted volume."""

import errno
import os
import socket
import stat
import threading
import time

import harness
from test_posix_ops import UTIME_NOW, UTIME_OMIT, read_file, utimensat, write_file

os.umask(0o022)


class AttrTest(harness.TierFSTestCase):
    def test_chmod(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        for mode in (0o600, 0o755, 0o4755, 0o2711, 0o1777, 0o000, 0o7777):
            os.chmod(p, mode)
            self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), mode, oct(mode))
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        os.chmod(d, 0o1777)
        st = os.stat(d)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o1777)
        self.assertTrue(stat.S_ISDIR(st.st_mode))

    def test_chmod_changes_ctime_not_mtime(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))
        c0 = os.stat(p).st_ctime_ns
        os.chmod(p, 0o640)
        st = os.stat(p)
        self.assertEqual(st.st_mtime_ns, 1_000_000_000)
        self.assertGreaterEqual(st.st_ctime_ns, c0)

    def test_chown(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.chown(p, 1000, 1001)
        st = os.stat(p)
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1001))
        os.chown(p, -1, 2002)
        st = os.stat(p)
        self.assertEqual((st.st_uid, st.st_gid), (1000, 2002))
        os.chown(p, 3003, -1)
        st = os.stat(p)
        self.assertEqual((st.st_uid, st.st_gid), (3003, 2002))
        os.symlink("f", os.path.join(self.work, "l"))
        os.lchown(os.path.join(self.work, "l"), 4004, 4004)
        self.assertEqual(os.lstat(os.path.join(self.work, "l")).st_uid, 4004)
        self.assertEqual(os.stat(p).st_uid, 3003)

    def test_chown_clears_setuid(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.chmod(p, 0o6755)
        os.chown(p, 1000, 1000)
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode) & 0o4000, 0, "chown must clear the setuid bit")

    def test_truncate(self):
        p = os.path.join(self.work, "f")
        data = os.urandom(2 << 20)
        write_file(p, data)
        os.truncate(p, 1000)
        self.assertEqual(os.stat(p).st_size, 1000)
        self.assertEqual(read_file(p), data[:1000])
        os.truncate(p, 5 << 20)
        out = read_file(p)
        self.assertEqual(len(out), 5 << 20)
        self.assertEqual(out[:1000], data[:1000])
        self.assertEqual(out[1000:], bytes((5 << 20) - 1000), "extending truncate must read as zeros")
        fd = os.open(p, os.O_RDWR)
        os.ftruncate(fd, 10)
        self.assertEqual(os.fstat(fd).st_size, 10)
        os.close(fd)
        self.assertEqual(read_file(p), data[:10])
        os.truncate(p, 0)
        self.assertEqual(read_file(p), b"")

    def test_utime_exact(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.utime(p, ns=(1_234_567_890_123_456_789, 987_654_321_987_654_321))
        st = os.stat(p)
        self.assertEqual(st.st_atime_ns, 1_234_567_890_123_456_789)
        self.assertEqual(st.st_mtime_ns, 987_654_321_987_654_321)
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        os.utime(d, ns=(5_000_000_001, 6_000_000_002))
        self.assertEqual(os.stat(d).st_mtime_ns, 6_000_000_002)
        os.symlink("f", os.path.join(self.work, "l"))
        os.utime(os.path.join(self.work, "l"), ns=(7_000_000_003, 8_000_000_004), follow_symlinks=False)
        self.assertEqual(os.lstat(os.path.join(self.work, "l")).st_mtime_ns, 8_000_000_004)
        self.assertEqual(os.stat(p).st_mtime_ns, 987_654_321_987_654_321)

    def test_utime_before_close_sticks(self):
        # cp -a and tar set times on the open descriptor after writing, then close.
        p = os.path.join(self.work, "f")
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, os.urandom(300000))
            os.utime(fd, ns=(1_111_111_111_000_000_001, 1_222_222_222_000_000_002))
        finally:
            os.close(fd)
        st = os.stat(p)
        self.assertEqual(st.st_mtime_ns, 1_222_222_222_000_000_002, "close after futimens changed mtime")
        self.assertEqual(st.st_atime_ns, 1_111_111_111_000_000_001)
        # The same through the path while the file is still open for writing.
        fd = os.open(p, os.O_WRONLY)
        try:
            os.pwrite(fd, b"more", 10)
            os.utime(p, ns=(5_000_000_000, 6_000_000_000))
        finally:
            os.close(fd)
        self.assertEqual(os.stat(p).st_mtime_ns, 6_000_000_000)
        # Whatever the client still does with the written data in the background must not
        # overwrite the times set afterwards: check again once a remount has flushed it all.
        q = os.path.join(self.work, "g")
        fd = os.open(q, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, os.urandom(200000))
            os.utime(fd, ns=(3_000_000_000, 4_000_000_000))
        finally:
            os.close(fd)
        self.vol.remount()
        self.assertEqual(os.stat(p).st_mtime_ns, 6_000_000_000, "mtime changed after close (seen after remount)")
        self.assertEqual(os.stat(q).st_mtime_ns, 4_000_000_000, "mtime changed after close (seen after remount)")

    def test_utimensat_now_and_omit(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        utimensat(p, (100, 111), (200, 222))
        st = os.stat(p)
        self.assertEqual((st.st_atime_ns, st.st_mtime_ns), (100_000_000_111, 200_000_000_222))
        utimensat(p, UTIME_OMIT, (300, 333))
        st = os.stat(p)
        self.assertEqual((st.st_atime_ns, st.st_mtime_ns), (100_000_000_111, 300_000_000_333))
        utimensat(p, (400, 444), UTIME_OMIT)
        st = os.stat(p)
        self.assertEqual((st.st_atime_ns, st.st_mtime_ns), (400_000_000_444, 300_000_000_333))
        before = time.time_ns()
        utimensat(p, UTIME_NOW, UTIME_OMIT)
        after = time.time_ns()
        st = os.stat(p)
        self.assertEqual(st.st_mtime_ns, 300_000_000_333)
        # "now" is the current time, not the value 2^30-1 or an old time.
        self.assertGreaterEqual(st.st_atime_ns, before - 1_000_000_000)
        self.assertLessEqual(st.st_atime_ns, after + 1_000_000_000)
        utimensat(p, UTIME_OMIT, UTIME_NOW)
        st = os.stat(p)
        self.assertGreaterEqual(st.st_mtime_ns, before - 1_000_000_000)
        self.assertLessEqual(st.st_mtime_ns, time.time_ns() + 1_000_000_000)

    def test_write_updates_mtime(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))
        with open(p, "ab") as f:
            f.write(b"y")
        self.assertGreater(os.stat(p).st_mtime_ns, 1_000_000_000)
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))
        os.truncate(p, 0)
        self.assertGreater(os.stat(p).st_mtime_ns, 1_000_000_000)

    def test_create_updates_dir_mtime(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        os.utime(d, ns=(1_000_000_000, 1_000_000_000))
        write_file(os.path.join(d, "f"), b"")
        self.assertGreater(os.stat(d).st_mtime_ns, 1_000_000_000)
        os.utime(d, ns=(1_000_000_000, 1_000_000_000))
        os.unlink(os.path.join(d, "f"))
        self.assertGreater(os.stat(d).st_mtime_ns, 1_000_000_000)

    def test_setgid_directory_inheritance(self):
        d = os.path.join(self.work, "sgid")
        os.mkdir(d)
        os.chown(d, -1, 1234)
        os.chmod(d, 0o2775)
        self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o2775)
        write_file(os.path.join(d, "f"), b"x")
        st = os.stat(os.path.join(d, "f"))
        self.assertEqual(st.st_gid, 1234, "file in a setgid dir must take the directory's gid")
        self.assertEqual(st.st_uid, 0)
        os.mkdir(os.path.join(d, "sub"))
        st = os.stat(os.path.join(d, "sub"))
        self.assertEqual(st.st_gid, 1234)
        self.assertTrue(st.st_mode & stat.S_ISGID, "subdirectory must inherit the setgid bit")
        os.mkdir(os.path.join(d, "sub", "deeper"))
        st = os.stat(os.path.join(d, "sub", "deeper"))
        self.assertEqual(st.st_gid, 1234)
        self.assertTrue(st.st_mode & stat.S_ISGID)
        os.mknod(os.path.join(d, "fifo"), stat.S_IFIFO | 0o644)
        self.assertEqual(os.stat(os.path.join(d, "fifo")).st_gid, 1234)
        os.symlink("f", os.path.join(d, "ln"))
        self.assertEqual(os.lstat(os.path.join(d, "ln")).st_gid, 1234)
        # Without setgid: creator's gid.
        plain = os.path.join(self.work, "plain")
        os.mkdir(plain)
        os.chown(plain, -1, 1234)
        write_file(os.path.join(plain, "f"), b"x")
        self.assertEqual(os.stat(os.path.join(plain, "f")).st_gid, 0)


class XattrTest(harness.TierFSTestCase):
    def test_set_get_list_remove(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        self.assertEqual([a for a in os.listxattr(p) if a.startswith("user.")], [])
        os.setxattr(p, "user.one", b"1")
        os.setxattr(p, "user.two", b"\x00binary\xff\x00")
        os.setxattr(p, "user.empty", b"")
        self.assertEqual(os.getxattr(p, "user.one"), b"1")
        self.assertEqual(os.getxattr(p, "user.two"), b"\x00binary\xff\x00")
        self.assertEqual(os.getxattr(p, "user.empty"), b"")
        self.assertEqual(sorted(a for a in os.listxattr(p) if a.startswith("user.")),
                         ["user.empty", "user.one", "user.two"])
        os.setxattr(p, "user.one", b"uno")
        self.assertEqual(os.getxattr(p, "user.one"), b"uno")
        os.removexattr(p, "user.one")
        with self.assertRaises(OSError) as cm:
            os.getxattr(p, "user.one")
        self.assertEqual(cm.exception.errno, errno.ENODATA)
        with self.assertRaises(OSError) as cm:
            os.removexattr(p, "user.one")
        self.assertEqual(cm.exception.errno, errno.ENODATA)
        self.assertEqual(sorted(a for a in os.listxattr(p) if a.startswith("user.")), ["user.empty", "user.two"])

    def test_create_replace_flags(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        os.setxattr(p, "user.k", b"v1", os.XATTR_CREATE)
        with self.assertRaises(OSError) as cm:
            os.setxattr(p, "user.k", b"v2", os.XATTR_CREATE)
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        self.assertEqual(os.getxattr(p, "user.k"), b"v1")
        os.setxattr(p, "user.k", b"v3", os.XATTR_REPLACE)
        self.assertEqual(os.getxattr(p, "user.k"), b"v3")
        with self.assertRaises(OSError) as cm:
            os.setxattr(p, "user.missing", b"v", os.XATTR_REPLACE)
        self.assertEqual(cm.exception.errno, errno.ENODATA)
        self.assertNotIn("user.missing", os.listxattr(p))

    def test_large_and_many(self):
        p = os.path.join(self.work, "f")
        write_file(p, b"x")
        big = os.urandom(60000)
        os.setxattr(p, "user.big", big)
        self.assertEqual(os.getxattr(p, "user.big"), big)
        for i in range(100):
            os.setxattr(p, "user.k%03d" % i, ("v%d" % i).encode())
        names = [a for a in os.listxattr(p) if a.startswith("user.k")]
        self.assertEqual(sorted(names), ["user.k%03d" % i for i in range(100)])
        self.assertEqual(os.getxattr(p, "user.k042"), b"v42")

    def test_limits_and_namespaces_match_linux(self):
        p = os.path.join(self.work, "limits")
        write_file(p, b"x")
        os.setxattr(p, "user.max", b"v" * 65536)            # XATTR_SIZE_MAX
        self.assertEqual(len(os.getxattr(p, "user.max")), 65536)
        with self.assertRaises(OSError) as cm:
            os.setxattr(p, "user.over", b"v" * 65537)
        self.assertEqual(cm.exception.errno, errno.E2BIG)
        os.setxattr(p, "user." + "n" * 250, b"1")           # 255-byte name
        with self.assertRaises(OSError) as cm:
            os.setxattr(p, "user." + "n" * 251, b"1")
        self.assertEqual(cm.exception.errno, errno.ERANGE)
        for ns in ("trusted.t", "security.s"):              # root may use both
            os.setxattr(p, ns, b"1")
            self.assertEqual(os.getxattr(p, ns), b"1")
        for name, err in (("foo.bar", errno.EOPNOTSUPP), ("user.", errno.EINVAL), ("trusted.", errno.EINVAL)):
            with self.assertRaises(OSError, msg=name) as cm:
                os.setxattr(p, name, b"1")
            self.assertEqual(cm.exception.errno, err, name)
            with self.assertRaises(OSError, msg=name) as cm:
                os.getxattr(p, name)
            self.assertIn(cm.exception.errno, (err, errno.ENODATA), name)

    def test_directory_xattr_and_missing(self):
        d = os.path.join(self.work, "d")
        os.mkdir(d)
        os.setxattr(d, "user.dir", b"yes")
        self.assertEqual(os.getxattr(d, "user.dir"), b"yes")
        with self.assertRaises(FileNotFoundError):
            os.getxattr(os.path.join(self.work, "missing"), "user.x")
        with self.assertRaises(OSError) as cm:
            os.getxattr(d, "user.none")
        self.assertEqual(cm.exception.errno, errno.ENODATA)

    def test_xattr_follows_hard_link_and_survives_rename(self):
        a = os.path.join(self.work, "a")
        write_file(a, b"x")
        os.setxattr(a, "user.tag", b"t")
        os.link(a, os.path.join(self.work, "b"))
        self.assertEqual(os.getxattr(os.path.join(self.work, "b"), "user.tag"), b"t")
        os.rename(a, os.path.join(self.work, "c"))
        self.assertEqual(os.getxattr(os.path.join(self.work, "c"), "user.tag"), b"t")


class SpecialFilesTest(harness.TierFSTestCase):
    def test_fifo(self):
        p = os.path.join(self.work, "fifo")
        os.mkfifo(p, 0o640)
        st = os.stat(p)
        self.assertTrue(stat.S_ISFIFO(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o640)
        got = []

        def reader():
            with open(p, "rb") as f:
                got.append(f.read())
        t = threading.Thread(target=reader)
        t.start()
        with open(p, "wb") as f:
            f.write(b"through the fifo")
        t.join(30)
        self.assertFalse(t.is_alive())
        self.assertEqual(got, [b"through the fifo"])
        os.mknod(os.path.join(self.work, "fifo2"), stat.S_IFIFO | 0o600)
        self.assertTrue(stat.S_ISFIFO(os.stat(os.path.join(self.work, "fifo2")).st_mode))

    def test_unix_socket(self):
        p = os.path.join(self.work, "sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            srv.bind(p)
            srv.listen(1)
            self.assertTrue(stat.S_ISSOCK(os.stat(p).st_mode))
            cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            cli.settimeout(30)
            cli.connect(p)
            conn, _ = srv.accept()
            cli.sendall(b"ping")
            self.assertEqual(conn.recv(4), b"ping")
            conn.close()
            cli.close()
        finally:
            srv.close()
        self.assertTrue(stat.S_ISSOCK(os.lstat(p).st_mode))
        os.unlink(p)
        self.assertFalse(os.path.lexists(p))

    def test_device_nodes(self):
        c = os.path.join(self.work, "chr")
        b = os.path.join(self.work, "blk")
        os.mknod(c, stat.S_IFCHR | 0o640, os.makedev(1, 3))
        os.mknod(b, stat.S_IFBLK | 0o660, os.makedev(7, 42))
        sc, sb = os.lstat(c), os.lstat(b)
        self.assertTrue(stat.S_ISCHR(sc.st_mode))
        self.assertTrue(stat.S_ISBLK(sb.st_mode))
        self.assertEqual((os.major(sc.st_rdev), os.minor(sc.st_rdev)), (1, 3))
        self.assertEqual((os.major(sb.st_rdev), os.minor(sb.st_rdev)), (7, 42))
        self.assertEqual(stat.S_IMODE(sc.st_mode), 0o640)
        big = os.path.join(self.work, "bigdev")
        os.mknod(big, stat.S_IFCHR | 0o600, os.makedev(300, 70000))
        sbig = os.lstat(big)
        self.assertEqual((os.major(sbig.st_rdev), os.minor(sbig.st_rdev)), (300, 70000))
        os.rename(c, c + "2")
        self.assertEqual(os.lstat(c + "2").st_rdev, sc.st_rdev)

    def test_regular_mknod(self):
        p = os.path.join(self.work, "reg")
        os.mknod(p, stat.S_IFREG | 0o604)
        st = os.stat(p)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_size, 0)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o604)


if __name__ == "__main__":
    harness.main()
