"""FUSE passthrough for cached files (issue "Fast paths", item 3).

A file whose blocks are all in the disk cache gets a verified whole-file copy there
(chunk/flat_files.h); later read-only opens are answered in passthrough mode onto it
(fuse/kernel_passthrough.h) and the kernel reads the copy without asking TierFS. Checked
here with real syscalls:
- a read (and an mmap) of such a file returns its bytes with no READ request reaching the
  daemon (its per-op counter stays put);
- a change by another client (a second mount) ends passthrough at the next open, which
  reads the new bytes; a change through this mount likewise;
- an open for writing while a passthrough open lasts fails with ETXTBSY after a short
  wait, and succeeds once the reader closed;
- a copy damaged between mounts is never served: the remount checks it, removes it, and
  reads go through the cache (which returns the right bytes);
- permissions are still the Vfs's: another user gets EACCES on a 0600 file, and reads a
  0644 one through passthrough;
- `--no-passthrough`, a kernel that does not offer passthrough (simulated), a memory-only
  cache and a cache disk without room for copies fall back to the normal path.
"""

import errno
import json
import mmap
import os
import subprocess
import time

import harness
from harness import Volume

MiB = 1 << 20


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def metric(mnt, name):
    return stats(mnt)["metrics"].get(name, 0)


def pt_opens(mnt):
    return metric(mnt, 'tierfs_passthrough_opens_total{mode="passthrough"}')


def daemon_reads(mnt):
    return metric(mnt, 'tierfs_fuse_op_duration_seconds_count{op="read"}')


class PassthroughTestCase(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.v = Volume()
        self.addCleanup(self.v.cleanup)
        self.v.format()

    def write_file(self, mnt, name, size, seed=1):
        data = os.urandom(size)
        path = os.path.join(mnt, name)
        with open(path, "wb") as f:
            f.write(data)
        return path, data

    def make_hot(self, path):
        """Fills the disk cache with the file's blocks, opens it once (which queues its
        copy) and waits until the copy is built and verified."""
        os.getxattr(path, "tierfs.warmup")
        mnt = os.path.dirname(path)
        before = stats(mnt)["flat_copies"]["built"] + stats(mnt)["flat_copies"]["verified"]
        with open(path, "rb") as f:
            f.read(1)
        deadline = time.time() + 30
        while time.time() < deadline:
            fc = stats(mnt)["flat_copies"]
            if fc["built"] + fc["verified"] > before:
                return
            time.sleep(0.05)
        self.fail("no flat copy was built for %s: %s" % (path, stats(mnt)["flat_copies"]))


class PassthroughReadTest(PassthroughTestCase):
    def test_cached_file_is_read_by_the_kernel_directly(self):
        self.v.mount()
        mnt = self.v.mnt
        path, data = self.write_file(mnt, "big", 9 * MiB + 12345)
        self.make_hot(path)
        harness.drop_page_cache()
        opens, reads = pt_opens(mnt), daemon_reads(mnt)
        with open(path, "rb") as f:
            got = f.read()
        self.assertEqual(got, data)
        self.assertEqual(pt_opens(mnt), opens + 1, "the open was not answered in passthrough mode")
        self.assertEqual(daemon_reads(mnt), reads, "READ requests reached the daemon during a passthrough read")
        # mmap reads come from the copy too.
        with open(path, "rb") as f:
            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                self.assertEqual(m[5 * MiB:5 * MiB + 4096], data[5 * MiB:5 * MiB + 4096])
                self.assertEqual(m[-100:], data[-100:])
        self.assertEqual(daemon_reads(mnt), reads)
        # A small file (below --passthrough-min-size) never qualifies.
        small, sdata = self.write_file(mnt, "small", 100000)
        os.getxattr(small, "tierfs.warmup")
        with open(small, "rb") as f:
            self.assertEqual(f.read(), sdata)
        self.assertEqual(stats(mnt)["flat_copies"]["copies"], 1)

    def test_change_by_another_client_ends_passthrough_at_the_next_open(self):
        self.v.mount()
        other = os.path.join(self.v.dir, "other")
        os.mkdir(other)
        rc, out, err = self.v.mount_at(other)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        path, data = self.write_file(self.v.mnt, "f", 6 * MiB)
        self.make_hot(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), data)
        opens = pt_opens(self.v.mnt)
        new = os.urandom(6 * MiB)
        with open(os.path.join(other, "f"), "r+b") as f:
            f.write(new)
        time.sleep(1.2)  # the attribute cache of the first mount (1 s) runs out
        with open(path, "rb") as f:
            self.assertEqual(f.read(), new, "an open after another client's change returned the old bytes")
        self.assertEqual(pt_opens(self.v.mnt), opens, "a changed file was opened onto the old copy")
        # A change through this mount ends it as well.
        self.make_hot(path)
        with open(path, "rb") as f:
            f.read()
        self.assertEqual(pt_opens(self.v.mnt), opens + 1)
        with open(path, "r+b") as f:
            f.seek(MiB)
            f.write(b"local change")
        with open(path, "rb") as f:
            f.seek(MiB)
            self.assertEqual(f.read(12), b"local change")
        self.assertEqual(pt_opens(self.v.mnt), opens + 1)

    def test_writer_waits_then_gets_etxtbsy_while_a_passthrough_reader_lasts(self):
        self.v.mount()
        path, data = self.write_file(self.v.mnt, "f", 3 * MiB)
        self.make_hot(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            self.assertEqual(os.pread(fd, 16, 0), data[:16])
            start = time.time()
            with self.assertRaises(OSError) as cm:
                os.open(path, os.O_WRONLY)
            self.assertEqual(cm.exception.errno, errno.ETXTBSY)
            self.assertGreaterEqual(time.time() - start, 1.5, "the writer did not wait for the reader's close")
            # Reads of the open file go on.
            self.assertEqual(os.pread(fd, 16, MiB), data[MiB:MiB + 16])
        finally:
            os.close(fd)
        self.assertEqual(metric(self.v.mnt, "tierfs_passthrough_conflicts_total"), 1)
        # Closed (its RELEASE may still be on its way: the writer waits for it).
        w = os.open(path, os.O_WRONLY)
        os.pwrite(w, b"after", 0)
        os.close(w)
        with open(path, "rb") as f:
            self.assertEqual(f.read(5), b"after")
        self.assertIn("ETXTBSY", self.v.log_tail())

    def test_other_users_keep_their_permissions(self):
        self.v.mount("-o", "allow_other")
        os.chmod(self.v.dir, 0o755)  # the test's directory: others may reach the mount
        secret, _ = self.write_file(self.v.mnt, "secret", 2 * MiB)
        shared, sdata = self.write_file(self.v.mnt, "shared", 2 * MiB)
        os.chmod(secret, 0o600)
        os.chmod(shared, 0o644)
        self.make_hot(secret)
        self.make_hot(shared)
        opens = pt_opens(self.v.mnt)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = subprocess.run(as_nobody + ["cat", secret], capture_output=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"Permission denied", r.stderr)
        r = subprocess.run(as_nobody + ["cat", shared], capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, sdata)
        self.assertEqual(pt_opens(self.v.mnt), opens + 1)


class DamagedCopyTest(PassthroughTestCase):
    def test_a_copy_damaged_between_mounts_is_never_served(self):
        self.v.mount()
        path, data = self.write_file(self.v.mnt, "f", 5 * MiB)
        self.make_hot(path)
        root = stats(self.v.mnt)["flat_copies"]["root"]
        copies = [n for n in os.listdir(root) if len(n) == 32]
        self.assertEqual(len(copies), 1)
        self.v.umount()
        with open(os.path.join(root, copies[0]), "r+b") as f:
            f.seek(3 * MiB + 7)
            b = f.read(1)
            f.seek(3 * MiB + 7)
            f.write(bytes([b[0] ^ 0xFF]))
        self.v.mount()
        for _ in range(3):
            harness.drop_page_cache()
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data, "damaged copy served")
            time.sleep(0.3)
        fc = stats(self.v.mnt)["flat_copies"]
        self.assertEqual(fc["damaged"], 1, fc)
        # The file is still hot, so its copy is built again from the verified blocks.
        if os.path.exists(os.path.join(root, copies[0])):
            with open(os.path.join(root, copies[0]), "rb") as f:
                self.assertEqual(f.read(), data, "the damaged copy was kept")
        # An intact copy found at mount is checked, then used.
        self.v.umount()
        self.v.mount()
        for _ in range(50):
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            if pt_opens(self.v.mnt) > 0:
                break
            time.sleep(0.1)
        self.assertGreater(pt_opens(self.v.mnt), 0, stats(self.v.mnt)["flat_copies"])


class FallbackTest(PassthroughTestCase):
    def check_no_passthrough(self, mnt):
        path, data = self.write_file(mnt, "f", 4 * MiB)
        os.getxattr(path, "tierfs.warmup")
        for _ in range(3):
            harness.drop_page_cache()
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
        self.assertEqual(pt_opens(mnt), 0)

    def test_no_passthrough_option(self):
        self.v.mount("--no-passthrough")
        self.check_no_passthrough(self.v.mnt)
        self.assertNotIn("flat_copies", stats(self.v.mnt))

    def test_kernel_without_passthrough(self):
        rc, out, err = self.v.mount_at(self.v.mnt, env=dict(os.environ, TIERFS_FAULT_NO_KERNEL_PASSTHROUGH="1"),
                                       log=self.v.log)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.check_no_passthrough(self.v.mnt)
        self.v.umount()  # the log is complete
        self.assertIn("this kernel does not offer it", self.v.log_tail())

    def test_cache_disk_without_room_for_copies(self):
        # A 64 MiB cache disk holding a 40 MiB file's blocks has no room for its copy above
        # the free-space floor: none is built, reads are right, the log says why once.
        cache = os.path.join(self.v.dir, "small-cache")
        os.mkdir(cache)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64M", "tmpfs", cache], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", cache])
        self.v.mount("--cache-dir", cache)
        path, data = self.write_file(self.v.mnt, "f", 40 * MiB)
        os.getxattr(path, "tierfs.warmup")
        for _ in range(3):
            harness.drop_page_cache()
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            time.sleep(0.3)
        self.assertEqual(pt_opens(self.v.mnt), 0)
        fc = stats(self.v.mnt)["flat_copies"]
        self.assertEqual((fc["copies"], fc["failed"]), (0, 0), fc)
        self.v.umount()
        self.assertIn("passthrough copies not built", self.v.log_tail())

    def test_memory_only_cache(self):
        self.v.mount("--cache-dir", "memory")
        self.check_no_passthrough(self.v.mnt)


if __name__ == "__main__":
    harness.main()
