"""A disk cache on a slow disk (README, "The cache"; docs/faults.md): ext4 mounted `-o sync`
on a loop device whose writes the client's cgroup (blkio, v1) limits to 8 MB/s, so that
reading from the store outruns the cache's fills.

- A read pass over more data than the fill queue holds drops fills, and the drops are
  counted: tierfs_disk_cache_dropped_fills_total in /metrics and `tierfs stats`.
- `tierfs warmup` of the same data set leaves all of it cached.
- `tierfs warmup --cache-group` sends each block to its owner, a cache server on such a
  disk, and every block it sent is in that owner's disk cache afterwards (none dropped).
- A cache server whose disk slows to a crawl just as it is stopped (its cache's teardown
  then takes a second or more) ends its group refresh thread before the session closes and
  the caches go: the old order let that thread read the stats of a disk cache being
  destroyed (the review's abort, `Assertion 'e != ESRCH || !robust'`) and write to the
  closed session, which its log showed every time here.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import harness
from group_helpers import CacheServer, free_port, metric, metrics, wait_ring, write_files
from harness import msg, run, tierfs

BLKIO = "/sys/fs/cgroup/blkio"
WRITE_BPS = 8 << 20
MiB = 1 << 20


class SlowDisk:
    """ext4 -o sync on a loop device; processes added with add() write to it at WRITE_BPS."""

    def __init__(self):
        if not os.path.isdir(BLKIO) or not os.path.exists(os.path.join(BLKIO, "blkio.throttle.write_bps_device")):
            raise unittest.SkipTest("needs the cgroup v1 blkio controller (write throttling)")
        self.tmp = tempfile.mkdtemp(prefix="tierfs-slowdisk-", dir=os.environ.get("TIERFS_TEST_TMPDIR"))
        self.image = os.path.join(self.tmp, "disk.img")
        self.mnt = os.path.join(self.tmp, "mnt")
        self.dev = None
        self.cgroup = None
        self.mounted = False
        os.mkdir(self.mnt)
        try:
            with open(self.image, "wb") as f:
                f.truncate(2 << 30)
            rc, out, err = run("losetup", "-f", "--show", self.image)
            if rc != 0:
                raise unittest.SkipTest("no loop device: " + err)
            self.dev = out.strip()
            for cmd in (["mkfs.ext4", "-q", self.dev], ["mount", "-o", "sync", self.dev, self.mnt]):
                rc, out, err = run(*cmd)
                if rc != 0:
                    raise AssertionError(" ".join(cmd) + " failed\n" + msg(rc, out, err))
            self.mounted = True
            self.cgroup = os.path.join(BLKIO, "tierfs-slow-%d" % os.getpid())
            os.mkdir(self.cgroup)
            self.throttle(WRITE_BPS)
        except BaseException:
            self.close()
            raise

    def throttle(self, bps):
        st = os.stat(self.dev)
        with open(os.path.join(self.cgroup, "blkio.throttle.write_bps_device"), "w") as f:
            f.write("%d:%d %d\n" % (os.major(st.st_rdev), os.minor(st.st_rdev), bps))

    def add(self, pid):
        with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def close(self):
        if self.cgroup and os.path.isdir(self.cgroup):
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs")) as f:
                    pids = f.read().split()
                for pid in pids:
                    try:
                        with open(os.path.join(BLKIO, "cgroup.procs"), "w") as f:
                            f.write(pid)
                    except OSError:
                        pass
                os.rmdir(self.cgroup)
            except OSError:
                pass
        if self.mounted:
            run("umount", "-l", self.mnt)
        if self.dev:
            run("losetup", "-d", self.dev)
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)


class SlowCacheDiskTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.disk = SlowDisk()
        self.addCleanup(self.disk.close)
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)  # before the disk goes: mounts use it
        self.vol.format()

    def test_read_pass_counts_its_drops_and_warmup_caches_everything(self):
        vol = self.vol
        vol.mount("--backup-meta", "0")
        files = write_files(vol.mnt, 48, 4 * MiB)
        vol.umount()
        maddr = "127.0.0.1:%d" % free_port()
        cache = os.path.join(self.disk.mnt, "cache")
        vol.mount("--backup-meta", "0", "--cache-dir", cache, "--metrics", maddr, "--mem-cache-size", "256M")
        self.disk.add(vol.pid)
        # A read pass much faster than the disk: fills queue up and, past the queue, drop.
        for p, data in files.items():
            with open(p, "rb") as f:
                self.assertEqual(f.read(), data)
        m = metrics(maddr)
        dropped = metric(m, "tierfs_disk_cache_dropped_fills_total")
        limit = metric(m, "tierfs_disk_cache_fill_queue_limit_bytes")
        speed = metric(m, "tierfs_disk_cache_write_bytes_per_second")
        rc, out, err = tierfs("stats", vol.mnt, "--once", "--json", "--interval", "0.2")
        self.assertEqual(rc, 0, msg(rc, out, err))
        totals = json.loads(out.splitlines()[-1])["totals"]
        sys.stderr.write("read pass of %d MiB: %d fills dropped (queue limit %.0f MiB at %.1f MB/s measured)\n"
                         % (len(files) * 4, dropped, limit / MiB, speed / 1e6))
        self.assertGreater(dropped, 0, "a read pass 6 times faster than the cache disk dropped no fill?")
        self.assertEqual(totals["disk_dropped_fills"], dropped)
        # Warm-up never drops: it waits for the disk.
        t0 = time.monotonic()
        rc, out, err = tierfs("warmup", "--json", vol.mnt, timeout=600)
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("warmup", "--check", "--json", vol.mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))
        j = json.loads(out)
        sys.stderr.write("warmup: %.1f s; then %d of %d bytes cached\n"
                         % (time.monotonic() - t0, j["cached_bytes"], j["bytes"]))
        self.assertEqual(j["cached_bytes"], j["bytes"])

    def test_group_warmup_fills_a_slow_owner_without_dropping(self):
        vol = self.vol
        vol.mount("--backup-meta", "0")
        write_files(vol.mnt, 48, 4 * MiB)
        owner = CacheServer(vol, "g", os.path.join(self.disk.mnt, "cache"))
        self.addCleanup(owner.kill)
        self.disk.add(owner.pid)
        mnt = os.path.join(vol.dir, "member")
        os.mkdir(mnt)
        res = vol.mount_at(mnt, "--cache-group", "g", "--group-addr", "127.0.0.1:%d" % free_port(),
                           "--cache-dir", "memory", "--backup-meta", "0")
        self.assertEqual(res[0], 0, msg(*res))
        wait_ring(mnt, 2)
        rc, out, err = tierfs("warmup", "--cache-group", "--json", mnt, timeout=900)
        self.assertEqual(rc, 0, msg(rc, out, err))
        sent = json.loads(out)["owner_blocks"]

        # Fills still queued at the owner land meanwhile; dropped ones never do.
        def disk_blocks():
            return metric(metrics(owner.metrics_addr), "tierfs_cache_blocks", 'level="disk"')
        last = [-1]

        def settled():
            n = disk_blocks()
            same = n == last[0]
            last[0] = n
            return same and n >= sent
        harness.wait_for(settled, timeout=120, interval=2)
        m = metrics(owner.metrics_addr)
        held = metric(m, "tierfs_cache_blocks", 'level="disk"')
        dropped = metric(m, "tierfs_disk_cache_dropped_fills_total")
        sys.stderr.write("group warm-up: %d blocks sent to the owner; it holds %d on disk, dropped %d fills\n"
                         % (sent, held, dropped))
        self.assertGreater(sent, 10)
        self.assertGreaterEqual(held, sent, "the owner's disk cache holds %d of the %d blocks sent to it" % (held, sent))


    def test_cache_server_stopped_as_its_disk_slows_down_exits_cleanly(self):
        vol = self.vol
        vol.format("--session-timeout", "2", "--force")  # the group refreshes every 0.5 s
        vol.mount("--backup-meta", "0")
        files = write_files(vol.mnt, 300, 64 << 10)
        mnt = os.path.join(vol.dir, "member")
        os.mkdir(mnt)
        res = vol.mount_at(mnt, "--cache-group", "g", "--group-addr", "127.0.0.1:%d" % free_port(),
                           "--cache-dir", "memory", "--backup-meta", "0")
        self.assertEqual(res[0], 0, msg(*res))
        for i in range(4):
            self.disk.throttle(100 * MiB)
            owner = CacheServer(vol, "g", os.path.join(self.disk.mnt, "cache"))
            self.addCleanup(owner.kill)
            self.disk.add(owner.pid)
            wait_ring(mnt, 2)
            for p in files:  # through the member: the owner fetches and caches its share
                with open(os.path.join(mnt, os.path.basename(p)), "rb") as f:
                    self.assertEqual(f.read(), files[p])
            run(harness.tierfs_bin(), "warmup", "--evict", mnt)

            def disk_blocks():
                return metric(metrics(owner.metrics_addr), "tierfs_cache_blocks", 'level="disk"')
            last = [-1]

            def settled():
                n = disk_blocks()
                same = n == last[0]
                last[0] = n
                return same
            harness.wait_for(settled, timeout=60, interval=1)  # its fills have landed
            self.disk.throttle(4 << 10)
            t0 = time.monotonic()
            rc = owner.stop(timeout=300)
            out = owner.output()
            sys.stderr.write("run %d: cache-server stopped in %.1f s, exit %d\n" % (i, time.monotonic() - t0, rc))
            self.assertEqual(rc, 0, out)
            self.assertNotIn("fatal signal", out)
            self.assertNotIn("Assertion", out)
            stopping = out[out.find("cache server stopping"):]
            for sign in ("cannot publish this member", "cannot read the members"):
                self.assertNotIn(sign, stopping, "run %d: the group refreshed while the cache server was torn "
                                                 "down\n%s" % (i, out))


if __name__ == "__main__":
    harness.main()
