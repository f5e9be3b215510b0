"""Shared servers restarting under mounted clients: Redis restarted while files are being
written, and Ceph's radosgw restarted while data is being written through S3. Clients
reconnect and carry on; every operation in flight either completes or fails with an
error within a bounded time (no hang); nothing that was acknowledged (a close or fsync
that returned 0) is lost.

These tests restart servers, so they run their own Redis and Ceph on their own ports
rather than the ones ctest shares between test scripts."""

import errno
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time

import harness
import servers
from harness import msg, tierfs

OFFSET = 50          # ports of this script's servers: the shared ones plus OFFSET
# No single file operation may outlast the server's outage by more than this (seconds):
# the client's own retry budget (S3: at most --io-timeout, 60 s, per request).
OP_BOUND = 90.0


class Writer(threading.Thread):
    """Writes numbered files until stopped; records which ones were acknowledged."""

    def __init__(self, root, size, fsync):
        super().__init__(daemon=True)
        self.root, self.size, self.fsync = root, size, fsync
        self.acked = {}        # name -> sha256 of what was acknowledged
        self.errors = []       # (name, errno)
        self.slowest = 0.0
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            name = "f%05d" % i
            data = os.urandom(self.size)
            t0 = time.time()
            try:
                with open(os.path.join(self.root, name), "wb") as f:
                    f.write(data)
                    if self.fsync:
                        f.flush()
                        os.fsync(f.fileno())
                self.acked[name] = hashlib.sha256(data).hexdigest()
            except OSError as e:
                self.errors.append((name, e.errno))
            self.slowest = max(self.slowest, time.time() - t0)
            i += 1
            time.sleep(0.02)


class BackendRestartTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.servers()  # skip outside ctest like the other shared-server tests
        cls.root = tempfile.mkdtemp(prefix="tierfs-faults-")
        cls.redis = servers.Redis(cls.root, port=servers.REDIS_PORT + OFFSET).start()
        cls.ceph = servers.Ceph(cls.root, mon_v2=servers.CEPH_MON_V2 + OFFSET, mon_v1=servers.CEPH_MON_V1 + OFFSET,
                                rgw_port=servers.RGW_PORT + OFFSET).start()

    @classmethod
    def tearDownClass(cls):
        cls.ceph.stop()
        cls.redis.stop()
        if not os.environ.get("TIERFS_TEST_KEEP"):
            shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def run_writer_through(self, vol, disrupt, size, fsync):
        w = Writer(vol.mnt, size, fsync)
        w.start()
        time.sleep(2)
        t0 = time.time()
        disrupt()
        outage = time.time() - t0
        time.sleep(4)   # the client carries on after the server is back
        w.stop.set()
        w.join(timeout=OP_BOUND * 3)
        self.assertFalse(w.is_alive(), "a file operation hung after the server restart")
        self.assertLess(w.slowest, outage + OP_BOUND,
                        "an operation took %.1f s for an outage of %.1f s" % (w.slowest, outage))
        for name, err in w.errors:
            self.assertIn(err, (errno.EIO, errno.ETIMEDOUT, errno.ENOTCONN, errno.EAGAIN),
                          "unexpected error for %s: %s" % (name, os.strerror(err)))
        n_before = len(w.acked)
        self.assertGreater(n_before, 5, "the writer made no progress")
        # The client carries on: new files work after the restart.
        with open(os.path.join(vol.mnt, "after-restart"), "wb") as f:
            f.write(b"still working")
        vol.remount()
        for name, digest in w.acked.items():
            with open(os.path.join(vol.mnt, name), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, "acknowledged file %s lost" % name)
        with open(os.path.join(vol.mnt, "after-restart"), "rb") as f:
            self.assertEqual(f.read(), b"still working")
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        return w

    def test_redis_restart_while_mounted(self):
        vol = self.new_volume(meta_url=self.redis.url() + "/1")
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        vol.mount()

        def restart():
            self.redis.stop()
            time.sleep(3)
            self.redis.start(fresh=False)
        w = self.run_writer_through(vol, restart, 64 << 10, fsync=False)
        sys.stderr.write("redis restart: %d files acknowledged, %d failed, slowest op %.1f s\n"
                         % (len(w.acked), len(w.errors), w.slowest))

    def test_radosgw_restart_while_mounted(self):
        bucket = self.ceph.endpoint() + "/" + harness.unique("rgw")
        storage = ["--storage", "s3", "--bucket", bucket, "--access-key", servers.S3_ACCESS_KEY,
                   "--secret-key", servers.S3_SECRET_KEY]
        vol = self.new_volume(meta_url=self.redis.url() + "/2", storage=storage)
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        vol.mount()

        def restart():
            t0 = time.time()
            self.ceph.stop_rgw()
            t1 = time.time()
            time.sleep(3)
            self.ceph.start_rgw()
            sys.stderr.write("radosgw stopped in %.1f s, down %.1f s in all\n" % (t1 - t0, time.time() - t0))
        w = self.run_writer_through(vol, restart, 1 << 20, fsync=True)
        sys.stderr.write("radosgw restart: %d files acknowledged, %d failed, slowest op %.1f s\n"
                         % (len(w.acked), len(w.errors), w.slowest))


if __name__ == "__main__":
    harness.main()
