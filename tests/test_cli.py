"""The tierfs command line: help, version, format/status, and every error a user can cause.

Each error case checks a non-zero exit, a message that says what was wrong, and that
nothing already stored was lost or silently created.
"""

import fcntl
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness
from harness import Volume, is_mounted, msg, pid_alive, run, tierfs, wait_for

SUBCOMMANDS = {
    "format": ["--storage", "--bucket", "--block-size", "--force"],
    "mount": ["--log", "--attr-cache", "--entry-cache", "--buffer-size", "--cache-dir", "--cache-size", "--free-space-ratio",
              "--mem-cache-size", "--cache-writes", "--fuse-threads", "--no-passthrough",
              "--passthrough-min-size", "--passthrough-cache-size"],
    "umount": ["--force", "--wait"],
    "status": ["--json"],
    "info": ["--json"],
    "version": [],
}

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

NOT_FORMATTED = ("not formatted", "no tierfs volume")


def project_version():
    with open(os.path.join(harness.REPO, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*tierfs\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


class CliTestCase(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def vol_(self, **kw):
        v = Volume(**kw)
        self.addCleanup(v.cleanup)
        return v

    def assert_no_volume(self, url, what):
        res = tierfs("status", url)
        self.assertFails(res, *NOT_FORMATTED, what=what + ": status afterwards")


class HelpAndVersionTest(CliTestCase):
    def test_top_level_help(self):
        rc, out, err = tierfs("--help")
        self.assertEqual(rc, 0, msg(rc, out, err))
        for sub in SUBCOMMANDS:
            self.assertIn(sub, out + err, "top-level help should list subcommand %s" % sub)

    def test_subcommand_help(self):
        for sub, options in SUBCOMMANDS.items():
            with self.subTest(sub=sub):
                rc, out, err = tierfs(sub, "--help")
                self.assertEqual(rc, 0, "%s --help\n%s" % (sub, msg(rc, out, err)))
                text = out + err
                self.assertTrue(text.strip(), "%s --help printed nothing" % sub)
                for opt in options:
                    self.assertIn(opt, text, "%s --help should document %s" % (sub, opt))

    def test_mount_help_mentions_daemon_and_o(self):
        rc, out, err = tierfs("mount", "--help")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(out + err, r"(^|[\s,])-d\b")
        self.assertRegex(out + err, r"(^|[\s,])-o\b")

    def test_version(self):
        rc, out, err = tierfs("version")
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertRegex(out, r"\d+\.\d+\.\d+")
        v = project_version()
        if v:
            self.assertIn(v, out, "version output should carry the project version %s" % v)

    def test_unknown_subcommand(self):
        res = tierfs("no-such-subcommand")
        self.assertNotEqual(res[0], 0, msg(*res))


class FormatStatusTest(CliTestCase):
    def test_format_then_status_json(self):
        v = self.vol_(name="statusvol")
        self.assertOk(v.format(), "format")
        st = v.status_json()
        for key in ("name", "uuid", "storage", "bucket", "block_size", "sessions", "used_bytes", "inodes"):
            self.assertIn(key, st, "status --json lacks %r: %s" % (key, st))
        self.assertEqual(st["name"], "statusvol")
        self.assertRegex(str(st["uuid"]), UUID_RE)
        self.assertEqual(st["storage"], "file")
        self.assertEqual(os.path.realpath(str(st["bucket"]).rstrip("/")), os.path.realpath(v.bucket))
        self.assertEqual(st["block_size"], 4 << 20, "default block size is 4 MiB")
        self.assertEqual(st["sessions"], [])
        self.assertIsInstance(st["used_bytes"], int)
        self.assertIsInstance(st["inodes"], int)
        self.assertEqual(st["used_bytes"], 0, "a fresh volume stores no data")
        self.assertTrue(os.path.isdir(v.bucket), "format should create the bucket directory")

        # Plain status names the volume too.
        rc, out, err = tierfs("status", v.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("statusvol", out)
        self.assertIn(st["uuid"], out)

        # A live mount shows up as a session with its pid and mountpoint; usage grows.
        v.mount()
        st1 = v.status_json()
        self.assertEqual(len(st1["sessions"]), 1, st1)
        s = st1["sessions"][0]
        self.assertEqual(os.path.realpath(str(s.get("mountpoint"))), os.path.realpath(v.mnt), s)
        self.assertIsNotNone(v.pid, "could not find the mount daemon")
        self.assertEqual(int(s.get("pid")), v.pid, s)
        self.assertEqual(st1["uuid"], st["uuid"])

        data = os.urandom(3 << 20)
        for i in range(5):
            with open(v.path("f%d" % i), "wb") as f:
                f.write(data)
                os.fsync(f.fileno())

        def grown():
            s2 = v.status_json()
            return s2 if s2["used_bytes"] >= 5 * len(data) and s2["inodes"] >= st["inodes"] + 5 else None
        st2 = wait_for(grown, timeout=30)
        self.assertTrue(st2, "usage did not reach 15 MiB / +5 inodes: %s" % v.status_json())

        v.umount()
        st4 = wait_for(lambda: (lambda s: s if s["sessions"] == [] else None)(v.status_json()), timeout=30)
        self.assertTrue(st4, "session remains after umount: %s" % v.status_json())

    def test_format_block_size_option(self):
        v = self.vol_(block_size="1M")
        self.assertOk(v.format(), "format --block-size 1M")
        self.assertEqual(v.status_json()["block_size"], 1 << 20)

    def test_block_size_bounds_accepted(self):
        for bs, val in (("64K", 64 << 10), ("16M", 16 << 20)):
            with self.subTest(bs=bs):
                v = self.vol_(block_size=bs)
                self.assertOk(v.format(), "format --block-size " + bs)
                self.assertEqual(v.status_json()["block_size"], val)

    def test_bad_block_size(self):
        for bs in ("3K", "1G", "17M", "abc", "0"):
            with self.subTest(bs=bs):
                v = self.vol_(block_size=bs)
                res = v.format(check=False)
                self.assertFails(res, "block", what="format --block-size " + bs)
                self.assert_no_volume(v.meta_url, "bad block size " + bs)

    def test_format_refuses_overwrite(self):
        v = self.vol_(name="first")
        v.format()
        uuid = v.status_json()["uuid"]
        v.mount()
        with open(v.path("keep.txt"), "w") as f:
            f.write("precious")
        os.mkdir(v.path("dir"))
        v.umount()

        # Same name and a different name: both refused without --force.
        for name in ("first", "second"):
            with self.subTest(name=name):
                res = tierfs("format", v.meta_url, name, "--storage", "file", "--bucket", v.bucket)
                self.assertFails(res, "exist", "already", what="format over a volume")
                self.assertIn("volume", (res[1] + res[2]).lower(), "message should say a volume is there\n" + msg(*res))
                self.assertIn("--force", res[1] + res[2], "message should point at --force\n" + msg(*res))
                st = v.status_json()
                self.assertEqual(st["name"], "first")
                self.assertEqual(st["uuid"], uuid)

        # The existing volume still mounts with its files.
        v.mount()
        with open(v.path("keep.txt")) as f:
            self.assertEqual(f.read(), "precious")
        self.assertTrue(os.path.isdir(v.path("dir")))
        v.umount()

        # --force replaces it.
        res = tierfs("format", v.meta_url, "second", "--storage", "file", "--bucket", v.bucket, "--force")
        self.assertOk(res, "format --force")
        st = v.status_json()
        self.assertEqual(st["name"], "second")
        self.assertNotEqual(st["uuid"], uuid, "--force should create a new volume")
        v.mount()
        self.assertFalse(os.path.exists(v.path("keep.txt")), "new volume still shows the old files")
        with open(v.path("new.txt"), "w") as f:
            f.write("fresh")
        v.remount()
        with open(v.path("new.txt")) as f:
            self.assertEqual(f.read(), "fresh")

    def test_format_refused_while_mounted_keeps_mount_working(self):
        v = self.vol_()
        v.format()
        v.mount()
        with open(v.path("a"), "w") as f:
            f.write("alive")
        res = tierfs("format", v.meta_url, v.name, "--storage", "file", "--bucket", v.bucket)
        self.assertFails(res, "exist", "already", what="format over a mounted volume")
        self.assertIn("--force", res[1] + res[2], msg(*res))
        with open(v.path("a")) as f:
            self.assertEqual(f.read(), "alive")
        with open(v.path("b"), "w") as f:
            f.write("still writable")
        v.remount()
        with open(v.path("b")) as f:
            self.assertEqual(f.read(), "still writable")


class BadInputTest(CliTestCase):
    def test_malformed_meta_url(self):
        d = self.local_tmpdir()
        for url in ("nonsense",):
            with self.subTest(url=url):
                res = tierfs("format", url, "v", "--storage", "file", "--bucket", os.path.join(d, "b"))
                self.assertFails(res, "URL", what="format " + url)
                res = tierfs("status", url)
                self.assertFails(res, "URL", what="status " + url)
                os.makedirs(os.path.join(d, "m"), exist_ok=True)
                res = tierfs("mount", url, os.path.join(d, "m"), "-d")
                self.assertFails(res, "URL", what="mount " + url)
                self.assertFalse(is_mounted(os.path.join(d, "m")))
        self.assertFalse(os.path.exists(os.path.join(d, "b")), "a failed format created the bucket")

    def test_unknown_meta_scheme(self):
        d = self.local_tmpdir()
        res = tierfs("format", "nonsense://what/ever", "v", "--storage", "file", "--bucket", os.path.join(d, "b"))
        self.assertFails(res, "URL", "scheme", "engine", "nonsense", what="format with unknown scheme")
        self.assertFalse(os.path.exists(os.path.join(d, "b")), "a failed format created the bucket")

    def test_unreachable_shared_engines(self):
        d = self.local_tmpdir()
        os.mkdir(os.path.join(d, "m"))
        for url in ("redis://127.0.0.1:1/1", "postgres://user:pw-not-shown@127.0.0.1:1/tierfs"):
            with self.subTest(url=url):
                for args in (("format", url, "v", "--storage", "file", "--bucket", os.path.join(d, "b")),
                             ("status", url), ("mount", url, os.path.join(d, "m"), "-d")):
                    res = tierfs(*args)
                    self.assertFails(res, "127.0.0.1", what=" ".join(args[:1]) + " " + url)
                    self.assertNotIn("pw-not-shown", res[1] + res[2])
                self.assertFalse(is_mounted(os.path.join(d, "m")))
                self.assertFalse(os.path.exists(os.path.join(d, "b")), "a failed format created the bucket")

    def test_unknown_storage(self):
        v = self.vol_()
        res = tierfs("format", v.meta_url, "v", "--storage", "nosuchstore", "--bucket", v.bucket)
        self.assertFails(res, "nosuchstore", "storage", what="format --storage nosuchstore")
        self.assert_no_volume(v.meta_url, "unknown storage")

    def test_status_and_mount_of_missing_db(self):
        v = self.vol_()
        self.assertFalse(os.path.exists(v.meta_db))
        self.assertFails(tierfs("status", v.meta_url), *NOT_FORMATTED, what="status of missing db")
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
        self.assertFails(res, *NOT_FORMATTED, what="mount of missing db")
        self.assertFalse(is_mounted(v.mnt))
        self.assert_no_volume(v.meta_url, "missing db")

    def test_mount_of_empty_db_file(self):
        v = self.vol_()
        open(v.meta_db, "wb").close()
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
        self.assertFails(res, *NOT_FORMATTED, what="mount of empty db")
        self.assertFalse(is_mounted(v.mnt))
        self.assertFails(tierfs("status", v.meta_url), *NOT_FORMATTED, what="status of empty db")
        self.assert_no_volume(v.meta_url, "empty db")

    def test_foreign_sqlite_db_is_left_alone(self):
        v = self.vol_()
        con = sqlite3.connect(v.meta_db)
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        con.executemany("INSERT INTO notes (body) VALUES (?)", [("one",), ("two",)])
        con.commit()
        con.close()
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
        foreign = NOT_FORMATTED + ("not a tierfs",)
        self.assertFails(res, *foreign, what="mount of a foreign sqlite db")
        self.assertFalse(is_mounted(v.mnt))
        self.assertFails(tierfs("status", v.meta_url), *foreign, what="status of a foreign db")
        res = tierfs("format", v.meta_url, "v", "--storage", "file", "--bucket", v.bucket)
        self.assertNotEqual(res[0], 0, "format must not take over another application's database\n" + msg(*res))
        con = sqlite3.connect(v.meta_db)
        rows = con.execute("SELECT body FROM notes ORDER BY id").fetchall()
        con.close()
        self.assertEqual(rows, [("one",), ("two",)])

    def test_mount_missing_directory(self):
        v = self.vol_()
        v.format()
        missing = os.path.join(v.dir, "no", "such", "dir")
        res = tierfs("mount", v.meta_url, missing, "-d", "--log", v.log)
        self.assertFails(res, "does not exist", what="mount on a missing directory")
        self.assertFalse(is_mounted(missing))
        self.assertEqual(v.status_json()["sessions"], [], "a failed mount left a session behind")

    def test_mount_on_regular_file(self):
        v = self.vol_()
        v.format()
        f = os.path.join(v.dir, "plainfile")
        open(f, "w").close()
        res = tierfs("mount", v.meta_url, f, "-d", "--log", v.log)
        self.assertFails(res, "directory", what="mount on a regular file")
        self.assertFalse(is_mounted(f))

    def test_mount_twice_same_mountpoint(self):
        v = self.vol_()
        v.format()
        v.mount()
        with open(v.path("x"), "w") as f:
            f.write("first mount")
        res = v.mount_at(v.mnt, log=v.log + ".2")
        self.assertFails(res, "already mounted", "is a mount point", what="second mount on the same mountpoint")
        # The first mount keeps working, and the failed attempt left no session.
        self.assertTrue(is_mounted(v.mnt))
        with open(v.path("x")) as f:
            self.assertEqual(f.read(), "first mount")
        self.assertEqual(len(v.status_json()["sessions"]), 1, v.status_json())
        v.umount()
        self.assertFalse(is_mounted(v.mnt), "a second FUSE mount was stacked on the mountpoint")

    def test_mount_on_foreign_mount_point(self):
        v = self.vol_()
        v.format()
        rc, out, err = run("mount", "-t", "tmpfs", "tmpfs", v.mnt)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.addCleanup(run, "umount", "-l", v.mnt)
        with open(os.path.join(v.mnt, "tmpfsfile"), "w") as f:
            f.write("tmpfs")
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
        self.assertFails(res, "already mounted", "is a mount point", what="mount on a tmpfs mount point")
        self.assertEqual(harness.mounts().get(os.path.realpath(v.mnt)), "tmpfs")
        with open(os.path.join(v.mnt, "tmpfsfile")) as f:
            self.assertEqual(f.read(), "tmpfs")

    def test_second_mount_elsewhere_is_allowed(self):
        # Any number of clients may mount one volume; a second mountpoint is not an error.
        v = self.vol_()
        v.format()
        v.mount()
        other = os.path.join(v.dir, "mnt2")
        os.mkdir(other)
        res = v.mount_at(other)
        self.assertOk(res, "second mount of the same volume elsewhere")
        with open(v.path("shared"), "w") as f:
            f.write("from one")
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(other, "shared")), timeout=30))
        with open(os.path.join(other, "shared")) as f:
            self.assertEqual(f.read(), "from one")
        self.assertEqual(len(v.status_json()["sessions"]), 2)
        self.assertOk(tierfs("umount", other), "umount second")
        self.assertFalse(is_mounted(other))

    def test_fuse_threads(self):
        # The embedded default gets 2 FUSE workers per CPU (at least 4); --fuse-threads sets
        # the number, and one worker still serves everything, blocked lock waiters included.
        v = self.vol_()
        v.format()
        v.mount()
        want = max(4, 2 * os.cpu_count())
        self.assertOk(tierfs("umount", v.mnt))
        line = "with %d FUSE worker threads" % want

        def logged():
            with open(v.log) as f:   # complete once the daemon has exited
                return line in f.read()
        self.assertTrue(wait_for(logged, timeout=10), line + " not in the log:\n" + v.log_tail())
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--fuse-threads", "0")
        self.assertNotEqual(res[0], 0)
        self.assertIn("--fuse-threads", res[2])
        v.mount("--fuse-threads", "1")
        p = v.path("locked")
        with open(p, "w") as f:
            f.write("x")
        holder = open(p)
        fcntl.flock(holder, fcntl.LOCK_EX)
        code = "import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print('got')"
        waiters = [subprocess.Popen([sys.executable, "-c", code, p], stdout=subprocess.PIPE, text=True)
                   for _ in range(3)]
        try:
            time.sleep(0.5)
            self.assertEqual(sorted(os.listdir(v.mnt)), ["locked"], "mount stopped serving while waiters block")
            fcntl.flock(holder, fcntl.LOCK_UN)
            for w in waiters:
                self.assertEqual(w.communicate(timeout=60)[0], "got\n")
        finally:
            holder.close()
            for w in waiters:
                if w.poll() is None:
                    w.kill()
                    w.wait()

    def test_relative_paths_with_background_mount(self):
        # The background daemon works from "/"; relative database, mountpoint and log paths
        # given by the user are resolved in the caller's directory before it detaches.
        v = self.vol_()
        v.format()
        v._mountpoints.add(v.mnt)
        res = harness.run(harness.tierfs_bin(), "mount", "sqlite3://meta.db", "mnt", "-d", "--log", "rel.log",
                          cwd=v.dir)
        self.assertOk(res, "mount -d with relative paths")
        self.assertTrue(is_mounted(v.mnt), "relative mountpoint resolved in the caller's directory")
        v.pid = v._find_daemon_pid(v.mnt)
        with open(v.path("f"), "w") as f:
            f.write("rel")
        self.assertTrue(os.path.exists(os.path.join(v.dir, "rel.log")), "log opened where the user asked")
        self.assertFalse(os.path.exists("/meta.db"))
        self.assertOk(tierfs("umount", v.mnt))
        v.mount()
        with open(v.path("f")) as f:
            self.assertEqual(f.read(), "rel", "data went into the volume at the relative database path")

    def test_bucket_parent_is_a_regular_file(self):
        v = self.vol_()
        blocker = os.path.join(v.dir, "blocker")
        with open(blocker, "w") as f:
            f.write("i am a file")
        bad = os.path.join(blocker, "bucket")
        res = tierfs("format", v.meta_url, "v", "--storage", "file", "--bucket", bad)
        self.assertFails(res, "bucket", bad, "storage", "not a directory", what="format with bucket under a file")
        self.assert_no_volume(v.meta_url, "unusable bucket at format")
        with open(blocker) as f:
            self.assertEqual(f.read(), "i am a file")

    def test_mount_with_readonly_bucket(self):
        v = self.vol_()
        v.format()
        v.mount()
        with open(v.path("data"), "wb") as f:
            f.write(b"x" * 100000)
        v.umount()
        # Hide the bucket behind a read-only tmpfs: root's chmod would not stop root.
        rc, out, err = run("mount", "-t", "tmpfs", "-o", "ro", "tmpfs", v.bucket)
        self.assertEqual(rc, 0, msg(rc, out, err))
        try:
            res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
            self.assertFails(res, "bucket", v.bucket, "storage", "read-only", "writable",
                             what="mount with a read-only bucket")
            self.assertFalse(is_mounted(v.mnt))
        finally:
            if harness.is_mounted(v.mnt):
                v.force_unmount()
            run("umount", v.bucket)
        # Once the bucket is back, the volume mounts with its data.
        v.mount()
        with open(v.path("data"), "rb") as f:
            self.assertEqual(f.read(), b"x" * 100000)

    def test_mount_with_bucket_replaced_by_file(self):
        v = self.vol_()
        v.format()
        shutil.rmtree(v.bucket, ignore_errors=True)
        with open(v.bucket, "w") as f:
            f.write("not a dir")
        res = tierfs("mount", v.meta_url, v.mnt, "-d", "--log", v.log)
        self.assertFails(res, "bucket", v.bucket, "storage", "not a directory", what="mount with bucket being a file")
        self.assertFalse(is_mounted(v.mnt))

    def test_umount_waits_for_the_client_to_finish(self):
        # The client's last transaction (closing its session) waits while this test holds
        # the SQLite write lock: umount must not return before the client is done.
        v = self.vol_()
        self.assertOk(v.format(), "format")
        v.mount()
        data = os.urandom(5 << 20)
        with open(v.path("kept"), "wb") as f:
            f.write(data)
        pid = v.pid
        self.assertTrue(pid, "could not find the mount daemon")
        self.assertEqual(os.getxattr(v.mnt, "tierfs.pid"), str(pid).encode())
        db = sqlite3.connect(v.meta_db, timeout=30, isolation_level=None, check_same_thread=False)
        self.addCleanup(db.close)
        db.execute("BEGIN EXCLUSIVE")
        unlock = threading.Timer(3.0, lambda: db.execute("COMMIT"))
        unlock.start()
        self.addCleanup(unlock.cancel)
        self.assertOk(tierfs("umount", v.mnt), "umount")
        self.assertFalse(pid_alive(pid), "tierfs umount returned while the client was still running")
        unlock.join()

        # A client that takes longer than --wait: umount says so and fails; the unmount stands.
        v.mount()
        pid = v.pid
        db.execute("BEGIN EXCLUSIVE")
        unlock = threading.Timer(4.0, lambda: db.execute("COMMIT"))
        unlock.start()
        self.addCleanup(unlock.cancel)
        res = tierfs("umount", v.mnt, "--wait", "1")
        self.assertFails(res, "still committing", str(pid), what="umount --wait 1 of a client that takes longer")
        self.assertFalse(is_mounted(v.mnt))
        unlock.join()
        self.assertTrue(wait_for(lambda: not pid_alive(pid), timeout=60), "the client never exited")
        v.mount()
        with open(v.path("kept"), "rb") as f:
            self.assertEqual(f.read(), data)
        v.umount()

    def test_umount_of_a_client_in_another_pid_namespace(self):
        # The client's pid is its own namespace's (1 here): from outside it names another
        # process, which umount must not wait for.
        v = self.vol_()
        self.assertOk(v.format(), "format")
        client = subprocess.Popen(["unshare", "--pid", "--fork", harness.tierfs_bin(), "mount", v.meta_url, v.mnt,
                                   "--log", v.log], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: client.poll() is None and client.kill())
        self.addCleanup(lambda: is_mounted(v.mnt) and run("fusermount3", "-uz", v.mnt))
        if not wait_for(lambda: is_mounted(v.mnt) or client.poll() is not None, timeout=30) or not is_mounted(v.mnt):
            client.kill()
            self.fail("mount in a new pid namespace failed: %s" % client.communicate()[1])
        self.assertEqual(os.getxattr(v.mnt, "tierfs.pid"), b"1")
        with open(v.path("f"), "w") as f:
            f.write("kept")
        self.assertOk(tierfs("umount", v.mnt, "--wait", "5"), "umount of a client in another pid namespace")
        _, err = client.communicate(timeout=60)
        self.assertEqual(client.returncode, 0, err)
        v.mount()
        with open(v.path("f")) as f:
            self.assertEqual(f.read(), "kept")
        v.umount()

    def test_umount_not_mounted(self):
        d = self.local_tmpdir()
        res = tierfs("umount", d)
        self.assertNotEqual(res[0], 0, "umount of a plain directory should fail\n" + msg(*res))
        self.assertTrue((res[1] + res[2]).strip(), "umount failure printed no message")

    def test_info_outside_mount(self):
        d = self.local_tmpdir()
        p = os.path.join(d, "plain")
        with open(p, "w") as f:
            f.write("x")
        res = tierfs("info", p)
        self.assertNotEqual(res[0], 0, "info of a file outside TierFS should fail\n" + msg(*res))
        res = tierfs("info", os.path.join(d, "missing"))
        self.assertNotEqual(res[0], 0, "info of a missing path should fail\n" + msg(*res))

    def test_format_missing_arguments(self):
        v = self.vol_()
        res = tierfs("format", v.meta_url)
        self.assertNotEqual(res[0], 0, msg(*res))
        self.assertFalse(os.path.exists(v.meta_db) and self._has_volume(v), "format without NAME made a volume")

    def _has_volume(self, v):
        return tierfs("status", v.meta_url)[0] == 0


class InfoTest(harness.TierFSTestCase):
    BLOCK_SIZE = "1M"

    def test_info_json_layout(self):
        p = os.path.join(self.work, "f")
        data = os.urandom((2 << 20) + 12345)
        with open(p, "wb") as f:
            f.write(data)
        st = os.stat(p)
        info = self.vol.info_json(p)
        self.assertEqual(info["inode"], st.st_ino)
        self.assertEqual(info["length"], len(data))
        self.assertEqual([c["index"] for c in info["chunks"]], [0])
        slices = info["chunks"][0]["slices"]
        self.assertTrue(slices)
        covered = 0
        stored = 0
        for sl in slices:
            for k in ("pos", "id", "size", "off", "len", "objects"):
                self.assertIn(k, sl)
            covered += sl["len"]
            for key in sl["objects"]:
                obj = os.path.join(self.vol.bucket, key)
                self.assertTrue(os.path.isfile(obj), "object %s not in bucket" % key)
                stored += os.path.getsize(obj)
        self.assertGreaterEqual(covered, len(data))
        # 1 MiB blocks: at least 3 objects, holding at least the data (plus any header).
        self.assertGreaterEqual(sum(len(s["objects"]) for s in slices), 3)
        self.assertGreaterEqual(stored, len(data))

        rc, out, err = tierfs("info", p)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn(str(st.st_ino), out)

    def test_info_two_chunks(self):
        p = os.path.join(self.work, "sparse")
        with open(p, "wb") as f:
            f.write(b"a" * 1000)
            f.seek((64 << 20) + 10)
            f.write(b"b" * 1000)
        info = self.vol.info_json(p)
        self.assertEqual(info["length"], (64 << 20) + 1010)
        self.assertEqual(sorted(c["index"] for c in info["chunks"]), [0, 1])

    def test_info_empty_file(self):
        p = os.path.join(self.work, "empty")
        open(p, "w").close()
        info = self.vol.info_json(p)
        self.assertEqual(info["length"], 0)
        self.assertEqual(info["inode"], os.stat(p).st_ino)
        self.assertFalse(any(c["slices"] for c in info["chunks"]))


class ObjbenchTest(CliTestCase):
    """objbench on a local directory; the S3 and RADOS runs are in test_shared_cli."""

    def test_before_get_runs_between_puts_and_gets(self):
        bucket = tempfile.mkdtemp(prefix="objbench-")
        self.addCleanup(shutil.rmtree, bucket, True)
        scratch = tempfile.mkdtemp(prefix="objbench-seen-")
        self.addCleanup(shutil.rmtree, scratch, True)
        seen = os.path.join(scratch, "seen")
        # The command lists the objects present when it runs: every PUT is done, no GET yet.
        cmd = "find '%s' -type f -name 'B*' | wc -l > '%s'" % (bucket, seen)
        rc, out, err = run(harness.tierfs_bin(), "objbench", "file://" + bucket, "--skip-functional",
                           "--big-size", "64K", "--big-count", "5", "--small-count", "3", "--before-get", cmd)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertEqual(open(seen).read().strip(), "5")
        self.assertIn("| get 64.0 KiB |", out)
        self.assertNotIn("FAILED", out)

    def test_failing_before_get_fails_the_run(self):
        bucket = tempfile.mkdtemp(prefix="objbench-")
        self.addCleanup(shutil.rmtree, bucket, True)
        rc, out, err = run(harness.tierfs_bin(), "objbench", "file://" + bucket, "--skip-functional",
                           "--big-size", "64K", "--big-count", "2", "--small-count", "2", "--before-get", "exit 3")
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("--before-get command failed", err)
        # The objects it wrote are still deleted at the end.
        self.assertEqual([f for _, _, fs in os.walk(bucket) for f in fs], [])


if __name__ == "__main__":
    harness.main()
