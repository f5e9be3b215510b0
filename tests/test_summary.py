"""`tierfs summary` on a real mount: the totals of a tree with known sizes (a sparse file,
hard links inside the tree and out of it, a symlink, an empty directory), counted by the
mount from metadata in steps, agree with what was written and with a walk through the
kernel; a file PATH gives that file; a path outside TierFS is refused.
"""

import errno
import json
import os
import tempfile

import harness
from harness import msg, tierfs


def kernel_totals(top):
    """What du-like counting through the kernel gives: regular files' lengths and data
    blocks, inodes counted once."""
    seen = set()
    t = {"bytes": 0, "allocated": 0, "files": 0, "dirs": 1}
    for root, dirs, files in os.walk(top):
        t["dirs"] += len(dirs)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            st = os.lstat(os.path.join(root, name))
            if st.st_ino in seen:
                continue
            seen.add(st.st_ino)
            t["files"] += 1
            if os.path.isfile(os.path.join(root, name)) and not os.path.islink(os.path.join(root, name)):
                t["bytes"] += st.st_size
                t["allocated"] += st.st_blocks * 512
    return t


class SummaryTest(harness.TierFSTestCase):

    def summary(self, path):
        rc, out, err = tierfs("summary", path, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        return json.loads(out)

    def test_tree_with_sparse_file_and_hard_links(self):
        top = os.path.join(self.work, "top")
        os.makedirs(os.path.join(top, "a", "b", "empty"))
        os.makedirs(os.path.join(top, "many"))
        expect_bytes = 0
        for i in range(2500):  # more entries than one batch (1000) of one directory
            with open(os.path.join(top, "many", "f%04d" % i), "wb") as f:
                if i % 250 == 0:
                    f.write(b"m" * (i + 1))
                    expect_bytes += i + 1
        with open(os.path.join(top, "a", "data"), "wb") as f:
            f.write(os.urandom(3 << 20))
        expect_bytes += 3 << 20
        with open(os.path.join(top, "a", "b", "sparse"), "wb") as f:  # 100 MiB long, 8 KiB of data
            f.seek(50 << 20)
            f.write(b"s" * 4096)
            f.seek((100 << 20) - 4096)
            f.write(b"e" * 4096)
        expect_bytes += 100 << 20
        os.link(os.path.join(top, "a", "data"), os.path.join(top, "a", "b", "data-link"))  # counted once
        os.link(os.path.join(top, "many", "f0000"), os.path.join(self.work, "outside-link"))  # not in the tree
        os.symlink("../data", os.path.join(top, "a", "b", "sym"))
        s = self.summary(top)
        expect_files = 2500 + 1 + 1 + 1  # many/*, data (with its second link), sparse, sym
        self.assertEqual(s["bytes"], expect_bytes, s)
        self.assertEqual(s["files"], expect_files, s)
        self.assertEqual(s["dirs"], 5, s)  # top, a, b, empty, many
        self.assertEqual(s["unreadable"], 0)
        # The sparse file's holes hold no data: allocated is what was written, in whole 4 KiB
        # blocks as st_blocks counts it (each small file holds one).
        expect_alloc = sum(4096 for i in range(2500) if i % 250 == 0) + (3 << 20) + 8192
        self.assertEqual(s["allocated"], expect_alloc, s)
        k = kernel_totals(top)
        self.assertEqual({n: s[n] for n in ("bytes", "files", "dirs")}, {n: k[n] for n in ("bytes", "files", "dirs")})
        # A file: just it. The human form says the same.
        f = self.summary(os.path.join(top, "a", "b", "sparse"))
        self.assertEqual((f["bytes"], f["files"], f["dirs"], f["allocated"]), (100 << 20, 1, 0, 8192))
        # The protocol: the first read names the walk; reading the walk again (done) answers
        # the same totals; an unknown walk is no xattr.
        first = json.loads(os.getxattr(top, "tierfs.summary"))
        self.assertTrue(first["done"])
        again = json.loads(os.getxattr(top, "tierfs.summary." + first["token"]))
        self.assertEqual(again, first)
        self.assertEqual(again["bytes"], expect_bytes)
        with self.assertRaises(OSError) as e:
            os.getxattr(top, "tierfs.summary.12345")
        self.assertEqual(e.exception.errno, errno.ENODATA)
        rc, out, err = tierfs("summary", top)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.assertIn("(%d bytes) in %d files and 5 directories" % (expect_bytes, expect_files), out)

    def test_unwritten_changes_of_the_mount_count_and_outside_paths_are_refused(self):
        top = os.path.join(self.work, "t")
        os.mkdir(top)
        with open(os.path.join(top, "open"), "wb") as f:
            f.write(b"z" * 12345)
            f.flush()  # in the mount's buffer, maybe not committed yet
            self.assertEqual(self.summary(top)["bytes"], 12345)
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = tierfs("summary", d)
            self.assertNotEqual(rc, 0)
            self.assertIn("not in a TierFS mount", err)


if __name__ == "__main__":
    harness.main()
