"""`tierfs fsck` on a real volume damaged on purpose: a deleted block object is reported by
the file's path with a non-zero exit; a clean volume passes; --path limits the check."""

import json
import os

import harness
from harness import msg, tierfs

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


if __name__ == "__main__":
    harness.main()
