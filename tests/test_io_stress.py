"""Concurrent data integrity: several processes read and write one file at once through
buffered I/O, O_DIRECT, Linux AIO on O_DIRECT and a shared mmap of the O_DIRECT
descriptor, with truncations, fsyncs and reopens in between (tests/io_stress.cc). No read
may return data older than a write that completed before the read began.

The checker first runs on the local disk (ext4 on CI), so a checker that rejects a correct
file system fails there, not on TierFS. On TierFS it runs with the default 4 MiB blocks
and with 1 MiB blocks (more block boundaries inside the regions), on a file that crosses a
64 MiB chunk boundary, with more processes than CPUs, on one small hot file (buffered
writes and mmap reads only), and on Redis + S3 (the throwaway servers of tests/servers.py).

Longer runs by hand: STRESS_SECONDS=600 STRESS_PROCS=8 STRESS_SEED=7 python3 tests/test_io_stress.py
"""

import os
import random
import sys

import harness
from harness import msg, run


def stress_bin():
    return harness.helper_bin("io_stress", "TIERFS_IO_STRESS")


SECONDS = float(os.environ.get("STRESS_SECONDS") or 30)
PROCS = int(os.environ.get("STRESS_PROCS") or 6)


def seed():
    s = int(os.environ.get("STRESS_SEED") or random.randrange(1 << 30))
    print("io_stress seed %d" % s, file=sys.stderr)
    return s


class StressMixin:
    def stress(self, path, seconds, size_mib, *extra):
        s = seed()
        res = run(stress_bin(), path, "--procs", PROCS, "--seconds", seconds, "--size", size_mib,
                  "--seed", s, *extra, timeout=seconds + 180)
        rc, out, err = res
        self.assertEqual(rc, 0, "io_stress failed (reproduce with STRESS_SEED=%d)\n%s" % (s, msg(*res)))
        self.assertIn(": ok", out)
        return out


class CheckerOnLocalDiskTest(StressMixin, harness.TierFSTestCase):
    AUTO_MOUNT = False

    def test_checker_accepts_the_local_file_system(self):
        d = self.local_tmpdir()
        self.stress(os.path.join(d, "f"), 5, 24)


class StressTest(StressMixin, harness.TierFSTestCase):
    PER_TEST = True

    def test_mixed_io_default_blocks(self):
        self.stress(os.path.join(self.mnt, "f"), SECONDS, 72)
        self.assertNotIn("EIO", self.vol.read_log())


class StressHotFileTest(StressMixin, harness.TierFSTestCase):
    """A small file that every process writes with buffered I/O and reads through mmap:
    found that dropping the kernel's cache because of this client's own changes (an open,
    an attribute refresh) let a reader fault a page back in from before a buffered write
    that had already marked it up to date. Failed in seconds before the fix."""

    PER_TEST = True

    def test_buffered_writes_and_mmap_reads_on_one_small_file(self):
        self.stress(os.path.join(self.mnt, "f"), SECONDS, 4, "--methods", "buffered,mmap", "--no-truncate")


class StressSharedVolumeTest(StressMixin, harness.TierFSTestCase):
    """Redis metadata and S3 blocks: commits and chunk reads are network round trips, so a
    read racing a commit has a wide window."""

    AUTO_MOUNT = False

    def test_mixed_io_redis_s3(self):
        srv = harness.servers()
        vol = harness.Volume(name=harness.unique("stress"),
                             meta_url=srv["redis_url"] + "/%d" % harness.REDIS_DB["io_stress"],
                             storage=harness.s3_storage_args(harness.unique("stress")))
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        vol.mount()
        self.stress(os.path.join(vol.mnt, "f"), SECONDS / 2, 24)


class StressSmallBlocksTest(StressMixin, harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def test_mixed_io_small_blocks(self):
        state = os.path.join(self.local_tmpdir(), "state")
        self.stress(os.path.join(self.mnt, "f"), SECONDS, 24, "--state", state)
        # The last version of every word survives a remount.
        self.vol.remount()
        res = run(stress_bin(), os.path.join(self.mnt, "f"), "--verify", state)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertIn(": ok", res[1])


if __name__ == "__main__":
    harness.main()
