"""`tierfs fsck` on a real volume damaged on purpose: a deleted block object is reported by
the file's path with a non-zero exit; a clean volume passes; --path limits the check; a
block corrupted in place keeps its size, so only --deep (which reads and verifies every
byte) finds it; usage counters stay exact when a client is killed, and fsck finds and
repairs counters that disagree with the inodes."""

import json
import os
import signal

import harness
from harness import msg, run, tierfs

MiB = 1 << 20


class FsckTest(harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def fsck(self, *args, rc_expected=0):
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--json", *args)
        self.assertEqual(rc, rc_expected, msg(rc, out, err))
        return json.loads(out)

    def test_clean_then_damaged(self):
        os.makedirs(os.path.join(self.mnt, "a", "b"))
        victim = os.path.join(self.mnt, "a", "b", "victim")
        with open(victim, "wb") as f:
            f.write(os.urandom(3 * MiB))
        with open(os.path.join(self.mnt, "ok"), "wb") as f:
            f.write(os.urandom(MiB // 2))
        os.link(os.path.join(self.mnt, "ok"), os.path.join(self.mnt, "a", "ok-link"))
        os.symlink("victim", os.path.join(self.mnt, "a", "b", "sym"))
        keys = self.vol.object_keys(victim)
        self.vol.umount()

        report = self.fsck()
        self.assertEqual(report["problems"], [], report)
        self.assertEqual(report["files"], 2)
        self.assertGreaterEqual(report["dirs"], 3)  # /, a, b (and the harness's own)
        self.assertGreaterEqual(report["objects_checked"], 4)

        os.unlink(os.path.join(self.vol.bucket, keys[1]))
        report = self.fsck(rc_expected=1)
        kinds = {(p["kind"], p["path"]) for p in report["problems"]}
        self.assertIn(("missing-object", "/a/b/victim"), kinds, report)
        self.assertTrue(any(keys[1] in p["detail"] for p in report["problems"]), report)
        # --repair cannot invent data: the problem stays and so does the exit status.
        report = self.fsck("--repair", rc_expected=1)
        self.assertEqual(report["remaining"], 1, report)
        # The namespace itself is intact: a check that skips objects passes.
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--path", "/a", "--skip-objects")
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--path", "/nope")
        self.assertNotEqual(rc, 0)
        self.assertIn("--path", err)


    def test_usage_counters_are_exact_after_a_kill_and_repairable(self):
        sizes = [5000, 3 * MiB + 1, 0, 64 << 10]
        for i, n in enumerate(sizes):
            with open(os.path.join(self.mnt, "f%d" % i), "wb") as f:
                f.write(os.urandom(n))
        os.mkdir(os.path.join(self.mnt, "dir"))
        expect_bytes = sum((n + 4095) // 4096 * 4096 for n in sizes)
        os.kill(self.vol.pid, signal.SIGKILL)  # nothing gets a chance to be flushed
        harness.wait_for(lambda: not harness.pid_alive(self.vol.pid), timeout=10)
        run("fusermount3", "-uz", self.mnt)
        st = self.vol.status_json()
        self.assertEqual(st["used_bytes"], expect_bytes, st)
        base = st["inodes"]
        self.assertEqual(self.fsck()["problems"], [])
        # Counters that disagree with the inodes are found, and --repair sets them right.
        import sqlite3
        db = sqlite3.connect(self.vol.meta_db)
        db.execute("UPDATE kv SET v = ? WHERE k = ?", ((123456).to_bytes(8, "big"), b"CusedSpace"))
        db.commit()
        db.close()
        report = self.fsck(rc_expected=1)
        self.assertEqual([p["kind"] for p in report["problems"]], ["usage-counter"], report)
        report = self.fsck("--repair")
        st = self.vol.status_json()
        self.assertEqual((st["used_bytes"], st["inodes"]), (expect_bytes, base), st)
        self.assertEqual(self.fsck()["problems"], [])

    def test_deep_finds_corruption_that_keeps_the_size(self):
        good = os.path.join(self.mnt, "good")
        rotten = os.path.join(self.mnt, "d", "rotten")
        os.makedirs(os.path.dirname(rotten))
        with open(good, "wb") as f:
            f.write(os.urandom(2 * MiB + 5))
        with open(rotten, "wb") as f:
            f.write(os.urandom(3 * MiB))
        keys = self.vol.object_keys(rotten)
        self.vol.umount()

        report = self.fsck("--deep")
        self.assertEqual(report["problems"], [], report)
        self.assertEqual(report["objects_checked"], 6)
        self.assertEqual(report["bytes_verified"], 5 * MiB + 5, "deep fsck must read every byte")

        # Bit rot in the middle of one block: same size, different bytes.
        obj = os.path.join(self.vol.bucket, keys[1])
        with open(obj, "r+b") as f:
            f.seek(os.path.getsize(obj) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0x40]))
        self.assertEqual(self.fsck()["problems"], [], "a size check cannot see this damage")
        report = self.fsck("--deep", "--threads", "3", rc_expected=1)
        self.assertEqual([(p["kind"], p["path"]) for p in report["problems"]], [("corrupt-object", "/d/rotten")],
                         report)
        self.assertIn(keys[1], report["problems"][0]["detail"])
        self.assertEqual(report["bytes_verified"], 4 * MiB + 5, "the other blocks are still verified")
        # A missing block is still "missing", also in deep mode; bad options are refused.
        os.unlink(os.path.join(self.vol.bucket, keys[0]))
        kinds = sorted(p["kind"] for p in self.fsck("--deep", rc_expected=1)["problems"])
        self.assertEqual(kinds, ["corrupt-object", "missing-object"])
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--deep", "--skip-objects")
        self.assertNotEqual(rc, 0)
        self.assertIn("exclude", err)

if __name__ == "__main__":
    harness.main()
