"""Persistence: a clean unmount/remount keeps everything; a kill -9 of the client keeps
every closed file."""

import errno
import os
import signal
import stat

import harness
from harness import diff_snapshots, is_mounted, make_tree, msg, pid_alive, run, snapshot, tierfs, wait_for


class RemountTest(harness.TierFSTestCase):
    def test_remount_keeps_everything(self):
        w = self.work
        make_tree(w, seed=21, nfiles=120, specials=True)
        # Hand-made cases on top of the generated tree.
        with open(os.path.join(w, "big"), "wb") as f:
            f.write(os.urandom(9 << 20))
        with open(os.path.join(w, "sparse"), "wb") as f:
            f.seek((70 << 20))
            f.write(b"end")
        open(os.path.join(w, "empty"), "wb").close()
        os.mkdir(os.path.join(w, "emptydir"))
        os.mkdir(os.path.join(w, "sticky"), 0o755)
        os.chmod(os.path.join(w, "sticky"), 0o1777)
        os.mkdir(os.path.join(w, "sgid"))
        os.chmod(os.path.join(w, "sgid"), 0o2750)
        os.chown(os.path.join(w, "sgid"), 1000, 1001)
        with open(os.path.join(w, "suid"), "wb") as f:
            f.write(b"#!/bin/sh\n")
        os.chmod(os.path.join(w, "suid"), 0o4755)
        os.chown(os.path.join(w, "empty"), 4242, 4343)
        for i in range(3):
            os.link(os.path.join(w, "big"), os.path.join(w, "biglink%d" % i))
        os.symlink("/absolute/target/path", os.path.join(w, "abs"))
        os.setxattr(os.path.join(w, "emptydir"), "user.dirattr", b"on a dir")
        os.setxattr(os.path.join(w, "big"), "user.bin", bytes(range(256)))
        os.mknod(os.path.join(w, "blk"), stat.S_IFBLK | 0o600, os.makedev(8, 17))
        # A file whose content is never read again (a read may update atime), kept outside
        # the snapshot.
        timed = self.work + "-timed"
        with open(timed, "wb") as f:
            f.write(b"t")
        os.utime(timed, ns=(111_222_333_444_555_666, 777_888_999_000_111_222))
        # Directory mtimes last: creating entries changes them.
        os.utime(w, ns=(1_500_000_000_123_456_789, 1_500_000_000_123_456_789))
        atime_before = os.stat(timed).st_atime_ns

        before = snapshot(w)
        statvfs_before = os.statvfs(self.mnt)
        self.vol.remount()
        after = snapshot(w)
        self.assertEqual(diff_snapshots(before, after)[:20], [])
        self.assertEqual(atime_before, 111_222_333_444_555_666)
        st = os.stat(timed)
        self.assertEqual((st.st_atime_ns, st.st_mtime_ns), (111_222_333_444_555_666, 777_888_999_000_111_222))
        sv = os.statvfs(self.mnt)
        self.assertEqual(sv.f_files - sv.f_ffree, statvfs_before.f_files - statvfs_before.f_ffree,
                         "inode count changed across remount")

        # Twice more, with changes in between.
        os.unlink(os.path.join(w, "biglink0"))
        os.rename(os.path.join(w, "emptydir"), os.path.join(w, "renameddir"))
        with open(os.path.join(w, "big"), "r+b") as f:
            f.seek(5 << 20)
            f.write(b"changed")
        before = snapshot(w)
        self.vol.remount()
        self.assertEqual(diff_snapshots(before, snapshot(w))[:20], [])
        self.assertEqual(os.stat(os.path.join(w, "big")).st_nlink, 3)
        self.vol.remount()
        self.assertEqual(diff_snapshots(before, snapshot(w))[:20], [])

    def test_open_unlinked_file_is_gone_after_remount(self):
        p = os.path.join(self.work, "tmp")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        os.write(fd, os.urandom(2 << 20))
        os.unlink(p)
        os.close(fd)
        self.vol.remount()
        self.assertEqual(os.listdir(self.work), [])


class KillTest(harness.TierFSTestCase):
    PER_TEST = True

    def kill_and_recover(self):
        pid = self.vol.pid
        self.assertIsNotNone(pid, "cannot find the mount daemon's pid")
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=60), "daemon survived SIGKILL")
        # The dead mount answers ENOTCONN until it is detached.
        with self.assertRaises(OSError) as cm:
            os.stat(os.path.join(self.mnt, "anything"))
        self.assertIn(cm.exception.errno, (errno.ENOTCONN, errno.ECONNABORTED))
        rc, out, err = run("fusermount3", "-uz", self.mnt)
        if is_mounted(self.mnt):
            run("umount", "-l", self.mnt)
        self.assertFalse(is_mounted(self.mnt), msg(rc, out, err))
        self.vol.mount()

    def test_kill9_keeps_closed_files(self):
        w = self.work
        make_tree(w, seed=31, nfiles=80)
        with open(os.path.join(w, "big"), "wb") as f:
            f.write(os.urandom(13 << 20))
        os.mkdir(os.path.join(w, "d"))
        os.rename(os.path.join(w, "big"), os.path.join(w, "d", "big"))
        before = snapshot(w)
        # An unfinished write in flight: its content is not promised, only consistency.
        fd = os.open(os.path.join(self.mnt, "in-flight"), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, os.urandom(3 << 20))
        try:
            self.kill_and_recover()
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
        after = snapshot(w)
        self.assertEqual(diff_snapshots(before, after)[:20], [])
        st = os.stat(os.path.join(self.mnt, "in-flight"))
        with open(os.path.join(self.mnt, "in-flight"), "rb") as f:
            self.assertEqual(len(f.read()), st.st_size)
        # The volume is fully usable: write, read, remount.
        with open(os.path.join(self.mnt, "after"), "wb") as f:
            f.write(b"after the crash" * 1000)
        self.vol.remount()
        with open(os.path.join(self.mnt, "after"), "rb") as f:
            self.assertEqual(f.read(), b"after the crash" * 1000)
        self.assertEqual(diff_snapshots(before, snapshot(w))[:20], [])

    def test_kill9_twice_and_status(self):
        with open(os.path.join(self.mnt, "one"), "wb") as f:
            f.write(b"1" * 100000)
        self.kill_and_recover()
        with open(os.path.join(self.mnt, "two"), "wb") as f:
            f.write(b"2" * 100000)
        self.kill_and_recover()
        with open(os.path.join(self.mnt, "one"), "rb") as f:
            self.assertEqual(f.read(), b"1" * 100000)
        with open(os.path.join(self.mnt, "two"), "rb") as f:
            self.assertEqual(f.read(), b"2" * 100000)
        st = self.vol.status_json()
        live = [s for s in st["sessions"] if int(s.get("pid", 0)) == self.vol.pid]
        self.assertEqual(len(live), 1, st)


if __name__ == "__main__":
    harness.main()
