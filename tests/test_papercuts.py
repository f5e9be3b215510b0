"""Paper cuts a new user runs into (issue "Observability and operations", item 6).

- help names the program (`Usage: tierfs ...`);
- `tierfs info` of a file with 10,000 slices (more layout than one 64 KiB xattr value);
- commands other than format/load refuse a missing SQLite file instead of creating one, and
  a failed format or load removes the database file it created (never one that existed);
- mounting over a non-empty directory warns (stderr and log) and still mounts;
- `load` refuses a dump whose entries point at inodes it does not contain;
- `df` of a file-store volume without a capacity limit shows the bucket's disk;
- a read of a chunk of 1500 tiny slices (more reply pieces than writev takes) completes.

Issue 22, item 8:
- `tierfs --version` prints the version;
- sizes take K..E (binary), and one that overflows or is negative is refused naming the option;
- contradictory or pointless mount options are refused before mounting;
- `quota list` names a directory quota by its path;
- `gc` says how much replaced data the compaction grace still keeps, and until when.
"""

import json
import os
import re
import sqlite3
import time

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


class ReadOfManyTinySlicesTest(PapercutTestCase):
    """A read whose reply is made of more pieces than writev takes (IOV_MAX, 1024): a
    journal of lines appended and fsync'd one at a time while compaction could not keep up
    (seen on etcd under leader kills). The reply failed before reaching the kernel, which
    then kept the reader waiting for good. TIERFS_FAULT_NO_COMPACTION stands for the
    compaction that failed."""

    LINES = 1500

    def test_a_read_of_1500_slices_returns_them_all(self):
        v = self.vol_()
        v.format()
        res = v.mount_at(v.mnt, "--no-sync-blocks", env=dict(os.environ, TIERFS_FAULT_NO_COMPACTION="1"))
        self.assertEqual(res[0], 0, msg(*res))
        p = v.path("journal")
        want = b""
        with open(p, "ab", buffering=0) as f:
            for i in range(self.LINES):
                line = b"line %05d\n" % i
                f.write(line)
                os.fsync(f.fileno())
                want += line
        rc, out, err = tierfs("info", p, "--json")
        self.assertEqual(rc, 0, msg(rc, out[:500], err))
        slices = sum(len(c["slices"]) for c in json.loads(out)["chunks"])
        self.assertGreater(slices, 1024, "compaction ran: the read would not need that many pieces")
        # A fresh client with an empty disk cache: each slice's block comes from the store
        # and goes to the kernel as a piece of its own.
        v.umount()
        res = v.mount_at(v.mnt, "--cache-dir", os.path.join(v.dir, "fresh-cache"))
        self.assertEqual(res[0], 0, msg(*res))
        # In a process of its own, so a hung read fails the test instead of hanging it.
        res = run("timeout", "60", "cat", p)
        self.assertEqual(res[0], 0, "the read did not complete: " + msg(res[0], "", res[2]))
        self.assertEqual(res[1].encode(), want)


class MissingSqliteFileTest(PapercutTestCase):
    def test_commands_refuse_a_missing_database(self):
        d = self.local_tmpdir()
        db = os.path.join(d, "typo.db")
        url = "sqlite3://" + db
        mnt = os.path.join(d, "mnt")
        os.mkdir(mnt)
        cache = os.path.join(d, "cache")
        os.mkdir(cache)
        commands = {
            "status": [url],
            "mount": [url, mnt, "-d", "--log", os.path.join(d, "mount.log")],
            "gc": [url],
            "fsck": [url],
            "dump": [url, os.path.join(d, "dump.json")],
            "config": [url],
            "quota": ["list", url],
            "restore": [url, "2024-01-01-00"],
            "upload-staged": [url, cache],
            "cache-server": [url, "--cache-group", "g"],
        }
        for cmd, args in commands.items():
            with self.subTest(cmd=cmd):
                rc, out, err = tierfs(cmd, *args, timeout=60)
                self.assertNotEqual(rc, 0, msg(rc, out, err))
                self.assertIn(db, err, "the error names the path\n" + msg(rc, out, err))
                self.assertIn("does not exist", err, msg(rc, out, err))
                self.assert_no_db_files(db, cmd)
                self.assertFalse(is_mounted(mnt))
        self.assertFalse(os.path.exists(os.path.join(d, "dump.json")))

    def test_failed_format_removes_the_database_it_created(self):
        d = self.local_tmpdir()
        blocker = os.path.join(d, "blocker")
        with open(blocker, "w") as f:
            f.write("a file, not a directory")
        cases = {
            "bucket under a file": ["--storage", "file", "--bucket", os.path.join(blocker, "bucket")],
            "unreachable s3": ["--storage", "s3", "--bucket", "http://127.0.0.1:1/b?tries=1",
                               "--access-key", "ak", "--secret-key", "sk"],
            "bad session timeout": ["--storage", "file", "--bucket", os.path.join(d, "b"), "--session-timeout", "0"],
        }
        for n, (what, args) in enumerate(cases.items()):
            with self.subTest(case=what):
                db = os.path.join(d, "vol-%d.db" % n)
                rc, out, err = tierfs("format", "sqlite3://" + db, "v", *args, timeout=90)
                self.assertNotEqual(rc, 0, msg(rc, out, err))
                self.assert_no_db_files(db, "format with " + what)

    def test_failed_format_keeps_a_database_that_existed(self):
        d = self.local_tmpdir()
        db = os.path.join(d, "empty.db")
        open(db, "wb").close()
        bad = ["--storage", "file", "--bucket", "/proc/version/bucket"]
        rc, out, err = tierfs("format", "sqlite3://" + db, "v", *bad)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(os.path.exists(db), "format removed a database file it did not create")

        v = self.vol_()
        v.format()
        uuid = v.status_json()["uuid"]
        rc, out, err = tierfs("format", v.meta_url, "other", "--force", *bad)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(v.status_json()["uuid"], uuid, "the existing volume is still there")

    def test_format_and_load_still_create_a_database(self):
        v = self.vol_()
        self.assertFalse(os.path.exists(v.meta_db))
        v.format()
        self.assertTrue(os.path.exists(v.meta_db))
        dump = os.path.join(v.dir, "dump.json")
        self.assertOk(tierfs("dump", v.meta_url, dump), "dump")
        db2 = os.path.join(v.dir, "loaded.db")
        self.assertOk(tierfs("load", "sqlite3://" + db2, dump), "load into a new file")
        self.assertOk(tierfs("status", "sqlite3://" + db2), "status of the loaded volume")


class MountOverNonEmptyDirectoryTest(PapercutTestCase):
    def test_mount_warns_and_mounts(self):
        v = self.vol_()
        v.format()
        for name in ("a", "b", "c"):
            with open(os.path.join(v.mnt, name), "w") as f:
                f.write(name)
        rc, out, err = v.mount()
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(is_mounted(v.mnt))
        self.assertIn("warning", err.lower(), msg(rc, out, err))
        self.assertIn(v.mnt, err, msg(rc, out, err))
        self.assertIn("3 entries", err, msg(rc, out, err))
        log = v.read_log()
        self.assertTrue(any(v.mnt in line and "3 entries" in line and "warn" in line.lower()
                            for line in log.splitlines()), "the log has the warning:\n" + v.log_tail())
        self.assertEqual(os.listdir(v.mnt), [], "the volume's root is what the mount shows")
        v.umount()
        self.assertEqual(sorted(os.listdir(v.mnt)), ["a", "b", "c"])

    def test_empty_mount_point_gives_no_warning(self):
        v = self.vol_()
        v.format()
        rc, out, err = v.mount()
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertNotIn("warning", err.lower(), msg(rc, out, err))
        self.assertNotIn("not empty", v.read_log())


class LoadOfADamagedDumpTest(PapercutTestCase):
    def test_load_refuses_entries_to_missing_inodes(self):
        v = self.vol_()
        v.format()
        v.mount()
        os.mkdir(v.path("dir"))
        for name in ("keep", "dir/victim", "dir/other"):
            with open(v.path(name), "w") as f:
                f.write(name)
        victim_ino = os.stat(v.path("dir", "victim")).st_ino
        v.umount()
        dump = os.path.join(v.dir, "dump.json")
        self.assertOk(tierfs("dump", v.meta_url, dump), "dump")
        with open(dump) as f:
            doc = json.load(f)
        # The intact dump loads (so the refusal below is about the damage).
        good = os.path.join(v.dir, "good.db")
        self.assertOk(tierfs("load", "sqlite3://" + good, dump), "load of the intact dump")

        before = len(doc["inodes"])
        doc["inodes"] = [i for i in doc["inodes"] if i["ino"] != victim_ino]
        self.assertEqual(len(doc["inodes"]), before - 1, "the victim's inode was in the dump")
        damaged = os.path.join(v.dir, "damaged.json")
        with open(damaged, "w") as f:
            json.dump(doc, f)
        db = os.path.join(v.dir, "fresh.db")
        rc, out, err = tierfs("load", "sqlite3://" + db, damaged)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("victim", err, msg(rc, out, err))
        self.assertIn(str(victim_ino), err, msg(rc, out, err))
        self.assert_no_db_files(db, "a refused load")
        self.assertNotEqual(tierfs("status", "sqlite3://" + db)[0], 0, "no volume after a refused load")

        # Into an engine that exists (and is empty): nothing is written.
        con_db = os.path.join(v.dir, "existing.db")
        open(con_db, "wb").close()
        rc, out, err = tierfs("load", "sqlite3://" + con_db, damaged)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(os.path.exists(con_db))
        con = sqlite3.connect(con_db)
        try:
            self.assertEqual(con.execute("SELECT COUNT(*) FROM kv").fetchone()[0], 0, "keys were written")
        finally:
            con.close()
        # A backup taken while files were deleted can hold such entries: --skip-dangling
        # loads it without them.
        skipped = os.path.join(self.local_tmpdir(), "skipped.db")
        rc, out, err = tierfs("load", "sqlite3://" + skipped, damaged, "--skip-dangling")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("left out 1 directory entries", err)
        rc, out, err = tierfs("fsck", "sqlite3://" + skipped, "--skip-objects", "--repair")
        self.assertEqual(tierfs("fsck", "sqlite3://" + skipped, "--skip-objects")[0], 0, msg(rc, out, err))


class DfOfALocalDiskTest(PapercutTestCase):
    def small_disk(self, size_mib):
        d = self.local_tmpdir()  # removed after the unmount below (cleanups run last-in first-out)
        disk = os.path.join(d, "disk")
        os.mkdir(disk)
        rc, out, err = run("mount", "-t", "tmpfs", "-o", "size=%dm" % size_mib, "tierfs-test-disk", disk)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.addCleanup(run, "umount", "-l", disk, timeout=30)
        return disk

    def test_df_shows_the_bucket_disk_without_a_limit(self):
        disk = self.small_disk(64)
        with open(os.path.join(disk, "other-data"), "wb") as f:
            f.write(b"\0" * (16 * MiB))
        v = self.vol_(storage=["--storage", "file", "--bucket", os.path.join(disk, "bucket")])
        v.format()
        v.mount()
        with open(v.path("f"), "wb") as f:
            f.write(os.urandom(8 * MiB))
            f.flush()
            os.fsync(f.fileno())
        st = os.statvfs(v.mnt)
        total = st.f_blocks * st.f_frsize
        self.assertEqual(total, 64 * MiB, "df shows the size of the bucket's file system")
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        self.assertTrue(8 * MiB <= used <= 8 * MiB + 64 * 1024, "used %d is the volume's own usage" % used)
        avail = st.f_bavail * st.f_frsize
        disk_st = os.statvfs(disk)
        disk_avail = disk_st.f_bavail * disk_st.f_frsize
        # The room above the bucket's free-space floor (mount --bucket-free-space-ratio, 5%).
        floor = int(0.05 * disk_st.f_blocks * disk_st.f_frsize)
        self.assertLessEqual(abs(avail - (disk_avail - floor)), MiB,
                             "avail %d vs the disk's %d above its floor of %d" % (avail, disk_avail, floor))
        self.assertLess(avail, 41 * MiB, "the other data on the disk is not available")
        # df agrees (it reads the same statfs).
        rc, out, err = run("df", "-B1", "--output=size", v.mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(int(out.split()[-1]), 64 * MiB)

        # A directory quota still shows its own limit.
        os.mkdir(v.path("q"))
        self.assertOk(tierfs("quota", "set", v.meta_url, "--path", "/q", "--capacity", "10M"), "quota set")
        st = os.statvfs(v.path("q"))
        self.assertEqual(st.f_blocks * st.f_frsize, 10 * MiB)

    def test_capacity_limit_is_still_shown(self):
        disk = self.small_disk(64)
        v = self.vol_(storage=["--storage", "file", "--bucket", os.path.join(disk, "bucket")])
        v.format("--capacity", "1G")
        v.mount()
        st = os.statvfs(v.mnt)
        self.assertEqual(st.f_blocks * st.f_frsize, 1 << 30, "the volume's --capacity")


class VersionTest(PapercutTestCase):
    def test_version_flag_prints_the_version(self):
        rc, version, err = tierfs("version")
        self.assertEqual(rc, 0, msg(rc, version, err))
        for flag in ("--version", "-V"):
            rc, out, err = tierfs(flag)
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.assertEqual(out.strip(), version.strip())
            self.assertRegex(out, r"^tierfs \S+")


class SizesTest(PapercutTestCase):
    def test_binary_suffixes_up_to_exa_and_nothing_that_overflows(self):
        v = self.vol_()
        v.format("--capacity", "2P")
        self.assertEqual(v.status_json()["capacity"], 2 << 50)
        self.assertOk(tierfs("config", v.meta_url, "--capacity", "1.5E"), "config --capacity 1.5E")
        self.assertEqual(v.status_json()["capacity"], 3 << 59)
        for size in ("99999999T", "8E", "-1", "-5G", "18446744073709551616"):
            with self.subTest(size=size):
                res = tierfs("quota", "set", v.meta_url, "--uid", "1000", "--capacity", size)
                self.assertFails(res, "--capacity", what="quota set --capacity " + size)
                self.assertIn(size, res[2])
        rc, out, err = tierfs("quota", "list", v.meta_url, "--json")
        self.assertEqual([q for q in json.loads(out) if q["kind"] == "user"], [], "a refused size set no quota")
        res = tierfs("quota", "set", v.meta_url, "--uid", "1000", "--inodes", "99999999999999999999")
        self.assertFails(res, "--inodes", what="an inode count past 2^63")
        res = v.mount("--cache-size", "99999999999999999999999T", check=False)
        self.assertFails(res, "--cache-size", what="mount --cache-size 99999999999999999999999T")
        self.assertIn("too large", res[2])
        self.assertFalse(is_mounted(v.mnt))
        res = v.mount("--cache-size", "-1G", check=False)
        self.assertFails(res, "--cache-size", what="mount --cache-size -1G")
        self.assertFalse(is_mounted(v.mnt))


class ContradictoryOptionsTest(PapercutTestCase):
    def test_mount_refuses_contradictory_or_pointless_options(self):
        v = self.vol_()
        v.format()
        cases = {
            "negative attribute cache": (["--attr-cache", "-3"], ["--attr-cache"]),
            "negative entry cache": (["--entry-cache", "-1"], ["--entry-cache"]),
            "read-only with write-back": (["--read-only", "--writeback"], ["--writeback", "read-only"]),
            "-o ro with write-back": (["-o", "ro", "--writeback"], ["--writeback", "read-only"]),
            "packing without write-back": (["--pack-below", "64K"], ["--pack-below"]),
            "upload delay without write-back": (["--upload-delay", "5"], ["--upload-delay"]),
            "no-sharing without a group": (["--no-sharing"], ["--no-sharing"]),
            "cache-writes without a disk cache": (["--cache-dir", "memory", "--cache-writes"], ["--cache-writes"]),
            "an unknown -o option": (["-o", "allow_other,nosuchopt"], ["nosuchopt"]),
        }
        for what, (args, words) in cases.items():
            with self.subTest(case=what):
                if is_mounted(v.mnt):  # a case that mounted after all (reported below)
                    v.umount()
                res = v.mount(*args, check=False)
                self.assertFails(res, *words, what=what)
                for word in words:
                    self.assertIn(word, res[2], what)
                self.assertFalse(is_mounted(v.mnt), what)
        self.assertIn("unknown mount option 'nosuchopt'", v.mount("-o", "nosuchopt", check=False)[2])
        # The sensible combinations still mount.
        v.mount("--writeback", "--pack-below", "64K", "--upload-delay", "0", "-o", "allow_other,noatime")
        v.umount()
        v.mount("--read-only", "--attr-cache", "0")
        v.umount()


class QuotaListNamesPathsTest(PapercutTestCase):
    def test_directory_quotas_are_listed_by_path(self):
        v = self.vol_()
        v.format("--capacity", "1T")
        v.mount()
        os.makedirs(v.path("teams", "vision"))
        v.umount()
        self.assertOk(tierfs("quota", "set", v.meta_url, "--path", "/teams/vision", "--capacity", "50G"), "quota set")
        self.assertOk(tierfs("quota", "set", v.meta_url, "--uid", "1001", "--capacity", "2T"), "quota set --uid")
        out = self.assertOk(tierfs("quota", "list", v.meta_url), "quota list")
        rows = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines()[1:]}
        self.assertIn("dir /teams/vision", rows, out)
        self.assertIn("dir /", rows, out)  # the volume's own limits
        self.assertIn("user 1001", rows, out)
        listed = json.loads(self.assertOk(tierfs("quota", "list", v.meta_url, "--json"), "quota list --json"))
        paths = sorted(q.get("path") for q in listed if q["kind"] == "dir")
        self.assertEqual(paths, ["/", "/teams/vision"])
        out = self.assertOk(tierfs("quota", "get", v.meta_url, "--path", "/teams/vision"), "quota get")
        self.assertIn("/teams/vision", out)


class GcSaysWhatCompactionKeepsTest(PapercutTestCase):
    def test_gc_reports_the_grace_of_replaced_data(self):
        v = self.vol_()
        v.format()
        v.mount("--compact-grace", "3600")
        p = v.path("rewritten")
        with open(p, "wb") as f:
            f.write(os.urandom(MiB))
        for i in range(30):  # 30 committed overwrites of 64 KiB each
            with open(p, "r+b") as f:
                f.seek(i * 32768)
                f.write(os.urandom(65536))
        started = time.time()
        self.assertOk(tierfs("compact", p), "compact")
        v.umount()
        out = self.assertOk(tierfs("gc", v.meta_url, "--delete"), "gc --delete")
        held = [line for line in out.splitlines() if line.startswith("held:")]
        self.assertEqual(len(held), 1, out)
        self.assertIn("replaced by compaction", held[0])
        self.assertIn("--compact-grace", held[0])
        self.assertRegex(held[0], r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
        j = json.loads(self.assertOk(tierfs("gc", v.meta_url, "--json"), "gc --json"))
        self.assertGreaterEqual(j["held_slices"], 31)
        self.assertGreaterEqual(j["held_bytes"], MiB)
        self.assertGreaterEqual(j["held_until"], started + 3500)


if __name__ == "__main__":
    harness.main()
