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


if __name__ == "__main__":
    harness.main()
