"""FUSE over io_uring (issue "Fast paths", item 4; fuse/uring_queues.h).

`mount --io-uring` takes requests through one io_uring queue per CPU instead of reading
/dev/fuse, where the kernel offers it (Linux 6.14+, enable_uring on). Checked here with
real syscalls and tools on a mount with the queues running:
- the requests come through the queues (their counter grows; the daemon logs the queues)
  and every kind of request works: a source tree copied and compared, a large file
  written and read back after the page cache is dropped, mmap, O_TMPFILE (a request
  TierFS answers raw), xattrs, renames, and what is replied from another thread than the
  queue's: an O_DIRECT write (replied after its pages are dropped) and a blocking flock
  (replied by a waiter thread once the holder lets go);
- another local user's requests carry that user's ids: EACCES on a 0600 file, a 0644
  one readable;
- a daemon killed with SIGKILL while a reader loops leaves an error for the reader, not a
  hang; the volume mounts again and serves the data;
- off by default, and with the kernel's offer withheld (simulated: the same path as a
  kernel without it, or enable_uring off) the mount falls back to /dev/fuse and says so.
The POSIX suites, fsx and the lock tests run again with --io-uring (ctest's *_uring
tests, TIERFS_TEST_MOUNT_ARGS).
"""

import ctypes
import fcntl
import filecmp
import json
import mmap
import os
import signal
import subprocess
import threading
import time
import unittest

import harness
from harness import Volume

MiB = 1 << 20
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def uring_requests(mnt):
    return stats(mnt)["metrics"].get("tierfs_fuse_uring_requests_total", 0)


class UringTestCase(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        if not harness.enable_fuse_uring():
            raise unittest.SkipTest("this kernel has no FUSE over io_uring (Linux 6.14+, %s)" % harness.URING_PARAM)
        self.v = Volume()
        self.addCleanup(self.v.cleanup)
        self.v.format()

    def mount_uring(self, *extra):
        self.v.mount("--io-uring", *extra)
        # The kernel switches once every queue registered: wait for the first request.
        deadline = time.time() + 10
        while time.time() < deadline and uring_requests(self.v.mnt) == 0:
            os.stat(self.v.mnt)
            time.sleep(0.05)
        self.assertGreater(uring_requests(self.v.mnt), 0, "no request came through the queues")
        line = "FUSE over io_uring: %d queues" % os.sysconf("SC_NPROCESSORS_CONF")
        harness.wait_for(lambda: line in self.v.log_tail(), timeout=10)  # the log is flushed now and then
        self.assertIn(line, self.v.log_tail())


class QueuesTest(UringTestCase):
    def test_every_kind_of_request_through_the_queues(self):
        self.mount_uring()
        mnt = self.v.mnt
        before = uring_requests(mnt)
        # A source tree: mkdir, create, write, getattr, readdir, read.
        subprocess.run(["cp", "-r", SRC, os.path.join(mnt, "src")], check=True)
        cmp = filecmp.dircmp(SRC, os.path.join(mnt, "src"))
        self.assertEqual((cmp.left_only, cmp.right_only, cmp.diff_files), ([], [], []))
        r = subprocess.run(["diff", "-r", SRC, os.path.join(mnt, "src")], capture_output=True)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:])
        # A large file, whole-MiB writes and reads (the entries' payload is 1 MiB).
        data = os.urandom(48 * MiB + 12345)
        with open(os.path.join(mnt, "big"), "wb") as f:
            f.write(data)
        harness.drop_page_cache()
        with open(os.path.join(mnt, "big"), "rb") as f:
            self.assertEqual(f.read(), data)
        # mmap, shared and written back.
        path = os.path.join(mnt, "mapped")
        with open(path, "wb") as f:
            f.truncate(3 * MiB)
        with open(path, "r+b") as f:
            m = mmap.mmap(f.fileno(), 3 * MiB)
            m[MiB:MiB + 5] = b"hello"
            m.flush()
            m.close()
        harness.drop_page_cache()
        with open(path, "rb") as f:
            f.seek(MiB)
            self.assertEqual(f.read(5), b"hello")
        # O_TMPFILE: answered raw, not by libfuse.
        fd = os.open(mnt, os.O_TMPFILE | os.O_RDWR, 0o644)
        os.write(fd, b"tmp")
        libc = ctypes.CDLL(None, use_errno=True)
        at_fdcwd, at_symlink_follow = -100, 0x400
        self.assertEqual(libc.linkat(at_fdcwd, b"/proc/self/fd/%d" % fd, at_fdcwd,
                                     os.fsencode(os.path.join(mnt, "from-tmpfile")), at_symlink_follow), 0,
                         os.strerror(ctypes.get_errno()))
        os.close(fd)
        with open(os.path.join(mnt, "from-tmpfile"), "rb") as f:
            self.assertEqual(f.read(), b"tmp")
        # xattrs, rename, unlink, rmdir.
        os.setxattr(path, "user.k", b"v" * 3000)
        self.assertEqual(os.getxattr(path, "user.k"), b"v" * 3000)
        os.rename(path, path + ".2")
        self.assertFalse(os.path.exists(path))
        os.unlink(path + ".2")
        subprocess.run(["rm", "-r", os.path.join(mnt, "src")], check=True)
        self.assertEqual(sorted(os.listdir(mnt)), ["big", "from-tmpfile"])
        self.assertGreater(uring_requests(mnt) - before, 1000)

    def test_replies_from_other_threads(self):
        self.mount_uring()
        mnt = self.v.mnt
        # An O_DIRECT write is replied by the thread that drops the range's pages first.
        path = os.path.join(mnt, "direct")
        block = mmap.mmap(-1, MiB)
        block.write(os.urandom(MiB))
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        for i in range(8):
            self.assertEqual(os.pwritev(fd, [block], i * MiB), MiB)
        os.close(fd)
        with open(path, "rb") as f:
            for i in range(8):
                self.assertEqual(f.read(MiB), bytes(block))
        # A blocking flock is replied by a waiter thread when the holder lets go.
        lockfile = os.path.join(mnt, "lock")
        holder = open(lockfile, "w")
        fcntl.flock(holder, fcntl.LOCK_EX)
        got = []
        def wait_for_lock():
            with open(lockfile, "w") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                got.append(1)

        waiter = threading.Thread(target=wait_for_lock)
        waiter.start()
        time.sleep(0.5)
        self.assertEqual(got, [], "the lock was granted while held")
        holder.close()
        waiter.join(10)
        self.assertEqual(got, [1], "the waiter was never answered")

    def test_other_users_carry_their_ids(self):
        self.mount_uring("-o", "allow_other")
        os.chmod(self.v.dir, 0o755)
        secret, shared = os.path.join(self.v.mnt, "secret"), os.path.join(self.v.mnt, "shared")
        for p, mode in ((secret, 0o600), (shared, 0o644)):
            with open(p, "wb") as f:
                f.write(b"x" * 1000)
            os.chmod(p, mode)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = subprocess.run(as_nobody + ["cat", secret], capture_output=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"Permission denied", r.stderr)
        r = subprocess.run(as_nobody + ["cat", shared], capture_output=True)
        self.assertEqual((r.returncode, r.stdout), (0, b"x" * 1000), r.stderr)
        os.mkdir(os.path.join(self.v.mnt, "d"), 0o755)
        r = subprocess.run(as_nobody + ["touch", os.path.join(self.v.mnt, "d", "new")], capture_output=True)
        self.assertIn(b"Permission denied", r.stderr)

    def test_killed_daemon_leaves_an_error_not_a_hang(self):
        self.mount_uring()
        data = os.urandom(4 * MiB)
        with open(os.path.join(self.v.mnt, "f"), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        reader = subprocess.Popen(["sh", "-c", "while cat %s > /dev/null; do :; done; echo ended"
                                   % os.path.join(self.v.mnt, "f")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1)
        os.kill(self.v.pid, signal.SIGKILL)
        try:
            out, err = reader.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            reader.kill()
            self.fail("a reader hung after the daemon died")
        self.assertIn(b"ended", out)
        self.assertRegex(err.decode(), "not connected|Software caused connection abort|Input/output error|Operation canceled")
        subprocess.run(["umount", "-l", self.v.mnt], check=True)
        self.assertTrue(harness.wait_for(lambda: not harness.pid_alive(self.v.pid), timeout=30))
        self.v.pid = None
        self.mount_uring()
        with open(os.path.join(self.v.mnt, "f"), "rb") as f:
            self.assertEqual(f.read(), data)


class FallbackTest(UringTestCase):
    def check_plain_fuse(self):
        with open(os.path.join(self.v.mnt, "f"), "wb") as f:
            f.write(b"y" * MiB)
        harness.drop_page_cache()
        with open(os.path.join(self.v.mnt, "f"), "rb") as f:
            self.assertEqual(f.read(), b"y" * MiB)
        self.assertEqual(uring_requests(self.v.mnt), 0)

    def test_off_by_default(self):
        self.v.mount()
        self.check_plain_fuse()
        self.v.umount()
        self.assertNotIn("io_uring", self.v.log_tail())

    def test_kernel_without_the_offer(self):
        rc, out, err = self.v.mount_at(self.v.mnt, "--io-uring", env=dict(os.environ, TIERFS_FAULT_NO_KERNEL_URING="1"),
                                       log=self.v.log)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.check_plain_fuse()
        line = "FUSE over io_uring off: this kernel does not offer it"
        harness.wait_for(lambda: line in self.v.log_tail(), timeout=10)
        self.assertIn(line, self.v.log_tail())


if __name__ == "__main__":
    harness.main()
