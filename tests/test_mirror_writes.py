#!/usr/bin/env python3
"""Writes on a mirror (`tierfs mount MIRROR MP --primary PRIMARY-META-URL`,
mirror/forward_writes.h): a mirror with a store of its own, mounted writable through its
primary while no replicator runs. What it writes is read back at once on the same mount
(from the primary until the mirror holds it), is on the primary's mount with its data
(blocks in the primary's store, and in the mirror's own), conflicts with the primary's
names as a primary client's write would, reaches a read-only mount of the mirror once the
replicator applies it, and the mirror then equals the primary. An S3 gateway on the mirror
(`gateway --primary`) writes through the primary the same way. Bad input: --primary on a
volume that is no mirror, the wrong primary, with --read-only or --writeback, an
unreachable primary."""
import errno
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from gateway_helpers import AK, AWS, SECRET, Gateway, aws_env  # noqa: E402


def objects(bucket):
    out = set()
    for dp, _, fs in os.walk(bucket):
        out.update(os.path.relpath(os.path.join(dp, f), bucket) for f in fs if "/chunks/" in os.path.join(dp, f))
    return out


class MirrorWritesTest(harness.TierFSTestCase):
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.tmp = self.local_tmpdir()
        self.primary = harness.Volume("prim")
        self.addCleanup(self.primary.cleanup)
        self.primary.format("--changelog-hours", "1")
        # Mounts of two clients: the kernel's caches would show one the other's changes only
        # after their timeouts.
        self.primary.mount("--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0")
        self.data = os.path.join(self.primary.mnt, "data")
        os.makedirs(self.data)
        harness.make_tree(self.data, seed=5, nfiles=30, max_size=200 << 10)
        self.mirror_url = "sqlite3://" + os.path.join(self.tmp, "mirror.db")
        self.bucket = os.path.join(self.tmp, "mirror-bucket")
        self.mirror_once("--storage", "file", "--bucket", self.bucket)
        # The mount that writes, and a second, read-only one of the same mirror.
        self.writer = harness.Volume("mirror", meta_url=self.mirror_url, base=self.tmp)
        self.addCleanup(self.writer.cleanup)
        self.reader_mnt = os.path.join(self.tmp, "reader")
        os.makedirs(self.reader_mnt)

    def mirror_once(self, *extra):
        res = harness.tierfs("mirror", self.primary.meta_url, self.mirror_url, "--once", "--json", *extra)
        self.assertEqual(res[0], 0, harness.msg(*res))
        return json.loads(res[1])

    def write(self, path, data):
        with open(path, "wb") as f:
            f.write(data)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_writes_go_to_the_primary_and_are_read_back_at_once(self):
        self.writer.mount("--primary", self.primary.meta_url)
        m = os.path.join(self.writer.mnt, "data")
        before = objects(self.primary.bucket)
        payload = os.urandom(5 << 20 | 777)  # two blocks
        os.mkdir(os.path.join(m, "out"))
        self.write(os.path.join(m, "out", "ckpt"), payload)
        # Read back on the same mount, with no replicator running: from the primary.
        self.assertEqual(self.read(os.path.join(m, "out", "ckpt")), payload)
        self.assertIn("ckpt", os.listdir(os.path.join(m, "out")))
        self.assertEqual(os.stat(os.path.join(m, "out", "ckpt")).st_size, len(payload))
        # On the primary's mount, data and all: the blocks are in the primary's store, and
        # in the mirror's own.
        self.assertEqual(self.read(os.path.join(self.data, "out", "ckpt")), payload)
        new = objects(self.primary.bucket) - before
        self.assertGreaterEqual(len(new), 2)
        self.assertTrue(new <= objects(self.bucket), sorted(new - objects(self.bucket)))
        # Renames, removals, modes and xattrs, each on the primary at once.
        os.rename(os.path.join(m, "out", "ckpt"), os.path.join(m, "out", "ckpt.final"))
        victim = sorted(f for f in os.listdir(m) if os.path.isfile(os.path.join(m, f)))[0]
        os.unlink(os.path.join(m, victim))
        os.chmod(os.path.join(m, "out"), 0o750)
        os.setxattr(os.path.join(m, "out", "ckpt.final"), "user.step", b"1000")
        self.assertTrue(os.path.exists(os.path.join(self.data, "out", "ckpt.final")))
        self.assertFalse(os.path.exists(os.path.join(self.data, victim)))
        self.assertEqual(os.stat(os.path.join(self.data, "out")).st_mode & 0o777, 0o750)
        self.assertEqual(os.getxattr(os.path.join(self.data, "out", "ckpt.final"), "user.step"), b"1000")
        self.assertEqual(os.listdir(m), os.listdir(self.data))
        # A read-only mount of the mirror sees them once the replicator applied them; the
        # blocks are already in the mirror's store, so it copies none.
        rc, out, err = self.writer.mount_at(self.reader_mnt)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertFalse(os.path.exists(os.path.join(self.reader_mnt, "data", "out")))
        res = self.mirror_once()
        self.assertEqual(res["missing"], 0)
        harness.run("umount", self.reader_mnt)
        rc, out, err = self.writer.mount_at(self.reader_mnt)
        self.assertEqual(rc, 0, harness.msg(rc, out, err))
        self.assertEqual(self.read(os.path.join(self.reader_mnt, "data", "out", "ckpt.final")), payload)
        diffs = harness.compare_trees(self.data, os.path.join(self.reader_mnt, "data"), xattrs=True)
        self.assertEqual(diffs, [], "\n".join(diffs[:20]))
        diffs = harness.compare_trees(self.data, m, xattrs=True)
        self.assertEqual(diffs, [], "\n".join(diffs[:20]))

    def test_writes_conflict_with_the_primarys_names(self):
        self.writer.mount("--primary", self.primary.meta_url, "--attr-cache", "0", "--entry-cache", "0",
                          "--dir-entry-cache", "0")
        m = os.path.join(self.writer.mnt, "data")
        # Made on the primary after the mirror's last apply: the mirror has not seen it.
        os.mkdir(os.path.join(self.data, "taken"))
        self.write(os.path.join(self.data, "taken-file"), b"primary's")
        with self.assertRaises(OSError) as cm:
            os.mkdir(os.path.join(m, "taken"))
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        with self.assertRaises(OSError) as cm:
            os.open(os.path.join(m, "taken-file"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        # Once refused by the primary, the names are this client's view too.
        self.assertEqual(self.read(os.path.join(m, "taken-file")), b"primary's")
        # Two writers on one name: the primary's transaction decides; nothing is lost.
        self.write(os.path.join(m, "shared"), b"from the mirror")
        self.write(os.path.join(self.data, "shared"), b"from the primary")
        self.assertEqual(self.read(os.path.join(self.data, "shared")), b"from the primary")

    def test_a_gateway_on_the_mirror_writes_through_the_primary(self):
        if not os.path.exists(AWS):
            self.skipTest("awscli is not installed (scripts/install-deps.sh installs it)")
        gw = Gateway(self.mirror_url, self.tmp, "--primary", self.primary.meta_url)
        self.addCleanup(gw.stop)
        src, back = os.path.join(self.tmp, "obj"), os.path.join(self.tmp, "obj.back")
        payload = os.urandom(300000)
        self.write(src, payload)

        def aws(*args):
            p = subprocess.run([AWS, "--endpoint-url", gw.endpoint, "s3"] + list(args), capture_output=True,
                               text=True, env=aws_env(AK, SECRET), timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr + "\ngateway log:\n" + gw.log()[-3000:])
            return p.stdout

        aws("cp", src, "s3://prim/data/from-s3")
        aws("cp", "s3://prim/data/from-s3", back)  # at once, through the same gateway
        self.assertEqual(self.read(back), payload)
        self.assertIn("from-s3", aws("ls", "s3://prim/data/"))
        self.assertEqual(self.read(os.path.join(self.data, "from-s3")), payload)

    def test_bad_input_is_refused_clearly(self):
        other = harness.Volume("other", base=self.tmp)
        self.addCleanup(other.cleanup)
        other.format("--changelog-hours", "1")
        self.assertFails(self.writer.mount("--primary", other.meta_url, check=False), "not the one mirror")
        self.assertFails(other.mount("--primary", self.primary.meta_url, check=False), "not a mirror")
        self.assertFails(self.writer.mount("--primary", self.primary.meta_url, "--read-only", check=False),
                         "--read-only")
        self.assertFails(self.writer.mount("--primary", self.primary.meta_url, "--writeback", check=False),
                         "--writeback")
        self.assertFails(self.writer.mount("--primary", "redis://127.0.0.1:1/1", check=False), "127.0.0.1:1")
        self.assertFails(self.writer.mount("--primary", os.path.join(self.tmp, "nothing.db"), check=False),
                         "nothing.db")
        # Nothing was written anywhere: the mirror still equals its last apply.
        self.writer.mount()
        diffs = harness.compare_trees(self.data, os.path.join(self.writer.mnt, "data"), xattrs=True)
        self.assertEqual(diffs, [], "\n".join(diffs[:20]))


if __name__ == "__main__":
    harness.main()
