#!/usr/bin/env python3
"""Mirror volumes (`tierfs mirror`, mirror/replicator.h): a mirror seeded from a primary that
keeps changing, mounted (read-only whatever was asked) and compared with the primary after
creates, writes, truncates, renames of files and directories, hard links, symlinks, xattrs,
modes and removals; a replicator that runs on while files appear on the mirror's live
mount; SIGKILLed replicators that restart where they stopped; two replicators and one
lease; a change log trimmed past the mirror (re-seed); a mirror still seeding refuses to
open; bad input. A Redis primary followed into a SQLite mirror when the test servers run.
A mirror with an object store of its own: blocks copied (readable with the primary's
store gone), a block missing from it read through from the primary's (checksum
verified); a lagging mirror keeps the primary from deleting the blocks it still needs
(registered change-log reader), and `changelog --drop-consumer` lets them go."""
import json
import os
import signal
import sqlite3
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from replicators import Replicators  # noqa: E402


def status(url):
    rc, out, err = harness.tierfs("status", url, "--json")
    assert rc == 0, harness.msg(rc, out, err)
    return json.loads(out)


def mount_options(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == os.path.realpath(path):
                return fields[5].split(",")
    return []


def primary_seq(url):
    return status(url)["changelog"]["last_seq"]


class MirrorTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.primary = self.new_primary()
        self.mirror_url = "sqlite3://" + os.path.join(self.tmp, "mirror.db")
        self.mirror = harness.Volume("mirror", meta_url=self.mirror_url, base=self.tmp)
        self.addCleanup(self.mirror.cleanup)
        self.replicators = Replicators(self.tmp)
        self.addCleanup(self.replicators.stop_all)

    def new_primary(self, **kw):
        p = harness.Volume("prim", **kw)
        self.addCleanup(p.cleanup)
        p.format("--changelog-hours", "1")
        p.mount()
        return p

    # ----- the replicator ----------------------------------------------------------------

    def mirror_once(self, *extra, check=True):
        res = harness.tierfs("mirror", self.primary.meta_url, self.mirror_url, "--once", "--json", *extra)
        if check:
            self.assertEqual(res[0], 0, harness.msg(*res))
            return json.loads(res[1])
        return res

    def start_replicator(self, *extra):
        return self.replicators.start([harness.tierfs_bin(), "mirror", self.primary.meta_url, self.mirror_url,
                                       "--interval", "0.05"] + list(extra))

    def log_of(self, p):
        return self.replicators.log_of(p)

    def wait_applied(self, seq, timeout=60):
        res = harness.tierfs("mirror-wait", self.mirror_url, "--seq", str(seq), "--timeout", str(timeout))
        self.assertEqual(res[0], 0, harness.msg(*res))
        return int(res[1].strip())

    def assert_same(self, rel="data", mirror_root=None):
        src = os.path.join(self.primary.mnt, rel)
        dst = os.path.join(mirror_root or self.mirror.mnt, rel)
        self.assertTrue(os.path.isdir(dst), dst)
        diffs = harness.compare_trees(src, dst, xattrs=True)
        self.assertEqual(diffs, [], "the mirror differs from the primary:\n" + "\n".join(diffs[:20]))

    def remount_mirror(self):
        if harness.is_mounted(self.mirror.mnt):
            self.mirror.umount()
        self.mirror.mount()

    def change_everything(self, root):
        """Every kind of namespace change, on the primary."""
        first_dir = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))[0]
        os.rename(os.path.join(root, first_dir), os.path.join(root, "d0-renamed"))
        files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                       if not os.path.islink(os.path.join(dp, f)))
        os.unlink(files[0])
        with open(files[1], "r+b") as f:
            f.truncate(1000)
        with open(files[2], "ab") as f:
            f.write(os.urandom(70000))
        os.link(files[3], os.path.join(root, "hard-link"))
        os.symlink("d0-renamed", os.path.join(root, "sym"))
        os.chmod(files[4], 0o600)
        os.setxattr(files[5], "user.mirror", b"v1")
        os.makedirs(os.path.join(root, "new", "deep"))
        with open(os.path.join(root, "new", "deep", "f"), "wb") as f:
            f.write(os.urandom(300000))
        os.rename(files[6], os.path.join(root, "new", "moved"))

    def objects(self, bucket):
        out = set()
        for dp, _, fs in os.walk(bucket):
            out.update(os.path.relpath(os.path.join(dp, f), bucket) for f in fs if "/chunks/" in os.path.join(dp, f))
        return out

    # ----- tests -------------------------------------------------------------------------

    def test_mirror_follows_the_primary_and_opens_read_only(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=3, nfiles=60, max_size=300 << 10)
        out = self.mirror_once()
        self.assertGreater(out["seeded_keys"], 60)
        self.assertGreater(out["applied"], 0)
        self.assertLessEqual(out["applied"], primary_seq(self.primary.meta_url))
        self.mirror.mount()  # no --read-only asked: a mirror opens read-only anyway
        self.assertIn("ro", mount_options(self.mirror.mnt))
        with self.assertRaises(OSError) as cm:
            open(os.path.join(self.mirror.mnt, "data", "x"), "wb")
        self.assertEqual(cm.exception.errno, 30)  # EROFS
        self.assert_same()
        self.change_everything(data)
        # The records since are packed into compressed blocks first (change_log.h): the
        # mirror follows them all the same.
        rc, out, err = harness.tierfs("changelog", self.primary.meta_url, "--compact", "0")
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertGreater(json.loads(out)["packed_records"], 10)
        out = self.mirror_once()
        self.assertEqual(out["seeded_keys"], 0)  # followed, not copied again
        self.assertGreater(out["records"], 10)
        self.remount_mirror()
        self.assert_same()
        st = status(self.mirror_url)
        # The primary's mount may commit more meanwhile (background compaction of the
        # appended file): the mirror holds what the run caught up with.
        self.assertEqual(st["mirror"]["applied_seq"], out["applied"])
        self.assertGreaterEqual(primary_seq(self.primary.meta_url), out["applied"])
        self.assertEqual(st["mirror"]["lag"]["commits"], 0)
        self.assertFalse(st["mirror"]["seeding"])
        self.assertIn("prim", st["name"])
        rc, text, err = harness.tierfs("status", self.mirror_url)
        self.assertIn("mirror of:", text)
        self.assertIn("lag:", text)

    def test_a_running_replicator_survives_sigkill_and_keeps_a_live_mount_current(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=5, nfiles=30, max_size=100 << 10)
        self.mirror_once()
        self.mirror.mount()
        r = self.start_replicator()
        applied = []
        for round_ in range(6):
            for i in range(15):
                with open(os.path.join(data, "r%d-%02d" % (round_, i)), "wb") as f:
                    f.write(os.urandom(5000 + i))
            os.rename(os.path.join(data, "r%d-00" % round_), os.path.join(data, "r%d-renamed" % round_))
            if round_ % 2 == 1:
                r.send_signal(signal.SIGKILL)  # anywhere in a batch
                r.wait()
                r = self.start_replicator()
            applied.append(self.wait_applied(primary_seq(self.primary.meta_url)))
            # The live mount sees the round's files (its caches last about a second).
            name = os.path.join(self.mirror.mnt, "data", "r%d-renamed" % round_)
            self.assertTrue(harness.wait_for(lambda: os.path.exists(name), timeout=30), name)
        self.assertEqual(applied, sorted(applied))
        self.remount_mirror()
        self.assert_same()

    def test_one_replicator_applies_and_another_takes_over(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        self.mirror_once()
        first = self.start_replicator("--lease-ttl", "2")
        with open(os.path.join(data, "a"), "wb") as f:
            f.write(b"a")
        self.wait_applied(primary_seq(self.primary.meta_url))
        second = self.start_replicator("--lease-ttl", "2")
        self.assertTrue(harness.wait_for(lambda: "holds the lease" in self.log_of(second), timeout=30),
                        self.log_of(second))
        self.assertFails(harness.tierfs("mirror", self.primary.meta_url, self.mirror_url, "--once"),
                         "another replicator")
        first.send_signal(signal.SIGKILL)
        first.wait()
        with open(os.path.join(data, "b"), "wb") as f:
            f.write(b"b")
        self.wait_applied(primary_seq(self.primary.meta_url))
        self.assertIn("took over", self.log_of(second))
        self.mirror.mount()
        self.assert_same()

    def test_a_log_trimmed_past_the_mirror_asks_for_a_reseed(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=7, nfiles=20, max_size=50 << 10)
        self.mirror_once()
        for i in range(10):
            with open(os.path.join(data, "later%d" % i), "wb") as f:
                f.write(b"x" * i)
        # Trim the primary's log by hand, as its retention would: all but the newest record.
        last = primary_seq(self.primary.meta_url)
        db = sqlite3.connect(self.primary.meta_db, timeout=30)
        with db:
            db.execute("DELETE FROM log WHERE seq < ?", (last,))  # the records' table (sqlite_txn.h)
        db.close()
        rc, out, err = self.mirror_once(check=False)
        self.assertNotEqual(rc, 0, harness.msg(rc, out, err))
        self.assertIn("--reseed", err)
        out = self.mirror_once("--reseed")
        self.assertGreater(out["seeded_keys"], 20)
        self.mirror.mount()
        self.assert_same()

    def test_a_mirror_still_seeding_does_not_open(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        self.mirror_once()
        # As an interrupted seeding leaves it: consistent only from the next commit on.
        db = sqlite3.connect(self.mirror_url[len("sqlite3://"):], timeout=30)
        with db:
            (v,) = db.execute("SELECT v FROM kv WHERE k = ?", (b"MS",)).fetchone()
            st = json.loads(v)
            st["seeding"], st["ready_at"] = True, st["applied"] + 1
            db.execute("UPDATE kv SET v = ? WHERE k = ?", (json.dumps(st).encode(), b"MS"))
        db.close()
        res = self.mirror.mount(check=False)
        self.assertFails(res, "seeded", what="mounting a mirror that is seeding")
        self.assertTrue(status(self.mirror_url)["mirror"]["seeding"])
        with open(os.path.join(data, "one-more"), "wb") as f:
            f.write(b"1")
        self.mirror_once()
        self.mirror.mount()
        self.assert_same()

    def test_bad_input_is_refused_clearly(self):
        # A primary without a change log.
        plain = harness.Volume("plain", base=self.tmp)
        self.addCleanup(plain.cleanup)
        plain.format()
        self.assertFails(harness.tierfs("mirror", plain.meta_url, "sqlite3://" + os.path.join(self.tmp, "m2.db"),
                                        "--once"), "--changelog-hours")
        # The same engine twice; a mirror engine that holds another volume.
        self.assertFails(harness.tierfs("mirror", self.primary.meta_url, self.primary.meta_url, "--once"),
                         "same engine")
        self.assertFails(harness.tierfs("mirror", self.primary.meta_url, plain.meta_url, "--once"), "not a mirror")
        # A primary that is not there; a store without its bucket.
        self.assertFails(harness.tierfs("mirror", "sqlite3://" + os.path.join(self.tmp, "none.db"), self.mirror_url,
                                        "--once"), "none.db")
        self.assertFails(harness.tierfs("mirror", self.primary.meta_url, self.mirror_url, "--storage", "file",
                                        "--once"), "go together")
        # mirror-wait on a volume that is not a mirror, and past what the mirror holds.
        self.assertFails(harness.tierfs("mirror-wait", plain.meta_url, "--seq", "1", "--timeout", "1"),
                         "not a mirror")
        self.mirror_once()
        self.assertFails(harness.tierfs("mirror-wait", self.mirror_url, "--seq", "999999", "--timeout", "0.5"),
                         "not 999999")
        # A mirror sharing the primary's store leaves deleting to the primary.
        self.assertFails(harness.tierfs("gc", self.mirror_url, "--delete"), "sharing its object store")
        # A mirror seeded on the shared store does not switch stores unasked.
        self.assertFails(harness.tierfs("mirror", self.primary.meta_url, self.mirror_url, "--once", "--storage",
                                        "file", "--bucket", os.path.join(self.tmp, "other")), "--reseed")

    def test_a_mirror_with_its_own_store_reads_with_the_primarys_store_gone(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=13, nfiles=40, max_size=300 << 10)
        with open(os.path.join(data, "big"), "wb") as f:
            f.write(os.urandom(9 << 20 | 12345))  # three blocks
        bucket = os.path.join(self.tmp, "mirror-bucket")
        out = self.mirror_once("--storage", "file", "--bucket", bucket)
        self.assertEqual(out["missing"], 0)
        self.assertEqual(self.objects(bucket), self.objects(self.primary.bucket))
        self.assertEqual(out["objects"], len(self.objects(bucket)))
        self.change_everything(data)
        with open(os.path.join(data, "big"), "wb") as f:  # its three blocks released
            f.write(os.urandom(100000))
        out = self.mirror_once()  # keeps its store
        self.assertGreater(out["objects"], 0)
        st = status(self.mirror_url)
        self.assertEqual(st["bucket"], bucket)
        self.assertEqual(st["source"]["bucket"], self.primary.bucket)
        # gc reports on a mirror (the primary's own records are not read through), and
        # leaves deleting to the primary.
        rc, out, err = harness.tierfs("gc", self.mirror_url)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertNotIn("corrupt", out + err)
        self.assertIn("leaked:      0", out + err)
        # gc --delete on a mirror collects its own store's objects that no applied commit
        # references any more (here the removed and overwritten files' blocks), never the
        # primary's: the primary's region goes away below and the mirror still reads all.
        # The primary's cleanup drops the released slices' references once this mirror has
        # applied their release (a registered reader); the mirror applies that drop too.
        deadline = time.monotonic() + 60
        while True:
            self.mirror_once()
            rc, out, err = harness.tierfs("gc", self.mirror_url, "--min-age", "0", "--json")
            self.assertEqual(rc, 0, harness.msg(rc, out, err))
            if json.loads(out)["leaked"] > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        rc, out, err = harness.tierfs("gc", self.mirror_url, "--delete", "--min-age", "0", "--json")
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertGreater(json.loads(out)["deleted"], 0)
        self.assertEqual(json.loads(out)["deleted"], json.loads(out)["leaked"])
        rc, out, err = harness.tierfs("gc", self.mirror_url, "--min-age", "0", "--json")
        self.assertEqual(json.loads(out)["leaked"], 0, out)
        expected = harness.file_hashes(data)
        # The primary's region is gone: the mirror serves everything from its own store.
        self.primary.umount()
        os.rename(self.primary.bucket, self.primary.bucket + ".away")
        try:
            self.mirror.mount()
            self.assertEqual(harness.file_hashes(os.path.join(self.mirror.mnt, "data")), expected)
            self.mirror.umount()
        finally:
            os.rename(self.primary.bucket + ".away", self.primary.bucket)
        self.primary.mount()
        self.mirror.mount()
        self.assert_same()

    def test_a_block_missing_from_the_mirrors_store_is_read_through_and_verified(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        with open(os.path.join(data, "f"), "wb") as f:
            f.write(os.urandom(200000))
        bucket = os.path.join(self.tmp, "mirror-bucket")
        self.mirror_once("--storage", "file", "--bucket", bucket)
        [block] = self.objects(bucket)
        os.unlink(os.path.join(bucket, block))
        # Damaged at the source: the read fails (EIO), it does not return bad bytes.
        path = os.path.join(self.primary.bucket, block)
        with open(path, "rb") as f:
            good = f.read()
        bad = bytearray(good)
        bad[-100] ^= 0xFF
        with open(path, "wb") as f:
            f.write(bad)
        self.mirror.mount()
        with self.assertRaises(OSError) as cm:
            with open(os.path.join(self.mirror.mnt, "data", "f"), "rb") as b:
                b.read()
        self.assertEqual(cm.exception.errno, 5)
        self.mirror.umount()
        # Whole again: read through from the primary's store.
        with open(path, "wb") as f:
            f.write(good)
        self.mirror.mount()
        with open(os.path.join(data, "f"), "rb") as a, open(os.path.join(self.mirror.mnt, "data", "f"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_a_failing_mirror_store_holds_the_mirror_back_until_it_works(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        bucket = os.path.join(self.tmp, "mirror-bucket")
        self.mirror_once("--storage", "file", "--bucket", bucket)
        r = self.start_replicator()
        held = self.wait_applied(primary_seq(self.primary.meta_url))
        # The mirror's store fails every write (its directory replaced by a file).
        os.rename(bucket, bucket + ".away")
        with open(bucket, "w") as f:
            f.write("not a directory")
        for i in range(5):
            with open(os.path.join(data, "f%d" % i), "wb") as f:
                f.write(os.urandom(30000))
        self.assertTrue(harness.wait_for(lambda: "retrying" in self.log_of(r), timeout=30), self.log_of(r))
        # Nothing whose blocks could not be copied is applied: the mirror stays where it was,
        # also through a restart of the replicator while the store is still failing.
        st = status(self.mirror_url)["mirror"]
        self.assertLessEqual(st["applied_seq"], held + 1)  # the creates may have come in a batch of their own
        r.send_signal(signal.SIGKILL)
        r.wait()
        r = self.start_replicator()
        self.assertTrue(harness.wait_for(lambda: "retrying" in self.log_of(r), timeout=30), self.log_of(r))
        self.assertLessEqual(status(self.mirror_url)["mirror"]["applied_seq"], held + 1)
        self.assertGreater(status(self.mirror_url)["mirror"]["lag"]["commits"], 0)
        os.unlink(bucket)
        os.rename(bucket + ".away", bucket)
        self.wait_applied(primary_seq(self.primary.meta_url))
        self.mirror.mount()
        self.assert_same()

    def test_the_replicators_metrics_show_where_it_stands_and_what_it_copied(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        for i in range(5):
            with open(os.path.join(data, "f%d" % i), "wb") as f:
                f.write(os.urandom(50000))
        r = self.start_replicator("--metrics", "127.0.0.1:%d" % (21000 + os.getpid() % 5000), "--storage", "file",
                                  "--bucket", os.path.join(self.tmp, "mirror-bucket"))
        self.assertTrue(harness.wait_for(lambda: "metrics on http://" in self.log_of(r), timeout=30), self.log_of(r))
        url = self.log_of(r).split("metrics on ", 1)[1].split()[0]
        applied = self.wait_applied(primary_seq(self.primary.meta_url))

        def sample(name):
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            for line in text.splitlines():
                if line.startswith(name + "{") or line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
            self.fail("%s not in the metrics:\n%s" % (name, text[:3000]))

        self.assertTrue(harness.wait_for(lambda: sample("tierfs_mirror_applied_seq") >= applied, timeout=30))
        self.assertEqual(sample("tierfs_mirror_lag_commits"), 0)
        self.assertGreaterEqual(sample("tierfs_mirror_copied_objects_total"), 5)
        self.assertGreaterEqual(sample("tierfs_mirror_copied_bytes_total"), 5 * 50000)
        self.assertEqual(sample("tierfs_mirror_missing_objects_total"), 0)
        self.assertEqual(sample("tierfs_mirror_block_lag_bytes"), 0)

    def test_a_lagging_mirror_keeps_the_blocks_it_still_needs(self):
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=17, nfiles=20, max_size=100 << 10)
        self.mirror_once()
        before = self.objects(self.primary.bucket)
        self.assertGreater(len(before), 10)
        readers = status(self.primary.meta_url)["changelog"]["consumers"]
        self.assertEqual([r["name"] for r in readers], ["mirror:" + self.mirror_url])
        # The primary overwrites every file while no replicator runs: the old blocks are
        # released by commits the mirror has not applied, and are kept.
        for dp, _, fs in os.walk(data):
            for name in fs:
                p = os.path.join(dp, name)
                if not os.path.islink(p):
                    with open(p, "wb") as f:
                        f.write(b"new")
        time.sleep(6)  # the mount's cleanup runs every 2 s
        self.assertEqual(before - self.objects(self.primary.bucket), set(), "deleted while the mirror lags")
        self.assertGreater(status(self.primary.meta_url)["changelog"]["consumers"][0]["behind"], 0)
        # Caught up: they go.
        self.mirror_once()
        self.assertTrue(harness.wait_for(lambda: len(before & self.objects(self.primary.bucket)) == 0, timeout=30),
                        sorted(before & self.objects(self.primary.bucket))[:5])
        self.mirror.mount()
        self.assert_same()
        # A dropped reader holds nothing back.
        self.mirror.umount()
        name = readers[0]["name"]
        res = harness.tierfs("changelog", self.primary.meta_url, "--drop-consumer", name)
        self.assertEqual(res[0], 0, harness.msg(*res))
        self.assertEqual(status(self.primary.meta_url)["changelog"]["consumers"], [])
        self.assertFails(harness.tierfs("changelog", self.primary.meta_url, "--drop-consumer", name), "no change-log")

    def test_a_redis_primary_into_a_sqlite_mirror(self):
        srv = harness.servers()
        url = srv["redis_url"].rstrip("/") + "/%d" % harness.REDIS_DB["mirror"]
        harness.run("redis-cli", "-u", url, "FLUSHDB")
        self.primary.umount()
        self.primary = self.new_primary(meta_url=url)
        data = os.path.join(self.primary.mnt, "data")
        os.makedirs(data)
        harness.make_tree(data, seed=11, nfiles=40, max_size=200 << 10)
        r = self.start_replicator()
        self.wait_applied(primary_seq(url))
        self.change_everything(data)
        self.wait_applied(primary_seq(url))
        r.terminate()
        self.assertEqual(r.wait(timeout=30), 0, self.log_of(r))
        self.mirror.mount()
        self.assert_same()


if __name__ == "__main__":
    harness.main()
