"""Automatic metadata backups (`mount --backup-meta`) on real mounts.

A mounted client writes a zstd-compressed dump of the metadata into the object store
(VOLUME/meta/dump-*.json.zst) every interval, keeping the newest --backup-keep; with two
clients mounted, only one takes each turn; `tierfs load` restores the newest into an empty
engine and the volume mounts with every file byte-exact; a damaged backup is refused with a
clear error; --backup-meta 0 writes none. Metadata damaged under a mounted client (a record
overwritten with sqlite3 or redis-cli) makes every backup fail, logged with the record's
name, and the good backups taken before stay: none is replaced or rotated away.
"""

import glob
import hashlib
import os
import time

import harness
import meta_damage
from harness import msg, tierfs


def tree_digest(root):
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


class MetaBackupTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def backups(self, vol):
        return sorted(glob.glob(os.path.join(vol.bucket, vol.name, "meta", "dump-*.json.zst")))

    def test_backups_rotate_one_client_at_a_time_and_load_back(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_backups(vol)

    def test_backups_on_redis(self):
        vol = self.new_volume(meta_url=harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["backup"])
        self.addCleanup(vol.cleanup)
        self.check_backups(vol)

    def check_backups(self, vol):
        vol.format("--force")
        vol.mount("--backup-meta", "2", "--backup-keep", "3")
        os.makedirs(os.path.join(vol.mnt, "a", "b"))
        for i in range(50):
            with open(os.path.join(vol.mnt, "a", "b" if i % 2 else "", "f%d" % i), "wb") as f:
                f.write(os.urandom(1000 * i + 7))
        want = tree_digest(vol.mnt)
        written = time.time()
        # A second client: the two share the turns.
        other = os.path.join(vol.dir, "other")
        os.mkdir(other)
        res = vol.mount_at(other, "--backup-meta", "2", "--backup-keep", "3", log=os.path.join(vol.dir, "other.log"))
        self.assertEqual(res[0], 0, msg(*res))
        # Wait for a backup started after the writes.
        self.assertTrue(harness.wait_for(
            lambda: any(os.stat(p).st_mtime > written + 0.5 for p in self.backups(vol)), timeout=30))
        time.sleep(8)
        # The oldest are deleted, right after a new one is written: between the two there
        # are briefly four.
        self.assertTrue(harness.wait_for(lambda: len(self.backups(vol)) <= 3, timeout=10), self.backups(vol))
        with open(vol.log) as f, open(os.path.join(vol.dir, "other.log")) as g:
            logs = f.read() + g.read()
        taken = logs.count("metadata backup written")
        span = time.time() - written + 3
        # One client's worth of backups (one per 2 s), not two.
        self.assertLessEqual(taken, span / 2 + 2, logs)
        newest = self.backups(vol)[-1]
        harness.run("fusermount3", "-u", other)
        vol.umount()
        # Restore into an empty engine; the blocks are where they were.
        restored = "sqlite3://" + os.path.join(vol.dir, "restored.db")
        # The original engine is given up: the restored one takes the bucket over.
        rc, out, err = tierfs("load", restored, newest, "--take-bucket")
        self.assertEqual(rc, 0, msg(rc, out, err))
        mnt = os.path.join(vol.dir, "restored")
        os.mkdir(mnt)
        vol.meta_url, old_url = restored, vol.meta_url
        try:
            res = vol.mount_at(mnt, "--backup-meta", "0")
            self.assertEqual(res[0], 0, msg(*res))
            self.assertEqual(tree_digest(mnt), want)
            harness.run("fusermount3", "-u", mnt)
        finally:
            vol.meta_url = old_url
        # A damaged backup is refused, and nothing is loaded.
        cut = os.path.join(vol.dir, "cut.json.zst")
        with open(newest, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:200])
        rc, out, err = tierfs("load", "sqlite3://" + os.path.join(vol.dir, "cut.db"), cut)
        self.assertNotEqual(rc, 0)
        self.assertIn("zstd", err)

    def test_damaged_metadata_fails_backups_and_keeps_the_good_ones(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_damage_keeps_backups(vol)

    def test_damaged_metadata_fails_backups_and_keeps_the_good_ones_on_redis(self):
        vol = self.new_volume(meta_url=harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["backup"])
        self.addCleanup(vol.cleanup)
        self.check_damage_keeps_backups(vol)

    def check_damage_keeps_backups(self, vol):
        vol.format("--force")
        vol.mount("--backup-meta", "2", "--backup-keep", "2")
        for i in range(30):
            with open(os.path.join(vol.mnt, "f%d" % i), "wb") as f:
                f.write(os.urandom(100 * i + 1))
        victim = os.stat(os.path.join(vol.mnt, "f7")).st_ino
        self.assertTrue(harness.wait_for(lambda: len(self.backups(vol)) >= 2, timeout=30), self.backups(vol))
        meta_damage.for_url(vol.meta_url).set(meta_damage.attr_key(victim), b"\x01")

        def failures():
            return vol.read_log().count("metadata backup failed")
        # A backup that had read the record before the damage may still land: look from the
        # first failure on.
        self.assertTrue(harness.wait_for(lambda: failures() >= 1, timeout=30), vol.log_tail())
        good = {p: harness.file_sha256(p) for p in self.backups(vol)}
        self.assertGreaterEqual(len(good), 2)
        seen = failures()
        self.assertTrue(harness.wait_for(lambda: failures() >= seen + 2, timeout=30), vol.log_tail())
        self.assertEqual({p: harness.file_sha256(p) for p in self.backups(vol)}, good,
                         "a failed backup replaced or rotated away a good one")
        log = vol.read_log()
        self.assertIn("attributes of inode %d" % victim, log)
        self.assertIn(meta_damage.attr_key(victim).hex(), log)
        # The newest good backup restores every file but the damaged one's later state.
        newest = sorted(good)[-1]
        restored = "sqlite3://" + os.path.join(vol.dir, "restored.db")
        rc, out, err = tierfs("load", restored, newest)
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_no_backups_with_backup_meta_0(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount("--backup-meta", "0")
        with open(os.path.join(vol.mnt, "f"), "w") as f:
            f.write("x")
        time.sleep(2)
        vol.umount()
        self.assertEqual(self.backups(vol), [])


if __name__ == "__main__":
    harness.main()
