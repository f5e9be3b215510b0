"""`tierfs gc` on a real volume: objects leaked by a crash between upload and commit are
found and, with --delete, removed; objects younger than the safety window and every object
a file refers to are left alone; the files read back intact afterwards."""

import hashlib
import json
import os
import shutil
import time

import harness
from harness import msg, tierfs

MiB = 1 << 20


class GcTest(harness.TierFSTestCase):
    PER_TEST = True
    BLOCK_SIZE = "1M"

    def gc(self, *args):
        rc, out, err = tierfs("gc", self.vol.meta_url, "--json", *args)
        self.assertEqual(rc, 0, msg(rc, out, err))
        return json.loads(out)

    def leak_copy(self, key, new_id, age_s):
        """Plants a block object as a crashed client would leave it: stored, never committed."""
        vol, _chunks, _fan, name = key.split("/")
        _id, index, length = name.split("_")
        leaked = "%s/chunks/%s/%d_%s_%s" % (vol, _fan, new_id, index, length)
        dst = os.path.join(self.vol.bucket, leaked)
        shutil.copyfile(os.path.join(self.vol.bucket, key), dst)
        t = time.time() - age_s
        os.utime(dst, (t, t))
        return dst

    def test_gc_finds_and_deletes_only_old_leaks(self):
        files = {}
        for i in range(3):
            p = os.path.join(self.mnt, "f%d" % i)
            data = os.urandom(2 * MiB + 1000 * i)
            with open(p, "wb") as f:
                f.write(data)
            files[p] = hashlib.sha256(data).hexdigest()
        keys = self.vol.object_keys(os.path.join(self.mnt, "f0"))
        self.assertGreaterEqual(len(keys), 2)
        self.vol.umount()

        old = self.leak_copy(keys[0], 987654321, age_s=7200)
        young = self.leak_copy(keys[1], 987654322, age_s=0)

        report = self.gc()
        self.assertEqual(report["leaked"], 1, report)
        self.assertEqual(report["young"], 1, report)
        self.assertEqual(report["deleted"], 0, report)
        self.assertTrue(any(k.endswith(os.path.basename(old)) for k in report["leaked_keys"]), report)
        self.assertTrue(os.path.exists(old), "gc without --delete removed an object")

        report = self.gc("--delete")
        self.assertEqual(report["deleted"], 1, report)
        self.assertFalse(os.path.exists(old), "the old leaked object is still there")
        self.assertTrue(os.path.exists(young), "gc deleted an object younger than --min-age")
        for k in keys:
            self.assertTrue(os.path.exists(os.path.join(self.vol.bucket, k)), "gc deleted a referenced object " + k)

        # A second pass finds nothing old to collect.
        self.assertEqual(self.gc()["leaked"], 0)
        # Every file still reads back exactly.
        self.vol.mount()
        for p, digest in files.items():
            with open(p, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, p)

    def test_gc_min_age_and_bad_input(self):
        with open(os.path.join(self.mnt, "f"), "wb") as f:
            f.write(os.urandom(MiB + 1))
        keys = self.vol.object_keys(os.path.join(self.mnt, "f"))
        self.vol.umount()
        young = self.leak_copy(keys[0], 555555555, age_s=120)
        # With a one-minute window the two-minute-old object is fair game.
        report = self.gc("--min-age", "1m", "--delete")
        self.assertEqual(report["deleted"], 1, report)
        self.assertFalse(os.path.exists(young))
        rc, out, err = tierfs("gc", self.vol.meta_url, "--min-age", "soon")
        self.assertNotEqual(rc, 0)
        self.assertIn("--min-age", err)
        rc, out, err = tierfs("gc", "sqlite3://" + os.path.join(self.vol.dir, "missing.db"))
        self.assertNotEqual(rc, 0)


if __name__ == "__main__":
    harness.main()
