"""Bounded waits on a dead or failing object store (README, "When the object store fails";
docs/faults.md).

- A read while radosgw is hung (SIGSTOP) fails with EIO after `mount --io-timeout`, not
  after the kernel's retries of the store client's retries; the same with a hung Ceph OSD
  under the RADOS backend. These run their own Ceph (they stop it).
- Against a store that answers every request 503 (a proxy in front of the shared radosgw),
  one read and one write each make at most the bucket URL's `tries` (10) attempts: the S3
  client is the only layer that retries.
- Eight O_DIRECT readers that open a cold small file at once cost one GET.
"""

import errno
import mmap
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import harness
import servers
from harness import msg, tierfs
from s3proxy import S3Proxy

OFFSET = 70  # this script's own Ceph: the shared ports plus OFFSET


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def timed_read(path):
    """(errno or 0, seconds, bytes read) of reading the whole file."""
    t0 = time.monotonic()
    try:
        n = len(read_all(path))
        return 0, time.monotonic() - t0, n
    except OSError as e:
        return e.errno, time.monotonic() - t0, None


def process_state(pid):
    """The state letter of /proc/PID/stat (T: stopped), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class HungStoreTest(harness.TierFSTestCase):
    """radosgw or the OSD stopped with SIGSTOP: connections are accepted (or messages
    queued) and never answered, the worst case for a client's timeouts."""
    PER_TEST = True
    AUTO_MOUNT = False
    IO_TIMEOUT = 10

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.servers()  # skip outside ctest like the other shared-server tests
        cls.root = tempfile.mkdtemp(prefix="tierfs-hung-")
        cls.ceph = servers.Ceph(cls.root, mon_v2=servers.CEPH_MON_V2 + OFFSET, mon_v1=servers.CEPH_MON_V1 + OFFSET,
                                rgw_port=servers.RGW_PORT + OFFSET, bluestore=False, extra_addr="")
        try:
            cls.ceph.start()
        except BaseException:  # tearDownClass does not run after a failed setUpClass
            cls.ceph.stop()
            shutil.rmtree(cls.root, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        for name in ("client.rgw.a", "osd.0"):
            cls.cont(name)
        cls.ceph.stop()
        if not os.environ.get("TIERFS_TEST_KEEP"):
            shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def pid_of(cls, name):
        with open(cls.ceph._pid(name)) as f:
            return int(f.read().strip())

    @classmethod
    def cont(cls, name):
        try:
            os.kill(cls.pid_of(name), signal.SIGCONT)
        except (OSError, ValueError):
            pass

    def stopped(self, name):
        """Stops the Ceph daemon `name` until the test ends."""
        pid = self.pid_of(name)
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(self.cont, name)
        self.assertTrue(harness.wait_for(lambda: process_state(pid) == "T", timeout=10),
                        "%s (pid %d) did not stop: state %s" % (name, pid, process_state(pid)))

    def volume_with_file(self, storage, size=3 << 20):
        vol = self.new_volume(storage=storage)
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount()
        data = os.urandom(size)
        with open(vol.path("f"), "wb") as f:
            f.write(data)
        vol.umount()
        return vol

    def check_bounded_eio(self, vol, daemon, io_timeout, slack=8.0):
        # No disk cache: the read must go to the store.
        vol.mount("--cache-dir", "memory", *(["--io-timeout", str(io_timeout)] if io_timeout else []))
        # What the read must fetch: 3 MiB in the store's objects (metadata only, no data read).
        self.assertEqual(os.stat(vol.path("f")).st_size, 3 << 20)
        keys = vol.object_keys(vol.path("f"))
        self.assertTrue(keys, "the file has no objects: %s" % vol.info_json(vol.path("f")))
        self.stopped(daemon)
        err, secs, got = timed_read(vol.path("f"))
        limit = io_timeout or 60
        sys.stderr.write("%s stopped, --io-timeout %s: read failed with %s after %.1f s\n"
                         % (daemon, io_timeout or "default (60)", errno.errorcode.get(err, err), secs))
        self.assertEqual(err, errno.EIO, "the read should fail with EIO (got %s after %.1f s, %s bytes read; "
                                         "objects %s)\nlog:\n%s" % (err, secs, got, keys, vol.log_tail()))
        self.assertLess(secs, limit + slack, "the read waited %.1f s for a hung store, more than the "
                                             "--io-timeout of %d s" % (secs, limit))
        # The log says why.
        self.assertTrue(harness.wait_for(lambda: "reading block" in vol.read_log(), timeout=10), vol.log_tail())
        self.cont(daemon)
        # The store back: the same read works (after the failure is forgotten, 5 s).
        time.sleep(6)
        self.assertEqual(len(read_all(vol.path("f"))), 3 << 20)

    def s3_storage(self):
        return ["--storage", "s3", "--bucket", self.ceph.endpoint() + "/" + harness.unique("hung"),
                "--access-key", servers.S3_ACCESS_KEY, "--secret-key", servers.S3_SECRET_KEY]

    def test_read_from_a_hung_radosgw_fails_within_the_io_timeout(self):
        vol = self.volume_with_file(self.s3_storage())
        self.check_bounded_eio(vol, "client.rgw.a", self.IO_TIMEOUT)

    def test_the_default_io_timeout_is_within_a_minute(self):
        vol = self.volume_with_file(self.s3_storage())
        self.check_bounded_eio(vol, "client.rgw.a", None)

    def test_read_from_a_hung_osd_fails_within_the_io_timeout(self):
        storage = ["--storage", "rados", "--bucket", servers.RADOS_POOL, "--ceph-conf", self.ceph.conf]
        vol = self.volume_with_file(storage)
        self.check_bounded_eio(vol, "osd.0", self.IO_TIMEOUT)


class FailingStoreTest(harness.TierFSTestCase):
    """A proxy in front of the shared radosgw: forwarding, answering 503, or slow."""
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        srv = harness.servers()
        upstream = int(srv["s3_endpoint"].rsplit(":", 1)[1])
        self.proxy = S3Proxy(upstream)
        self.addCleanup(self.proxy.close)
        storage = ["--storage", "s3", "--bucket", "http://127.0.0.1:%d/%s" % (self.proxy.port, harness.unique("fail")),
                   "--access-key", srv["s3_access_key"], "--secret-key", srv["s3_secret_key"]]
        self.vol = self.new_volume(storage=storage)
        self.addCleanup(self.vol.cleanup)
        self.vol.format()

    def test_one_read_and_one_write_make_at_most_ten_attempts(self):
        vol = self.vol
        # The default --io-timeout (60 s) leaves room for all ten tries and their backoff
        # (at most 21 s): the count is the tries'.
        io_timeout = 60
        vol.mount("--cache-dir", "memory", "--backup-meta", "0")
        data = os.urandom(1 << 20)
        with open(vol.path("r"), "wb") as f:
            f.write(data)
        key = vol.object_keys(vol.path("r"))[0]
        vol.umount()
        vol.mount("--cache-dir", "memory", "--backup-meta", "0")
        self.proxy.fail = True
        self.proxy.reset()

        err, secs, _ = timed_read(vol.path("r"))
        gets = self.proxy.count("GET", key)
        sys.stderr.write("read against 503s: %s after %.1f s, %d GETs\n" % (errno.errorcode.get(err, err), secs, gets))
        self.assertEqual(err, errno.EIO)
        self.assertGreaterEqual(gets, 1)
        self.assertLessEqual(gets, 10, "one read made %d attempts (the kernel's retry of a failed read, or a "
                                       "second retry layer, multiplied them)" % gets)
        self.assertLess(secs, io_timeout + 5)

        self.proxy.reset()
        t0 = time.monotonic()
        with self.assertRaises(OSError) as cm:
            with open(vol.path("w"), "wb") as f:
                f.write(os.urandom(1 << 20))
        secs = time.monotonic() - t0
        puts = self.proxy.count("PUT")
        sys.stderr.write("write against 503s: %s after %.1f s, %d PUTs\n" % (cm.exception, secs, puts))
        self.assertEqual(cm.exception.errno, errno.EIO)
        self.assertGreaterEqual(puts, 1)
        self.assertLessEqual(puts, 10, "one block's upload made %d attempts" % puts)
        self.assertLess(secs, io_timeout + 5)
        self.proxy.fail = False

    def test_concurrent_odirect_first_readers_share_one_get(self):
        vol = self.vol
        vol.mount("--backup-meta", "0")
        data = os.urandom(100 * 1024)
        with open(vol.path("small"), "wb") as f:
            f.write(data)
        key = vol.object_keys(vol.path("small"))[0]
        vol.umount()
        # Cold: no disk cache, a new process; each GET held 0.5 s so that all readers
        # arrive while the first one waits.
        vol.mount("--cache-dir", "memory", "--backup-meta", "0")
        self.proxy.reset()
        self.proxy.delay_get = 0.5
        n = 8
        barrier = threading.Barrier(n)
        results = [None] * n

        def reader(i):
            buf = mmap.mmap(-1, 128 * 1024)  # page-aligned, as O_DIRECT wants
            fd = os.open(vol.path("small"), os.O_RDONLY | os.O_DIRECT)
            try:
                barrier.wait()
                got = os.readv(fd, [buf])
                results[i] = bytes(buf[:got])
            finally:
                os.close(fd)
                buf.close()

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertTrue(all(r == data for r in results), "a reader got the wrong bytes")
        gets = self.proxy.count("GET", key)
        sys.stderr.write("%d concurrent O_DIRECT first readers: %d GETs of the block\n" % (n, gets))
        self.assertEqual(gets, 1, "%d concurrent first readers of one block made %d GETs" % (n, gets))


if __name__ == "__main__":
    harness.main()
