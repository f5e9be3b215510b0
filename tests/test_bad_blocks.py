"""Missing and corrupt block objects: reads fail with EIO, the mount stays up, and the
client log names the object and the file."""

import errno
import os
import re

import harness
from harness import is_mounted, msg, tierfs

MiB = 1 << 20


class BadBlocksTest(harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"
    # No local disk cache, so every read after a remount goes to the bucket.
    MOUNT_ARGS = ["--mem-cache-size", "0", "--cache-dir", "memory"]

    def write(self, name, size):
        p = os.path.join(self.mnt, name)
        data = os.urandom(size)
        with open(p, "wb") as f:
            f.write(data)
        return p, data

    def objects(self, p, expect_min):
        keys = self.vol.object_keys(p)
        self.assertGreaterEqual(len(keys), expect_min, "info lists too few objects: %r" % keys)
        for k in keys:
            self.assertFalse(os.path.isabs(k), "object key must be relative to the bucket: %s" % k)
            self.assertTrue(os.path.isfile(os.path.join(self.vol.bucket, k)), "object file missing: %s" % k)
        return keys

    def read_all(self, p):
        with open(p, "rb") as f:
            return f.read()

    def assert_eio(self, p):
        with self.assertRaises(OSError) as cm:
            self.read_all(p)
        self.assertEqual(cm.exception.errno, errno.EIO, "expected EIO, got %r" % cm.exception)

    def assert_logged(self, key, p):
        # The client may flush its log a moment after the failed read.
        log = harness.wait_for(lambda: (lambda t: t if key in t else None)(self.vol.read_log()), timeout=10) \
            or self.vol.read_log()
        self.assertIn(key, log, "client log does not name the object key %s\nlog tail:\n%s" % (key, self.vol.log_tail()))
        ino = os.stat(p).st_ino
        name = os.path.basename(p)
        named = (re.search(r"\bino(de)?\b\W{0,3}%d\b" % ino, log, re.I) or name in log
                 or re.search(r"\b(inode|ino)[:= ]+%d\b" % ino, log, re.I))
        self.assertTrue(named, "client log names neither inode %d nor %s\nlog tail:\n%s"
                        % (ino, name, self.vol.log_tail()))

    def assert_mount_alive(self, good_path, good_data):
        self.assertTrue(is_mounted(self.mnt))
        self.assertEqual(self.read_all(good_path), good_data, "another file no longer reads")
        with open(os.path.join(self.mnt, "probe"), "wb") as f:
            f.write(b"still writable")
        self.assertEqual(self.read_all(os.path.join(self.mnt, "probe")), b"still writable")
        self.assertEqual(len(self.vol.status_json()["sessions"]), 1)

    def test_missing_object(self):
        bad, _ = self.write("victim-missing", 3 * MiB + MiB // 2)
        good, good_data = self.write("good", 2 * MiB + 5)
        keys = self.objects(bad, 4)
        self.objects(good, 3)
        key = keys[1]
        self.vol.remount()    # drop every cache
        os.unlink(os.path.join(self.vol.bucket, key))
        self.assert_eio(bad)
        self.assert_mount_alive(good, good_data)
        self.assert_logged(key, bad)
        # Blocks that are still there read fine.
        with open(bad, "rb") as f:
            f.seek(3 * MiB)
            self.assertEqual(len(f.read()), MiB // 2)
        res = tierfs("umount", self.mnt)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertFalse(is_mounted(self.mnt))

    def test_corrupt_object(self):
        bad, _ = self.write("victim-corrupt", 2 * MiB + 300000)
        good, good_data = self.write("good", MiB + 7)
        keys = self.objects(bad, 3)
        key = keys[0]
        self.vol.remount()
        obj = os.path.join(self.vol.bucket, key)
        with open(obj, "r+b") as f:
            f.seek(os.path.getsize(obj) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0x5A]))
        self.assert_eio(bad)
        self.assert_mount_alive(good, good_data)
        self.assert_logged(key, bad)
        res = tierfs("umount", self.mnt)
        self.assertEqual(res[0], 0, msg(*res))
        self.assertFalse(is_mounted(self.mnt))

    def test_truncated_object(self):
        bad, _ = self.write("victim-short", 2 * MiB)
        good, good_data = self.write("good", 4096)
        keys = self.objects(bad, 2)
        key = keys[-1]
        self.vol.remount()
        obj = os.path.join(self.vol.bucket, key)
        os.truncate(obj, os.path.getsize(obj) // 3)
        self.assert_eio(bad)
        self.assert_mount_alive(good, good_data)
        self.assert_logged(key, bad)

    def test_restored_object_reads_again(self):
        bad, data = self.write("victim-restored", 2 * MiB + 1)
        keys = self.objects(bad, 3)
        obj = os.path.join(self.vol.bucket, keys[0])
        with open(obj, "rb") as f:
            saved = f.read()
        self.vol.remount()
        os.rename(obj, obj + ".away")
        self.assert_eio(bad)
        os.rename(obj + ".away", obj)
        # The failure is not remembered: the next read fetches the block again.
        self.assertEqual(self.read_all(bad), data)
        with open(obj, "rb") as f:
            self.assertEqual(f.read(), saved)

    def test_bad_object_in_multi_file_directory(self):
        # Many files, one bad: listing and reading the rest of the directory works.
        files = {}
        for i in range(10):
            files["file-%d" % i] = self.write("file-%d" % i, 300000 + i)[1]
        victim = os.path.join(self.mnt, "file-4")
        key = self.objects(victim, 1)[0]
        self.vol.remount()
        os.unlink(os.path.join(self.vol.bucket, key))
        self.assertEqual(sorted(set(os.listdir(self.mnt)) - {os.path.basename(self.work)}), sorted(files))
        for name, data in files.items():
            p = os.path.join(self.mnt, name)
            if name == "file-4":
                self.assert_eio(p)
            else:
                self.assertEqual(self.read_all(p), data, name)
        self.assert_logged(key, victim)


if __name__ == "__main__":
    harness.main()
