"""The trash on real mounts, on SQLite and on Redis: `rm -rf` of a tree, `tierfs rmr` and a
file replaced by `mv` land in MOUNTPOINT/.trash/HOUR (hidden from the root's listing,
read-only, readable only by owner and root); the data stays in the store; `status` shows
the trash's size; `tierfs restore` puts the tree back byte-exact and refuses to overwrite;
turning the trash off (`config --trash-days 0`) expires it and `gc` then finds every block
freed; fsck is clean throughout. An hour shows each user only the entries that user owns.
The retention by hour is covered by meta_trash_test.
"""

import errno
import json
import os
import random
import shutil
import subprocess
import sys
import time

import harness
from harness import msg, tierfs


def build_tree(root, seed):
    """Directories, files of many sizes with random data, symlinks, modes, exact mtimes."""
    rng = random.Random(seed)
    dirs = [root]
    for i in range(8):
        d = os.path.join(rng.choice(dirs), "dir%d" % i)
        os.mkdir(d, 0o750 if i % 2 else 0o755)
        dirs.append(d)
    n = 0
    for i in range(60):
        p = os.path.join(rng.choice(dirs), "file%02d" % i)
        with open(p, "wb") as f:
            f.write(rng.randbytes(rng.choice([0, 1, 4095, 70000, 300000, 5 << 20 if i % 20 == 0 else 9000])))
        os.chmod(p, rng.choice([0o644, 0o600, 0o755]))
        t = rng.randrange(10**9, 1_700_000_000) * 10**9
        os.utime(p, ns=(t, t))
        n += 1
    for i in range(3):
        os.symlink("file%02d" % i, os.path.join(rng.choice(dirs), "link%d" % i))
    return n


class TrashTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def hour_dirs(self, vol):
        return sorted(os.listdir(os.path.join(vol.mnt, ".trash")))

    def check_trash(self, vol):
        vol.format("--force", trash_days=None)  # tierfs format's default: 1 day
        self.assertEqual(vol.status_json()["trash_days"], 1)
        vol.mount()
        base = {k: vol.status_json()[k] for k in ("used_bytes", "inodes")}
        ref = os.path.join(self.local_tmpdir(), "ref")
        os.mkdir(ref)
        build_tree(ref, seed=7)
        tree = os.path.join(vol.mnt, "tree")
        subprocess.run(["cp", "-a", ref, tree], check=True)
        with open(os.path.join(vol.mnt, "target"), "wb") as f:
            f.write(b"the old target")
        with open(os.path.join(vol.mnt, "new"), "wb") as f:
            f.write(b"the new one")
        os.rename(os.path.join(vol.mnt, "new"), os.path.join(vol.mnt, "target"))
        full = vol.status_json()
        subprocess.run(["rm", "-rf", tree], check=True)
        self.assertFalse(os.path.exists(tree))

        # Hidden from the root's listing, reachable by name, one hour directory.
        self.assertNotIn(".trash", os.listdir(vol.mnt))
        hours = self.hour_dirs(vol)
        self.assertEqual(len(hours), 1, hours)
        hour = hours[0]
        entries = os.listdir(os.path.join(vol.mnt, ".trash", hour))
        self.assertTrue(any(e.endswith("-target") for e in entries), entries)
        self.assertTrue(any(e.endswith("-tree") for e in entries), entries)
        # Read-only, also for root; private to the owner (root here: another user is refused).
        one = next(os.path.join(vol.mnt, ".trash", hour, e) for e in entries if e.endswith("-target"))
        with open(one, "rb") as f:
            self.assertEqual(f.read(), b"the old target")
        with self.assertRaises(OSError) as cm:
            open(one, "r+b")
        self.assertIn(cm.exception.errno, (errno.EPERM, errno.EACCES))
        with self.assertRaises(OSError):
            open(os.path.join(vol.mnt, ".trash", hour, "new"), "wb")
        other = subprocess.run([sys.executable, "-c", "import os,sys; os.setgid(1000); os.setuid(1000); "
                                "open(sys.argv[1], 'rb')", one], capture_output=True, text=True)
        self.assertNotEqual(other.returncode, 0)
        self.assertIn("PermissionError", other.stderr)
        # Nothing was freed; status shows what the trash holds.
        st = vol.status_json()
        self.assertEqual((st["used_bytes"], st["inodes"]), (full["used_bytes"], full["inodes"]))
        self.assertGreater(st["trash"]["bytes"], 5 << 20)
        self.assertEqual(st["trash"]["entries"], len(entries))
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))

        # Restore: the tree comes back byte-exact; the replaced target does not overwrite.
        rc, out, err = tierfs("restore", vol.meta_url, hour, "--json")
        self.assertEqual(rc, 1, msg(rc, out, err))  # the old target cannot come back
        res = json.loads(out)
        self.assertEqual(len(res["failed"]), 1, res)
        self.assertIn("target", res["failed"][0])
        self.assertEqual(res["restored"], len(entries) - 1)
        self.assertTrue(harness.wait_for(lambda: os.path.exists(tree), timeout=5))
        self.assertEqual(harness.compare_trees(ref, tree, dir_mtime=False), [])
        with open(os.path.join(vol.mnt, "target"), "rb") as f:
            self.assertEqual(f.read(), b"the new one")
        # --path restores one entry.
        rc, out, err = tierfs("rmr", os.path.join(tree, "dir0"))
        self.assertEqual(rc, 0, msg(rc, out, err))
        left = os.listdir(os.path.join(vol.mnt, ".trash", hour))
        dir0 = [e for e in left if e.endswith("-dir0")]
        self.assertEqual(len(dir0), 1, left)
        rc, out, err = tierfs("restore", vol.meta_url, hour, "--path", dir0[0])
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertTrue(harness.wait_for(lambda: os.path.isdir(os.path.join(tree, "dir0")), timeout=5))
        self.assertEqual(harness.compare_trees(ref, tree, dir_mtime=False), [])

        # Expiry: with the trash turned off, what it holds goes, and gc finds its blocks freed.
        subprocess.run(["rm", "-rf", tree], check=True)
        vol.umount()
        rc, out, err = tierfs("config", vol.meta_url, "--trash-days", "0")
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("gc", vol.meta_url, "--delete", "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        st = vol.status_json()
        self.assertEqual(st["trash"]["entries"], 0, st)
        self.assertEqual(st["trash"]["hours"], 0, st)
        # Only "target" (11 bytes, one block) is left.
        self.assertEqual((st["used_bytes"], st["inodes"]), (base["used_bytes"] + 4096, base["inodes"] + 1))
        rc, out, err = tierfs("gc", vol.meta_url, "--json")
        self.assertEqual(json.loads(out)["objects"], 1, out)
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        # Off means off: a removal now deletes at once.
        vol.mount()
        os.unlink(os.path.join(vol.mnt, "target"))
        self.assertEqual(vol.status_json()["trash"]["entries"], 0)

    def test_trash_on_sqlite(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_trash(vol)

    def test_trash_on_redis(self):
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["trash"]
        vol = self.new_volume(meta_url=url)
        self.addCleanup(vol.cleanup)
        self.check_trash(vol)

    def test_dump_and_load_keep_the_trash(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format(trash_days=3)
        vol.mount()
        os.mkdir(os.path.join(vol.mnt, "d"))
        with open(os.path.join(vol.mnt, "d", "f"), "wb") as f:
            f.write(b"x" * 10000)
        subprocess.run(["rm", "-rf", os.path.join(vol.mnt, "d")], check=True)
        vol.umount()
        dump = os.path.join(vol.dir, "dump.json")
        self.assertOk(tierfs("dump", vol.meta_url, dump), "dump")
        loaded = "sqlite3://" + os.path.join(vol.dir, "loaded.db")
        # The copy is mounted read-write below: it takes the objects over from the original.
        self.assertOk(tierfs("load", loaded, dump, "--take-bucket"), "load")
        rc, out, err = tierfs("fsck", loaded, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        st = json.loads(tierfs("status", loaded, "--json")[1])
        self.assertEqual(st["trash"]["entries"], 2)
        self.assertEqual(st["trash_days"], 3)
        hours = self.trash_hours(loaded)
        self.assertEqual(len(hours), 1)
        rc, out, err = tierfs("restore", loaded, hours[0])
        self.assertEqual(rc, 0, msg(rc, out, err))
        vol2 = harness.Volume(meta_url=loaded)
        self.addCleanup(vol2.cleanup)
        vol2.mount()
        with open(os.path.join(vol2.mnt, "d", "f"), "rb") as f:
            self.assertEqual(f.read(), b"x" * 10000)

    def test_an_hour_lists_only_what_the_user_owns(self):
        # Alice must not learn the names of what Bob removed from his private directory;
        # each sees their own entries, root sees all, also right after root listed them (the
        # kernel's name cache, shared by all users, is not given trash names).
        vol = self.new_volume(mount_args=["-o", "allow_other"])
        self.addCleanup(vol.cleanup)
        vol.format(trash_days=1)
        vol.mount()
        os.chmod(vol.dir, 0o755)
        os.chmod(vol.mnt, 0o755)
        pub = vol.path("pub")
        os.mkdir(pub)
        os.chmod(pub, 0o1777)

        def as_user(uid, *cmd):
            return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + list(cmd),
                                  capture_output=True, text=True, timeout=60)

        bob_dir = os.path.join(pub, "bob")
        for cmd in (["mkdir", "-m", "700", bob_dir], ["sh", "-c", "echo secret > %s/salary-2026.xlsx" % bob_dir],
                    ["rm", "-r", bob_dir]):
            res = as_user(1001, *cmd)
            self.assertEqual(res.returncode, 0, res)
        for cmd in (["sh", "-c", "echo hi > %s/alice.txt" % pub], ["rm", "%s/alice.txt" % pub]):
            res = as_user(1000, *cmd)
            self.assertEqual(res.returncode, 0, res)
        trash = os.path.join(vol.mnt, ".trash")
        hours = as_user(1000, "ls", trash).stdout.split()
        self.assertEqual(len(hours), 1, hours)
        hour = os.path.join(trash, hours[0])

        def names(uid):
            res = as_user(uid, "ls", "-1", hour)
            self.assertEqual(res.returncode, 0, res)
            return sorted(n.split("-", 2)[2] for n in res.stdout.split())

        self.assertEqual(names(1000), ["alice.txt"])
        self.assertEqual(names(1001), ["bob", "salary-2026.xlsx"])
        everything = sorted(os.listdir(hour))
        self.assertEqual(sorted(n.split("-", 2)[2] for n in everything), ["alice.txt", "bob", "salary-2026.xlsx"])
        # Asked by name, Bob's entries are not there for Alice either.
        for entry in everything:
            res = as_user(1000, "stat", "-c", "%n", os.path.join(hour, entry))
            if entry.endswith("alice.txt"):
                self.assertEqual(res.returncode, 0, res)
            else:
                self.assertNotEqual(res.returncode, 0, res)
                self.assertIn("No such file", res.stderr)
    def test_a_local_bucket_keeps_free_space_and_status_says_what_the_trash_holds(self):
        # Writing and deleting in a loop on a local bucket: deleted data stays in the trash,
        # but writes fail with ENOSPC at the bucket's free-space floor, not when its disk is
        # full, and `tierfs status` says how much the trash holds and when it frees it.
        disk = os.path.join(self.local_tmpdir(), "disk")
        os.mkdir(disk)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", disk], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", disk])
        vol = self.new_volume(storage=["--storage", "file", "--bucket", os.path.join(disk, "bucket")])
        self.addCleanup(vol.cleanup)
        vol.format(trash_days=None)  # tierfs format's default: 1 day
        vol.mount("--bucket-free-space-ratio", "0.25")
        total = os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize
        df = os.statvfs(vol.mnt)
        self.assertLessEqual(df.f_bavail * df.f_frsize, total * 0.75, "df's room is above the floor")
        chunk = os.urandom(1 << 20)
        written, failed = [], None
        for round_ in range(3):
            for i in range(100):
                p = os.path.join(vol.mnt, "f%d-%d" % (round_, i))
                try:
                    with open(p, "wb") as f:
                        f.write(chunk)
                    written.append(p)
                except OSError as e:
                    failed = e
                    break
            self.assertIsNotNone(failed, "writes never failed")
            self.assertEqual(failed.errno, errno.ENOSPC, failed)
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            self.assertGreaterEqual(free, total * 0.25 - (4 << 20), "the bucket's disk went below its floor")
            for p in written:
                if os.path.exists(p):
                    os.unlink(p)
            failed = None
        # Deleted data is in the trash: the disk stays full, and status says so.
        with self.assertRaises(OSError) as cm:
            with open(os.path.join(vol.mnt, "more"), "wb") as f:
                f.write(chunk)
        self.assertEqual(cm.exception.errno, errno.ENOSPC)
        self.assertIn("--bucket-free-space-ratio", vol.read_log(), "the log says what the limit is")
        st = vol.status_json()["trash"]
        self.assertGreaterEqual(st["bytes"], 30 << 20, st)
        self.assertGreater(st["first_expiry_ns"], time.time_ns() + 23 * 3600 * 10**9, st)
        rc, out, err = tierfs("status", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        trash_line = next(line for line in out.splitlines() if line.startswith("trash:"))
        self.assertIn("freed hour by hour from", trash_line)
        self.assertIn("MiB in ", trash_line)
        # Emptying the trash gives the room back.
        self.assertOk(tierfs("config", vol.meta_url, "--trash-days", "0"), "config")
        self.assertOk(tierfs("gc", vol.meta_url, "--delete", "--min-age", "0"), "gc")
        with open(os.path.join(vol.mnt, "more"), "wb") as f:
            f.write(chunk)

    def trash_hours(self, meta_url):
        mnt = os.path.join(self.local_tmpdir(), "peek")
        os.mkdir(mnt)
        v = harness.Volume(meta_url=meta_url)
        self.addCleanup(v.cleanup)
        v.mount_at(mnt)
        try:
            return sorted(os.listdir(os.path.join(mnt, ".trash")))
        finally:
            tierfs("umount", mnt)


if __name__ == "__main__":
    harness.main()
