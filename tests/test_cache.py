"""The disk cache on real mounts: what it serves after a remount (even with the object store
gone), what it never returns (damaged cache files), and how it behaves when its directory is
missing, full, failing, shared, or another volume's; plus `tierfs warmup` and the stats."""

import errno
import fcntl
import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import time

import harness
from harness import Volume, file_sha256, is_mounted, msg, run, tierfs, wait_for

MiB = 1 << 20


def stats(mnt):
    return json.loads(os.getxattr(mnt, "tierfs.stats"))


def drop_kernel_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def write_random(path, size, seed):
    import random
    r = random.Random(seed)
    data = r.randbytes(size)
    with open(path, "wb") as f:
        f.write(data)
    return data


def read(path):
    with open(path, "rb") as f:
        return f.read()


def cache_files(cache_dir):
    return [p for p in glob.glob(os.path.join(cache_dir, "*", "blocks", "*", "*")) if os.path.isfile(p)]


class TmpfsMixin:
    def tmpfs(self, path, size):
        os.makedirs(path, exist_ok=True)
        rc, out, err = run("mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.addCleanup(lambda: run("umount", "-l", path))
        return path


class DiskCacheTest(TmpfsMixin, harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def cache_dir(self):
        return self.vol.mnt + ".cache"

    def test_warm_cache_serves_a_remount_without_the_object_store(self):
        data = write_random(self.vol.path("big"), 9 * MiB + 12345, 1)
        small = write_random(self.vol.path("small"), 100_000, 2)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("big")), data)
        self.vol.umount()
        # The bucket is moved away: only the cache can answer.
        os.rename(self.vol.bucket, self.vol.bucket + ".away")
        os.mkdir(self.vol.bucket)
        self.vol.mount()
        self.assertEqual(read(self.vol.path("big")), data)
        self.assertEqual(read(self.vol.path("small")), small)  # entered the cache as it was written
        s = stats(self.vol.mnt)
        self.assertEqual(s["store"]["gets"], 0, s)
        self.assertGreater(s["disk"]["hits"], 0, s)
        # A block that was never cached is an error, not wrong data.
        shutil.rmtree(self.vol.bucket)
        os.rename(self.vol.bucket + ".away", self.vol.bucket)

    def test_damaged_cache_files_are_never_returned(self):
        data = write_random(self.vol.path("f"), 6 * MiB, 3)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.vol.umount()
        files = sorted(cache_files(self.cache_dir()))
        self.assertGreaterEqual(len(files), 6)
        for i, p in enumerate(files):
            with open(p, "r+b") as f:
                size = os.fstat(f.fileno()).st_size
                if i % 3 == 0:      # a flipped byte in the data
                    f.seek(size - 1000)
                    b = f.read(1)
                    f.seek(size - 1000)
                    f.write(bytes([b[0] ^ 0x01]))
                elif i % 3 == 1:    # truncated
                    f.truncate(size // 2)
                else:               # overwritten from the start
                    f.write(b"\0" * 4096)
        self.vol.mount()
        self.assertEqual(read(self.vol.path("f")), data)
        s = stats(self.vol.mnt)
        self.assertGreaterEqual(s["disk"]["corrupt"], len(files) - 1, s)
        self.assertGreater(s["store"]["gets"], 0, s)

    def test_killed_client_while_filling_leaves_a_usable_cache(self):
        data = write_random(self.vol.path("f"), 24 * MiB, 4)
        self.vol.remount()
        cache = self.cache_dir()
        reader = subprocess.Popen(["sh", "-c", "cat '%s' > /dev/null" % self.vol.path("f")])
        self.assertTrue(wait_for(lambda: len(cache_files(cache)) >= 3, timeout=30))
        os.kill(self.vol.pid, signal.SIGKILL)
        reader.wait(timeout=60)
        self.vol.force_unmount()
        self.vol.pid = None
        # A block file written but not yet in the index, and a half-written one.
        uuid = os.listdir(cache)[0]
        with open(os.path.join(cache, uuid, "blocks", "ab", "00000000000000ab"), "wb") as f:
            f.write(b"orphan")
        with open(os.path.join(cache, uuid, "tmp", "00000000000000cd.7"), "wb") as f:
            f.write(b"partial")
        self.vol.mount()
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        # The sweep leaves exactly the indexed blocks.
        self.assertTrue(wait_for(lambda: len(cache_files(cache)) == stats(self.vol.mnt)["disk"]["blocks"], timeout=30),
                        (len(cache_files(cache)), stats(self.vol.mnt)))
        self.assertFalse(os.path.exists(os.path.join(cache, uuid, "tmp", "00000000000000cd.7")))

    def test_cache_directory_on_a_full_disk(self):
        cache = self.tmpfs(os.path.join(self.vol.dir, "smallcache"), "6m")
        self.vol.umount()
        self.vol.mount("--cache-dir", cache)
        data = write_random(self.vol.path("f"), 20 * MiB, 5)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        st = os.statvfs(cache)
        self.assertGreater(st.f_bavail, 0)
        s = stats(self.vol.mnt)
        self.assertEqual(s["disk"]["dirs_down"], 0, s)
        self.assertLessEqual(s["disk"]["bytes"], 6 * MiB)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)

    def test_a_disk_filled_by_others_stops_the_cache_with_a_warning(self):
        # Another program fills the cache's disk past the --free-space-ratio floor (10%):
        # the cache stops filling and says so once; it resumes when the room comes back.
        cache = self.tmpfs(os.path.join(self.vol.dir, "shareddisk"), "32m")
        filler = os.path.join(cache, "someone-elses-file")
        with open(filler, "wb") as f:
            f.write(b"\0" * (30 * MiB))
        self.vol.umount()
        self.vol.mount("--cache-dir", cache)
        data = write_random(self.vol.path("f"), 4 * MiB, 12)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertTrue(wait_for(lambda: "under the --free-space-ratio floor" in self.vol.read_log(), timeout=30),
                        self.vol.log_tail())
        self.assertEqual(self.vol.read_log().count("under the --free-space-ratio floor"), 1)
        self.assertEqual(stats(self.vol.mnt)["disk"]["blocks"], 0)
        os.unlink(filler)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertTrue(wait_for(lambda: stats(self.vol.mnt)["disk"]["blocks"] > 0, timeout=30))
        self.assertTrue(wait_for(lambda: "has room again" in self.vol.read_log(), timeout=10))  # flushed each second
        self.vol.umount()

    def test_cache_directory_on_a_failing_disk_is_taken_out_of_use(self):
        # ext4 on a loop device, shut down under the running client: every I/O then fails
        # with EIO, as on a dying disk.
        img = os.path.join(self.vol.dir, "disk.img")
        disk = os.path.join(self.vol.dir, "failing")
        os.mkdir(disk)
        with open(img, "wb") as f:
            f.truncate(64 * MiB)
        rc, out, err = run("mkfs.ext4", "-q", "-F", img)
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = run("mount", "-o", "loop", img, disk)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.addCleanup(lambda: run("umount", "-l", disk))
        self.vol.umount()
        self.vol.mount("--cache-dir", disk)
        a = write_random(self.vol.path("a"), 3 * MiB, 6)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("a")), a)
        # Fills are written in the background.
        self.assertTrue(wait_for(lambda: stats(self.vol.mnt)["disk"]["blocks"] > 0, timeout=30))
        fd = os.open(disk, os.O_RDONLY)
        try:
            ext4_ioc_shutdown = (2 << 30) | (4 << 16) | (ord("X") << 8) | 125
            fcntl.ioctl(fd, ext4_ioc_shutdown, struct.pack("I", 2))  # EXT4_GOING_FLAGS_NOLOGFLUSH
        finally:
            os.close(fd)
        b = write_random(self.vol.path("b"), 5 * MiB, 7)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("a")), a)  # its cache files now fail to read
        self.assertEqual(read(self.vol.path("b")), b)
        s = stats(self.vol.mnt)
        self.assertEqual(s["disk"]["dirs_down"], 1, s)
        self.assertIn("taken out of use", self.vol.read_log())
        self.vol.umount()  # unmounting with a dead cache disk works too

    def test_missing_and_unusable_cache_directories(self):
        self.vol.umount()
        missing = os.path.join(self.vol.dir, "does", "not", "exist")
        self.vol.mount("--cache-dir", missing)
        data = write_random(self.vol.path("f"), 2 * MiB, 8)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertTrue(os.path.isdir(missing))
        self.vol.umount()
        afile = os.path.join(self.vol.dir, "afile")
        open(afile, "w").close()
        self.vol.mount("--cache-dir", afile)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertIn("not used", self.vol.read_log())
        self.vol.umount()
        # A read-only file system: no cache, same data.
        ro = os.path.join(self.vol.dir, "ro")
        os.mkdir(ro)
        rc, out, err = run("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.addCleanup(lambda: run("umount", "-l", ro))
        self.vol.mount("--cache-dir", ro)
        drop_kernel_cache()
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertEqual(stats(self.vol.mnt)["disk"]["dirs"], 0)
        self.vol.umount()
        self.vol.mount("--cache-dir", "memory")
        self.assertEqual(stats(self.vol.mnt)["disk"]["dirs"], 0)
        self.assertEqual(read(self.vol.path("f")), data)

    def test_two_mounts_and_another_volume_share_a_cache_root(self):
        shared = os.path.join(self.vol.dir, "shared-cache")
        self.vol.umount()
        self.vol.mount("--cache-dir", shared)
        data = write_random(self.vol.path("f"), 3 * MiB, 9)
        second = os.path.join(self.vol.dir, "mnt2")
        os.mkdir(second)
        rc, out, err = self.vol.mount_at(second, "--cache-dir", shared, log=second + ".log")
        self.assertEqual(rc, 0, msg(rc, out, err))
        drop_kernel_cache()
        self.assertEqual(read(os.path.join(second, "f")), data)
        with open(second + ".log") as f:
            self.assertIn("in use by another mount", f.read())
        self.assertEqual(read(self.vol.path("f")), data)
        tierfs("umount", second, "--wait", "60")
        # Another volume with the same cache root gets its own folder.
        other = Volume(name="othervol", block_size="1M")
        self.addCleanup(other.cleanup)
        other.format()
        other.mount("--cache-dir", shared)
        odata = write_random(other.path("f"), 3 * MiB, 10)
        drop_kernel_cache()
        self.assertEqual(read(other.path("f")), odata)
        self.assertEqual(read(self.vol.path("f")), data)
        self.assertEqual(len([d for d in os.listdir(shared) if not d.startswith(".")]), 2)

    def test_cache_files_are_private(self):
        write_random(self.vol.path("f"), 100_000, 11)
        os.getxattr(self.vol.path("f"), "tierfs.warmup")
        files = cache_files(self.cache_dir())
        self.assertTrue(files)
        for p in files:
            self.assertEqual(os.stat(p).st_mode & 0o777, 0o600, p)


class WarmupTest(harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def test_warmup_check_and_evict(self):
        os.mkdir(self.vol.path("tree"))
        files = {}
        for i in range(12):
            files[i] = write_random(self.vol.path("tree", "f%d" % i), (i + 1) * 300_000, 20 + i)
        big = write_random(self.vol.path("big"), 8 * MiB, 40)
        self.vol.remount()
        rc, out, err = tierfs("warmup", "--check", "--json", self.vol.path("tree"), self.vol.path("big"))
        self.assertEqual(rc, 0, msg(rc, out, err))
        before = json.loads(out)
        self.assertEqual(before["files"], 13)
        self.assertLess(before["cached_bytes"], before["bytes"])  # big's blocks are not cached yet
        rc, out, err = tierfs("warmup", "--json", "--threads", "4", self.vol.path("tree"), self.vol.path("big"))
        self.assertEqual(rc, 0, msg(rc, out, err))
        warm = json.loads(out)
        self.assertGreaterEqual(warm["fetched_blocks"], 8)
        self.assertEqual(warm["cached_bytes"], warm["bytes"])
        rc, out, err = tierfs("warmup", "--json", self.vol.path("tree"), self.vol.path("big"))
        self.assertEqual(json.loads(out)["fetched_blocks"], 0)
        rc, out, err = tierfs("info", self.vol.path("big"))
        self.assertIn("cached: 8 of 8 blocks", out)
        # `status` shows the counters of the mounts of this host.
        st = json.loads(tierfs("status", "--json", self.vol.meta_url)[1])
        self.assertGreaterEqual(st["sessions"][0]["cache"]["disk"]["blocks"], 20, st)
        self.assertIn("disk cache:", tierfs("status", self.vol.meta_url)[1])
        # Warm after a remount, with the store gone.
        self.vol.umount()
        os.rename(self.vol.bucket, self.vol.bucket + ".away")
        os.mkdir(self.vol.bucket)
        self.vol.mount()
        self.assertEqual(read(self.vol.path("big")), big)
        for i, d in files.items():
            self.assertEqual(read(self.vol.path("tree", "f%d" % i)), d)
        self.vol.umount()
        shutil.rmtree(self.vol.bucket)
        os.rename(self.vol.bucket + ".away", self.vol.bucket)
        self.vol.mount()
        rc, out, err = tierfs("warmup", "--evict", "--json", self.vol.path("tree"))
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("warmup", "--check", "--json", self.vol.path("tree"))
        self.assertEqual(json.loads(out)["cached_bytes"], 0)
        rc, out, err = tierfs("warmup", "/proc/self/status")
        self.assertNotEqual(rc, 0)
        self.assertIn("not in a TierFS mount", err)


class OpenCacheTest(harness.TierFSTestCase):
    PER_TEST = True
    MOUNT_ARGS = ["-o", "allow_other", "--open-cache", "30", "--no-default-permissions", "--attr-cache", "0", "--entry-cache", "0"]

    def test_opens_reuse_attributes_until_this_client_changes_the_file(self):
        os.chmod(self.vol.dir, 0o755)  # other users reach the mount point
        p = self.vol.path("mod.py")
        with open(p, "w") as f:
            f.write("v1")
        os.chmod(p, 0o644)
        for _ in range(20):
            self.assertEqual(read(p), b"v1")
        self.assertGreaterEqual(stats(self.vol.mnt)["meta"]["cached_opens"], 18)
        # This client's own changes are seen at once: new data, and a new mode.
        with open(p, "w") as f:
            f.write("version 2")
        self.assertEqual(read(p), b"version 2")
        os.chmod(p, 0o600)
        self.assertEqual(harness.errno_as(1000, 1000, [], lambda: open(p, "rb").close()), errno.EACCES)
        os.chmod(p, 0o644)
        self.assertEqual(harness.errno_as(1000, 1000, [], lambda: open(p, "rb").close()), 0)
        # Without the option every open asks the engine.
        self.vol.umount()
        self.vol.mount_args = ["-o", "allow_other", "--no-default-permissions"]
        self.vol.mount()
        for _ in range(5):
            read(p)
        self.assertEqual(stats(self.vol.mnt)["meta"]["cached_opens"], 0)


if __name__ == "__main__":
    harness.main()
