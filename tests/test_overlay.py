"""What container runtimes and overlayfs need from a file system: O_TMPFILE (an unnamed
open file, named later with linkat, or gone at its last close), renameat2 with
RENAME_WHITEOUT, and a working overlay mount whose upper layer is on TierFS."""

import ctypes
import ctypes.util
import errno
import os
import stat

import harness

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_FOLLOW = 0x400
RENAME_WHITEOUT = 4
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]


def _check(ret):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def link_fd(fd, path):
    """Gives an open file a name, as `linkat(AT_FDCWD, "/proc/self/fd/N", ..., AT_SYMLINK_FOLLOW)`."""
    _check(_libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % fd, AT_FDCWD, os.fsencode(path), AT_SYMLINK_FOLLOW))


def renameat2(old, new, flags):
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags))


class TmpfileTest(harness.TierFSTestCase):
    def test_tmpfile_is_unnamed_until_linked(self):
        old = os.umask(0o022)
        try:
            fd = os.open(self.work, os.O_TMPFILE | os.O_RDWR, 0o666)
        finally:
            os.umask(old)
        try:
            os.write(fd, b"staged " * 1000)
            st = os.fstat(fd)
            self.assertEqual(st.st_nlink, 0)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
            self.assertEqual(os.listdir(self.work), [])
            final = os.path.join(self.work, "final")
            link_fd(fd, final)
            self.assertEqual(os.fstat(fd).st_nlink, 1)
            os.write(fd, b"more")
        finally:
            os.close(fd)
        self.assertEqual(os.listdir(self.work), ["final"])
        with open(final, "rb") as f:
            self.assertEqual(f.read(), b"staged " * 1000 + b"more")
        self.vol.remount()
        with open(final, "rb") as f:
            self.assertEqual(f.read(), b"staged " * 1000 + b"more")

    def test_tmpfile_rules(self):
        fd = os.open(self.work, os.O_TMPFILE | os.O_RDWR | os.O_EXCL, 0o600)
        try:
            with self.assertRaises(OSError) as cm:
                link_fd(fd, os.path.join(self.work, "never"))
            self.assertEqual(cm.exception.errno, errno.ENOENT, "O_EXCL: may not be linked")
        finally:
            os.close(fd)
        with self.assertRaises(OSError):
            os.open(os.path.join(self.work, "missing-dir"), os.O_TMPFILE | os.O_RDWR, 0o600)
        # Unnamed files leave nothing behind once closed: fsck finds no stray inode.
        for _ in range(3):
            fd = os.open(self.work, os.O_TMPFILE | os.O_WRONLY, 0o600)
            os.write(fd, os.urandom(300000))
            os.close(fd)
        self.assertEqual(os.listdir(self.work), [])
        self.vol.umount()
        rc, out, err = harness.tierfs("fsck", self.vol.meta_url)
        self.vol.mount()
        self.assertEqual(rc, 0, harness.msg(rc, out, err))


class WhiteoutTest(harness.TierFSTestCase):
    def test_rename_whiteout(self):
        a, b = os.path.join(self.work, "a"), os.path.join(self.work, "b")
        with open(a, "w") as f:
            f.write("moved")
        renameat2(a, b, RENAME_WHITEOUT)
        st = os.lstat(a)
        self.assertTrue(stat.S_ISCHR(st.st_mode))
        self.assertEqual(st.st_rdev, 0)
        with open(b) as f:
            self.assertEqual(f.read(), "moved")
        self.vol.remount()
        self.assertTrue(stat.S_ISCHR(os.lstat(a).st_mode))


class OverlayUpperTest(harness.TierFSTestCase):
    """An overlay mount with a local lower layer and its upper and work directories on
    TierFS: deletions become whiteouts, changes copy up, everything survives a remount of
    both."""

    def mount_overlay(self, lower, upper, work, merged):
        self.assertOk(harness.run("mount", "-t", "overlay", "overlay", "-o",
                                  "lowerdir=%s,upperdir=%s,workdir=%s" % (lower, upper, work), merged),
                      "mount -t overlay")
        self.addCleanup(lambda: harness.is_mounted(merged) and harness.run("umount", merged))

    def test_overlay_with_upper_on_tierfs(self):
        local = self.local_tmpdir()
        lower, merged = os.path.join(local, "lower"), os.path.join(local, "merged")
        os.makedirs(os.path.join(lower, "dir"))
        os.mkdir(merged)
        for name, data in (("keep", "k"), ("gone", "g"), ("edit", "lower\n"), ("dir/inner", "i")):
            with open(os.path.join(lower, name), "w") as f:
                f.write(data)
        upper, work = os.path.join(self.work, "upper"), os.path.join(self.work, "work")
        os.mkdir(upper)
        os.mkdir(work)
        self.mount_overlay(lower, upper, work, merged)
        os.unlink(os.path.join(merged, "gone"))
        with open(os.path.join(merged, "edit"), "a") as f:
            f.write("upper\n")
        harness.run("rm", "-rf", os.path.join(merged, "dir"))
        os.mkdir(os.path.join(merged, "dir"))
        with open(os.path.join(merged, "dir", "new"), "w") as f:
            f.write("n")
        want = {"keep": "k", "edit": "lower\nupper\n", "dir/new": "n"}

        def check():
            self.assertEqual(sorted(os.listdir(merged)), ["dir", "edit", "keep"])
            self.assertEqual(os.listdir(os.path.join(merged, "dir")), ["new"])
            for name, data in want.items():
                with open(os.path.join(merged, name)) as f:
                    self.assertEqual(f.read(), data, name)
        check()
        # The upper layer holds a whiteout for the deleted file and the copied-up file.
        self.assertTrue(stat.S_ISCHR(os.lstat(os.path.join(upper, "gone")).st_mode))
        with open(os.path.join(upper, "edit")) as f:
            self.assertEqual(f.read(), "lower\nupper\n")
        self.assertOk(harness.run("umount", merged), "umount overlay")
        self.vol.remount()
        self.mount_overlay(lower, upper, work, merged)
        check()
        self.assertOk(harness.run("umount", merged), "umount overlay")


if __name__ == "__main__":
    harness.main()
