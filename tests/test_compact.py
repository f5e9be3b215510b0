"""Compaction on real mounts: files rewritten in place stay compact, and overwritten data
leaves the object store.

- `tierfs compact` rewrites a file overwritten at random places as one slice per chunk:
  the bytes read back the same on this client and on another, fsck and gc stay clean, and
  once the grace has passed the bucket holds little more than the live data;
- a writer that commits many small pieces (fsync after each) gets its chunk compacted in
  the background, without asking;
- a reader on another client holding the old layout keeps reading the right bytes after the
  replaced blocks are gone.
"""

import hashlib
import json
import os
import random
import time

import harness
from harness import msg, run, tierfs, wait_for

MiB = 1 << 20


def sha(data):
    return hashlib.sha256(data).hexdigest()


def bucket_bytes(bucket):
    total = 0
    for root, _, files in os.walk(bucket):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


class CompactTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)
        self.vol.format()

    def records(self, path):
        info = self.vol.info_json(path)
        return sum(len(c["slices"]) for c in info["chunks"])

    def rewrite(self, path, size, pieces, seed):
        """Writes `size` bytes, then overwrites `pieces` random 1 MiB ranges, each committed
        on its own (fsync). Returns the file's bytes."""
        rng = random.Random(seed)
        data = bytearray(os.urandom(size))
        with open(path, "wb") as f:
            f.write(data)
        with open(path, "r+b") as f:
            for _ in range(pieces):
                off = rng.randrange(0, size - MiB)
                piece = os.urandom(MiB)
                f.seek(off)
                f.write(piece)
                os.fsync(f.fileno())
                data[off:off + MiB] = piece
        return bytes(data)

    def test_compact_frees_overwritten_data(self):
        self.vol.mount("--compact-grace", "1")
        path = os.path.join(self.vol.mnt, "ckpt")
        # 40 commits: fewer than the background looks at (50), so the file stays fragmented
        # until asked.
        data = self.rewrite(path, 48 * MiB, 40, seed=1)
        before = bucket_bytes(self.vol.bucket)
        self.assertGreater(before, 80 * MiB)  # every overwrite is still in the store
        self.assertGreater(self.records(path), 35)
        rc, out, err = tierfs("compact", path, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        stats = json.loads(out)
        self.assertEqual(stats["compacted"], 1, stats)
        self.assertEqual(stats["records_after"], 1, stats)
        self.assertEqual(stats["live_bytes"], 48 * MiB, stats)
        self.assertEqual(self.records(path), 1)
        with open(path, "rb") as f:
            self.assertEqual(sha(f.read()), sha(data))
        # Another client reads the compacted file byte-exact.
        other = os.path.join(self.vol.dir, "other")
        os.mkdir(other)
        self.assertEqual(self.vol.mount_at(other, "--cache-dir", other + ".cache")[0], 0)
        with open(os.path.join(other, "ckpt"), "rb") as f:
            self.assertEqual(sha(f.read()), sha(data))
        # After the grace the replaced blocks leave the store: within 10% of the live data.
        self.assertTrue(wait_for(lambda: bucket_bytes(self.vol.bucket) < 48 * MiB * 1.1, timeout=60),
                        "bucket still holds %d bytes for 48 MiB of data" % bucket_bytes(self.vol.bucket))
        run("fusermount3", "-u", other)
        self.vol.umount()
        for cmd in (("fsck", "--deep"), ("gc",)):
            rc, out, err = tierfs(cmd[0], self.vol.meta_url, *cmd[1:])
            self.assertEqual(rc, 0, msg(rc, out, err))
        rc, out, err = tierfs("gc", self.vol.meta_url, "--json")
        self.assertEqual(json.loads(out)["leaked"], 0, out)
        self.vol.mount()
        with open(path, "rb") as f:
            self.assertEqual(sha(f.read()), sha(data))

    def test_many_small_commits_are_compacted_in_the_background(self):
        self.vol.mount("--compact-grace", "1")
        path = os.path.join(self.vol.mnt, "log")
        expect = bytearray()
        with open(path, "wb") as f:
            for i in range(400):
                line = ("record %06d " % i).encode() * 300
                f.write(line)
                os.fsync(f.fileno())  # each fsync commits a slice
                expect += line
        # The writer's chunk was compacted along the way: far fewer records than commits.
        self.assertTrue(wait_for(lambda: self.records(path) < 150, timeout=30), self.records(path))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), bytes(expect))

    def test_a_reader_holding_the_old_layout_keeps_reading(self):
        self.vol.mount("--compact-grace", "0")
        path = os.path.join(self.vol.mnt, "f")
        data = self.rewrite(path, 12 * MiB, 20, seed=3)
        other = os.path.join(self.vol.dir, "other")
        os.mkdir(other)
        self.assertEqual(self.vol.mount_at(other, "--cache-dir", "memory", "--mem-cache-size", "0")[0], 0)
        with open(os.path.join(other, "f"), "rb") as r:
            self.assertEqual(sha(r.read()), sha(data))  # the other client keeps the old map
            rc, out, err = tierfs("compact", path)
            self.assertEqual(rc, 0, msg(rc, out, err))
            # The replaced slices go at once (grace 0) on the first client's cleaner.
            self.assertTrue(wait_for(lambda: bucket_bytes(self.vol.bucket) < 12 * MiB * 1.1, timeout=60))
            with open("/proc/sys/vm/drop_caches", "w") as dc:
                dc.write("3\n")
            r.seek(0)
            self.assertEqual(sha(r.read()), sha(data))
        run("fusermount3", "-u", other)


if __name__ == "__main__":
    harness.main()
