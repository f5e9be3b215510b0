"""`tierfs rmr` on real mounts, on SQLite and on Redis: a tree of thousands of files goes in
batched metadata transactions; what is still open stays readable until closed, a second
name outside the tree keeps its file, the usage counters and fsck agree afterwards, and
`gc` finds every block of the removed files freed. A user without write permission on part
of the tree gets EACCES and leaves a consistent volume.
"""

import json
import os
import subprocess

import harness
from harness import msg, tierfs


def build_tree(root, dirs=10, files=300):
    n = 0
    for d in range(dirs):
        sub = os.path.join(root, "d%02d" % d, "deeper")
        os.makedirs(sub)
        for i in range(files):
            p = os.path.join(root, "d%02d" % d, "f%04d" % i) if i % 2 else os.path.join(sub, "f%04d" % i)
            with open(p, "wb") as f:
                if i % 100 == 0:
                    f.write(os.urandom(70000))
            n += 1
        os.symlink("deeper/f0000", os.path.join(root, "d%02d" % d, "link"))
        n += 1
    return n


class RmrTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def check_rmr(self, vol):
        vol.format("--force")
        vol.mount()
        base = {k: vol.status_json()[k] for k in ("used_bytes", "inodes")}
        tree = os.path.join(vol.mnt, "tree")
        os.mkdir(tree)
        n = build_tree(tree)
        os.link(os.path.join(tree, "d00", "f0001"), os.path.join(vol.mnt, "outside"))
        held = os.open(os.path.join(tree, "d01", "deeper", "f0000"), os.O_RDONLY)
        try:
            rc, out, err = tierfs("rmr", tree, "--json")
            self.assertEqual(rc, 0, msg(rc, out, err))
            self.assertEqual(json.loads(out), {"files": n, "dirs": 21})
            self.assertFalse(os.path.exists(tree))
            self.assertEqual(len(os.read(held, 1 << 20)), 70000)  # open: still readable
        finally:
            os.close(held)
        # (the kernel may show the old link count for its attribute timeout, 1 s)
        self.assertTrue(harness.wait_for(lambda: os.stat(os.path.join(vol.mnt, "outside")).st_nlink == 1, timeout=5))
        self.assertEqual(sorted(os.listdir(vol.mnt)), ["outside"])
        self.assertTrue(harness.wait_for(
            lambda: {k: vol.status_json()[k] for k in ("used_bytes", "inodes")} ==
            {"used_bytes": base["used_bytes"], "inodes": base["inodes"] + 1}, timeout=10), vol.status_json())
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("gc", vol.meta_url, "--delete", "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("gc", vol.meta_url, "--json")
        self.assertEqual(json.loads(out)["objects"], 0, out)  # "outside" is empty; every block freed

    def test_rmr_on_sqlite(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        self.check_rmr(vol)

    def test_rmr_on_redis(self):
        url = harness.servers()["redis_url"] + "/%d" % harness.REDIS_DB["rmr"]
        vol = self.new_volume(meta_url=url)
        self.addCleanup(vol.cleanup)
        self.check_rmr(vol)

    def test_a_user_without_permission_gets_eacces_and_a_consistent_volume(self):
        vol = self.new_volume()
        self.addCleanup(vol.cleanup)
        vol.format()
        vol.mount("-o", "allow_other")
        tree = os.path.join(vol.mnt, "tree")
        os.makedirs(os.path.join(tree, "locked"))
        for p in ("a", "locked/b"):
            open(os.path.join(tree, p), "w").close()
        os.chmod(tree, 0o777)
        os.chmod(os.path.join(tree, "locked"), 0o555)
        res = subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", harness.tierfs_bin(),
                              "rmr", tree], capture_output=True, text=True)
        self.assertNotEqual(res.returncode, 0, res)
        self.assertIn("Permission denied", res.stderr)
        self.assertTrue(os.path.exists(os.path.join(tree, "locked", "b")))
        vol.umount()
        rc, out, err = tierfs("fsck", vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))


if __name__ == "__main__":
    harness.main()
