"""Timestamps change on exactly the operations that change them on Linux, and the rules
for setting them: any user with write access may set them to now; only the owner (or root)
may set explicit times. Reads update atime as Linux's relatime does (the default), on every
read with -o strictatime, never with -o noatime; the times survive a remount."""

import os
import time

import harness

NOW = getattr(os, "UTIME_NOW", None)


def st(p):
    return os.lstat(p)


class TimestampTest(harness.TierFSTestCase):
    PER_TEST = False
    MOUNT_ARGS = ["-o", "allow_other"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Other users must reach the mount point (the volume lives in a private temp dir).
        os.chmod(cls.vol.dir, 0o755)

    def tick(self):
        time.sleep(0.02)

    def mkfile(self, name, data=b"data"):
        p = os.path.join(self.work, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_write_and_truncate(self):
        p = self.mkfile("w")
        a = st(p)
        self.tick()
        with open(p, "r+b") as f:
            f.write(b"more")
        b = st(p)
        self.assertGreater(b.st_mtime_ns, a.st_mtime_ns)
        self.assertGreater(b.st_ctime_ns, a.st_ctime_ns)
        self.assertEqual(b.st_atime_ns, a.st_atime_ns)
        self.tick()
        os.truncate(p, 1)
        c = st(p)
        self.assertGreater(c.st_mtime_ns, b.st_mtime_ns)
        self.assertGreater(c.st_ctime_ns, b.st_ctime_ns)
        self.tick()
        with open(p, "rb") as f:
            f.read()
        self.assertGreater(st(p).st_atime_ns, c.st_mtime_ns, "relatime: a read after a change updates atime")

    def test_chmod_chown_change_only_ctime(self):
        p = self.mkfile("c")
        a = st(p)
        self.tick()
        os.chmod(p, 0o600)
        b = st(p)
        self.assertEqual(b.st_mtime_ns, a.st_mtime_ns)
        self.assertGreater(b.st_ctime_ns, a.st_ctime_ns)
        self.tick()
        os.chown(p, 1234, 1234)
        c = st(p)
        self.assertEqual(c.st_mtime_ns, a.st_mtime_ns)
        self.assertGreater(c.st_ctime_ns, b.st_ctime_ns)

    def test_link_unlink_rename_touch_parents(self):
        d1 = os.path.join(self.work, "d1")
        d2 = os.path.join(self.work, "d2")
        os.mkdir(d1)
        os.mkdir(d2)
        p = os.path.join(d1, "f")
        with open(p, "wb") as f:
            f.write(b"x")
        f0, d10, d20 = st(p), st(d1), st(d2)
        self.tick()
        os.link(p, os.path.join(d2, "l"))
        f1, d21 = st(p), st(d2)
        self.assertGreater(f1.st_ctime_ns, f0.st_ctime_ns, "link changes the file's ctime")
        self.assertEqual(f1.st_mtime_ns, f0.st_mtime_ns)
        self.assertGreater(d21.st_mtime_ns, d20.st_mtime_ns, "link changes the new parent's mtime")
        self.tick()
        os.rename(p, os.path.join(d2, "moved"))
        f2, d12, d22 = st(os.path.join(d2, "moved")), st(d1), st(d2)
        self.assertGreater(f2.st_ctime_ns, f1.st_ctime_ns, "rename changes the inode's ctime")
        self.assertGreater(d12.st_mtime_ns, d10.st_mtime_ns, "rename changes the old parent's mtime")
        self.assertGreater(d22.st_mtime_ns, d21.st_mtime_ns, "rename changes the new parent's mtime")
        self.tick()
        os.unlink(os.path.join(d2, "l"))
        f3, d23 = st(os.path.join(d2, "moved")), st(d2)
        self.assertGreater(f3.st_ctime_ns, f2.st_ctime_ns, "unlink of one link changes the inode's ctime")
        self.assertGreater(d23.st_mtime_ns, d22.st_mtime_ns)
        self.assertGreater(d23.st_ctime_ns, d22.st_ctime_ns)

    def test_utimensat_now_and_omit(self):
        p = self.mkfile("u")
        os.utime(p, ns=(1_000_000_000, 2_000_000_000))
        a = st(p)
        self.assertEqual((a.st_atime_ns, a.st_mtime_ns), (1_000_000_000, 2_000_000_000))
        # UTIME_OMIT for atime, UTIME_NOW for mtime, through utimensat via ctypes.
        import ctypes
        import ctypes.util
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
        UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
        ts = (Timespec * 2)(Timespec(0, UTIME_OMIT), Timespec(0, UTIME_NOW))
        before = time.time_ns()
        self.assertEqual(libc.utimensat(-100, os.fsencode(p), ts, 0), 0, os.strerror(ctypes.get_errno()))
        b = st(p)
        self.assertEqual(b.st_atime_ns, 1_000_000_000, "UTIME_OMIT changed atime")
        self.assertGreaterEqual(b.st_mtime_ns, before - 1_000_000_000)

    def test_who_may_set_times(self):
        p = self.mkfile("perm")
        os.chmod(p, 0o666)  # writable by everyone, owned by root
        ro = self.mkfile("ro")
        os.chmod(ro, 0o644)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.setgid(1000)
                os.setuid(1000)
                os.utime(p, None)  # now: allowed with write access
                try:
                    os.utime(p, ns=(5, 5))
                    code = 10  # explicit times by a non-owner must fail
                except PermissionError as e:
                    code = 0 if e.errno == 1 else 11  # EPERM
                if code == 0:
                    try:
                        os.utime(ro, None)
                        code = 12
                    except PermissionError as e:
                        code = 0 if e.errno == 13 else 13  # EACCES
            except Exception as e:
                print("child failed:", repr(e), flush=True)
                code = 20
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0,
                         "10: explicit times allowed; 11: wrong errno; 12: now allowed without write; 13: wrong errno")


class AtimeTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def volume(self, *mount_args):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount(*mount_args)
        p = vol.path("f")
        with open(p, "wb") as f:
            f.write(b"data" * 1000)
        return vol, p

    def read(self, p):
        with open(p, "rb") as f:
            self.assertEqual(len(f.read()), 4000)
        return st(p).st_atime_ns

    def test_relatime_is_the_default(self):
        vol, p = self.volume()
        made = st(p)
        time.sleep(0.02)
        first = self.read(p)
        self.assertGreater(first, made.st_mtime_ns, "the first read after a change updates atime")
        time.sleep(0.02)
        self.assertEqual(self.read(p), first, "a later read (atime after mtime and ctime, recent) leaves it")
        time.sleep(0.02)
        with open(p, "r+b") as f:
            f.write(b"DATA")
        changed = st(p)
        self.assertEqual(changed.st_atime_ns, first, "writing is no access")
        time.sleep(0.02)
        again = self.read(p)
        self.assertGreater(again, changed.st_mtime_ns)
        # Written to the volume: the next mount shows it.
        vol.remount()
        self.assertEqual(st(p).st_atime_ns, again)
        # An explicit atime (touch -a -d) stays until the next read due by the rule.
        old = again - 5 * 24 * 3600 * 10**9
        os.utime(p, ns=(old, changed.st_mtime_ns))
        self.assertEqual(st(p).st_atime_ns, old)
        self.assertGreater(self.read(p), again)  # ctime moved past atime with the utime

    def test_noatime_and_strictatime(self):
        vol, p = self.volume("-o", "noatime")
        made = st(p)
        time.sleep(0.02)
        self.assertEqual(self.read(p), made.st_atime_ns, "noatime")
        vol.umount()
        vol.mount("-o", "strictatime")
        first = self.read(p)
        self.assertGreater(first, made.st_atime_ns)
        time.sleep(0.02)
        second = self.read(p)
        self.assertGreater(second, first, "strictatime: every read")
        vol.remount()
        self.assertEqual(st(p).st_atime_ns, second)


if __name__ == "__main__":
    harness.main()
