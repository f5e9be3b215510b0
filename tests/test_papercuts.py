"""Paper cuts a new user runs into (issue "Observability and operations", item 6).

- help names the program (`Usage: tierfs ...`);
- `tierfs info` of a file with 10,000 slices (more layout than one 64 KiB xattr value);
- commands other than format/load refuse a missing SQLite file instead of creating one, and
  a failed format or load removes the database file it created (never one that existed);
- mounting over a non-empty directory warns (stderr and log) and still mounts;
- `load` refuses a dump whose entries point at inodes it does not contain;
- `df` of a file-store volume without a capacity limit shows the bucket's disk.
"""

import json
import os
import re
import sqlite3

import harness
from harness import Volume, is_mounted, msg, run, tierfs

MiB = 1 << 20
CHUNK = 64 * MiB


class PapercutTestCase(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def vol_(self, **kw):
        v = Volume(**kw)
        self.addCleanup(v.cleanup)
        return v

    def assert_no_db_files(self, path, what):
        for suffix in ("", "-wal", "-shm", "-journal"):
            self.assertFalse(os.path.exists(path + suffix), "%s left %s behind" % (what, path + suffix))


class HelpNamesTheProgramTest(PapercutTestCase):
    def test_usage_lines_name_tierfs(self):
        rc, out, err = tierfs("--help")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(out, r"Usage: tierfs \[OPTIONS\]", "top-level usage line\n" + out)
        for sub in ("format", "mount", "info"):
            with self.subTest(sub=sub):
                rc, out, err = tierfs(sub, "--help")
                self.assertEqual(rc, 0, msg(rc, out, err))
                self.assertRegex(out, r"Usage: tierfs %s \[OPTIONS\]" % sub, "usage line of %s\n%s" % (sub, out))


class InfoOfManySlicesTest(PapercutTestCase):
    SLICES = 10000
    PER_CHUNK = 40  # below the compactor's background threshold (50 commits to a chunk)

    def test_info_of_a_file_with_10000_slices(self):
        v = self.vol_()
        v.format()
        v.mount("--no-sync-blocks")  # 10,000 block fsyncs would only cost time
        p = v.path("many")
        expected = set()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            # Distinct, non-adjacent offsets: every write is a slice of its own.
            for i in range(self.SLICES):
                chunk, j = divmod(i, self.PER_CHUNK)
                os.pwrite(fd, b"x", chunk * CHUNK + j * 65536)
                expected.add((chunk, j * 65536))
            os.fsync(fd)
        finally:
            os.close(fd)
        # One xattr value cannot hold this layout (the kernel's limit is 64 KiB).
        with self.assertRaises(OSError):
            os.getxattr(p, "tierfs.info")

        rc, out, err = tierfs("info", p, "--json")
        self.assertEqual(rc, 0, msg(rc, out[:2000], err))
        info = json.loads(out)
        self.assertEqual(set(info) - {"cache"}, {"inode", "length", "volume", "block_size", "chunks"},
                         "the JSON document keeps its fields (no paging fields)")
        self.assertEqual(info["length"], (self.SLICES // self.PER_CHUNK - 1) * CHUNK + (self.PER_CHUNK - 1) * 65536 + 1)
        got = set()
        for c in info["chunks"]:
            for s in c["slices"]:
                got.add((c["index"], s["pos"]))
                self.assertEqual(len(s["objects"]), 1, s)
        self.assertEqual(len(got), self.SLICES)
        self.assertEqual(got, expected)
        indexes = [c["index"] for c in info["chunks"]]
        self.assertEqual(indexes, sorted(set(indexes)), "each chunk once, in order")

        rc, out, err = tierfs("info", p)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(re.findall(r"^\s+pos \d+ len 1: slice", out, re.M)), self.SLICES)

    def test_info_of_a_small_file_is_unchanged(self):
        v = self.vol_()
        v.format()
        v.mount()
        p = v.path("small")
        with open(p, "wb") as f:
            f.write(b"y" * 5000)
        info = v.info_json(p)
        whole = json.loads(os.getxattr(p, "tierfs.info"))
        self.assertEqual(info["chunks"][0]["slices"][0]["id"], whole["chunks"][0]["slices"][0]["id"])
        self.assertEqual(info["length"], 5000)
        self.assertNotIn("page", info)


if __name__ == "__main__":
    harness.main()
