"""Small-file packing on real mounts (`mount --writeback`, `--pack-below`).

Small files written close together reach the store as a few pack objects, not one object
each; every client reads them back (a ranged read of the pack), also with no cache at all
and after a dump and load; deleting files frees whole packs in the background, `gc
--delete` rewrites packs that are mostly dead, and `fsck` finds a pack that went missing.
"""

import hashlib
import json
import os
import random
import shutil

import harness
from harness import msg, run, tierfs

KiB = 1 << 10
MiB = 1 << 20


def objects(bucket, kind):
    n = 0
    for root, _, files in os.walk(bucket):
        if "/%s/" % kind in root + "/":
            n += len(files)
    return n


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class PackTest(harness.TierFSTestCase):
    PER_TEST = True
    AUTO_MOUNT = False

    def setUp(self):
        super().setUp()
        self.vol = self.new_volume()
        self.addCleanup(self.vol.cleanup)
        self.vol.format()
        self.rng = random.Random(7)

    def write_files(self, n, sizes=(1, 100 * KiB)):
        want = {}
        d = os.path.join(self.vol.mnt, "data")
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            data = self.rng.randbytes(self.rng.randint(*sizes))
            p = os.path.join(d, "f%05d" % i)
            with open(p, "wb") as f:
                f.write(data)
            want[p] = hashlib.sha256(data).hexdigest()
        return want

    def reader(self, name="reader"):
        """A second client with no cache at all: every read goes to the store."""
        mnt = os.path.join(self.vol.dir, name)
        os.makedirs(mnt, exist_ok=True)
        res = self.vol.mount_at(mnt, "--cache-dir", "memory", "--cache-size", "0")
        self.assertEqual(res[0], 0, msg(*res))
        return mnt

    def check(self, want, mnt=None):
        for p, h in want.items():
            q = p if mnt is None else os.path.join(mnt, os.path.relpath(p, self.vol.mnt))
            self.assertEqual(digest(q), h, q)

    def gc(self, *extra):
        rc, out, err = tierfs("gc", self.vol.meta_url, "--json", *extra)
        self.assertEqual(rc, 0, msg(rc, out, err))
        return json.loads(out)

    def test_small_files_become_a_few_packs_and_read_back_everywhere(self):
        self.vol.mount("--writeback", "--upload-delay", "3")  # read first while staged
        want = self.write_files(600)
        big = os.path.join(self.vol.mnt, "big")
        with open(big, "wb") as f:
            f.write(self.rng.randbytes(9 * MiB))  # larger than --pack-below: blocks of its own
        want[big] = digest(big)
        # The writer reads its files back at once, before and after they are packed, also
        # through handles opened before (whose maps say nothing of the packs): no failed
        # read, no second try.
        self.check(want)
        held = {p: os.open(p, os.O_RDONLY) for p in sorted(want)[:21] if p != big}
        for p, fd in held.items():
            self.assertEqual(hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest(), want[p])
        self.assertTrue(harness.wait_for(
            lambda: json.loads(os.getxattr(self.vol.mnt, "tierfs.stats"))["writeback"]["staged_blocks"] == 0))
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        for p, fd in held.items():
            self.assertEqual(hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest(), want[p])
            os.close(fd)
        self.check(want)
        self.vol.umount()  # waits for every upload
        self.assertNotIn("read of inode", self.vol.read_log())
        packs, blocks = objects(self.vol.bucket, "packs"), objects(self.vol.bucket, "chunks")
        self.assertLessEqual(packs, 20, "600 small files made %d packs" % packs)
        self.assertGreaterEqual(packs, 2)  # 30 MiB of small files: packs of at most 16 MiB
        self.assertEqual(blocks, 3, "only the big file has blocks of its own")
        self.vol.mount()
        layout = json.loads(os.getxattr(os.path.join(self.vol.mnt, "data", "f00003"), "tierfs.info"))
        self.assertIn("pack", layout["chunks"][0]["slices"][0], layout)
        self.check(want)
        mnt = self.reader()
        self.check(want, mnt)
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))

    def test_another_client_reads_files_while_they_move_into_packs(self):
        # The upload waits 2 s: the reader first finds the files staged on the writer, then
        # packed, and its reads wait for the upload instead of failing.
        self.vol.mount("--writeback", "--upload-delay", "2")
        want = self.write_files(50)
        mnt = self.reader()
        self.check(want, mnt)
        self.assertGreaterEqual(objects(self.vol.bucket, "packs"), 1)
        self.assertEqual(objects(self.vol.bucket, "chunks"), 0)

    def test_deletes_free_packs_and_gc_rewrites_sparse_ones(self):
        # Two groups written apart from each other land in packs of their own.
        self.vol.mount("--writeback")
        gone = self.write_files(100, sizes=(20 * KiB, 60 * KiB))
        self.vol.umount()
        first_packs = objects(self.vol.bucket, "packs")
        self.vol.mount("--writeback")
        self.rng = random.Random(8)
        keep_dir = os.path.join(self.vol.mnt, "keep")
        os.rename(os.path.join(self.vol.mnt, "data"), os.path.join(self.vol.mnt, "old"))
        want = self.write_files(300, sizes=(20 * KiB, 60 * KiB))
        os.rename(os.path.join(self.vol.mnt, "data"), keep_dir)
        want = {os.path.join(keep_dir, os.path.basename(p)): h for p, h in want.items()}
        self.vol.umount()
        self.vol.mount()
        total = objects(self.vol.bucket, "packs")
        self.assertGreater(total, first_packs)
        before = self.gc()
        self.assertEqual(before["leaked"], 0, before)
        # A pack whose every member is deleted goes in the background.
        shutil.rmtree(os.path.join(self.vol.mnt, "old"))
        self.assertTrue(harness.wait_for(lambda: objects(self.vol.bucket, "packs") == total - first_packs, timeout=30),
                        "packs: %d of %d left" % (objects(self.vol.bucket, "packs"), total))
        # Deleting three files in four leaves the other packs sparse: gc rewrites them.
        for i, p in enumerate(sorted(want)):
            if i % 4 != 0:
                os.unlink(p)
                del want[p]
        self.check(want)
        self.vol.umount()
        sparse = self.gc("--delete", "--repack-grace", "0")
        self.assertGreaterEqual(sparse["packs_repacked"], 1, sparse)
        self.gc("--delete")  # deletes the replaced packs, their grace over
        after = self.gc()
        self.assertEqual(after["packs_sparse"], 0, after)
        self.assertEqual(after["packs_pending"], 0, after)
        self.assertEqual(after["leaked"], 0, after)
        # Within a few percent of the live data.
        self.assertLess(after["pack_object_bytes"], after["pack_live_bytes"] * 1.05 + 4096, after)
        self.vol.mount()
        self.check(want)
        self.check(want, self.reader())
        rc, out, err = tierfs("fsck", self.vol.meta_url, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))
        # Deleting everything frees every pack.
        shutil.rmtree(keep_dir)
        self.vol.umount()
        self.gc("--delete")
        self.assertEqual(objects(self.vol.bucket, "packs"), 0)
        del gone

    def test_fsck_reports_a_missing_pack_by_path(self):
        self.vol.mount("--writeback")
        self.write_files(20)
        self.vol.umount()
        packs = [os.path.join(r, f) for r, _, fs in os.walk(self.vol.bucket) for f in fs if "/packs/" in r + "/"]
        self.assertGreaterEqual(len(packs), 1)
        os.unlink(packs[0])
        rc, out, err = tierfs("fsck", self.vol.meta_url)
        self.assertNotEqual(rc, 0, msg(rc, out, err))
        self.assertIn("missing-object", out + err)
        self.assertIn("/data/f000", out + err)

    def test_dump_and_load_keep_packed_files(self):
        self.vol.mount("--writeback")
        want = self.write_files(100)
        self.assertTrue(harness.wait_for(
            lambda: json.loads(os.getxattr(self.vol.mnt, "tierfs.stats"))["writeback"]["staged_blocks"] == 0))
        # Dumped while mounted: the usage is still partly in the client's own counter shares.
        usage = {k: self.vol.status_json()[k] for k in ("used_bytes", "inodes")}
        dump = os.path.join(self.vol.dir, "dump.json")
        rc, out, err = tierfs("dump", self.vol.meta_url, dump)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.vol.umount()
        os.unlink(self.vol.meta_db)
        rc, out, err = tierfs("load", self.vol.meta_url, dump, "--take-bucket")
        self.assertEqual(rc, 0, msg(rc, out, err))
        # The usage counters come through (the clients' shares folded in), and fsck agrees.
        self.assertEqual({k: self.vol.status_json()[k] for k in ("used_bytes", "inodes")}, usage)
        rc, out, err = tierfs("fsck", self.vol.meta_url)
        self.assertEqual(rc, 0, msg(rc, out, err))
        self.vol.mount("--cache-dir", "memory")
        self.check(want)

    def test_packing_is_off_on_older_volumes_and_with_pack_below_0(self):
        self.vol.mount("--writeback", "--pack-below", "0")
        self.write_files(30)
        self.vol.umount()
        self.assertEqual(objects(self.vol.bucket, "packs"), 0)
        self.assertEqual(objects(self.vol.bucket, "chunks"), 30)
        res = self.vol.mount("--writeback", "--pack-below", "64M", check=False)
        self.assertNotEqual(res[0], 0)
        self.assertIn("--pack-below", res[1] + res[2])
        v2 = self.new_volume()
        self.addCleanup(v2.cleanup)
        v2.format("--format-version", "2")
        v2.mount("--writeback")
        os.makedirs(os.path.join(v2.mnt, "d"))
        for i in range(10):
            with open(os.path.join(v2.mnt, "d", str(i)), "wb") as f:
                f.write(b"x" * 1000)
        v2.umount()
        self.assertEqual(objects(v2.bucket, "packs"), 0)


class PackS3Test(harness.TierFSTestCase):
    """Packs on radosgw (the suite's Ceph) with metadata on Redis: ranged GETs of packs whose
    checksum tables are object metadata."""
    PER_TEST = True
    AUTO_MOUNT = False

    def test_small_files_cost_a_few_puts_on_s3_and_read_back_in_pieces(self):
        srv = harness.servers()
        url = srv["redis_url"] + "/%d" % harness.REDIS_DB["pack"]
        vol = self.new_volume(meta_url=url, storage=harness.s3_storage_args(harness.unique("pack")))
        self.addCleanup(vol.cleanup)
        vol.format("--force")
        vol.mount("--writeback")
        rng = random.Random(3)
        want = {}
        for i in range(300):
            data = rng.randbytes(rng.randint(1, 64 * KiB))
            p = os.path.join(vol.mnt, "f%03d" % i)
            with open(p, "wb") as f:
                f.write(data)
            want[os.path.basename(p)] = data
        self.assertTrue(harness.wait_for(
            lambda: json.loads(os.getxattr(vol.mnt, "tierfs.stats"))["writeback"]["staged_blocks"] == 0, timeout=60))
        st = json.loads(os.getxattr(vol.mnt, "tierfs.stats"))
        self.assertLessEqual(st["store"]["puts"], 10, st)  # not 300
        self.assertEqual(st["writeback"]["packed_blocks"], 300, st)
        vol.umount()
        rc, out, err = tierfs("gc", vol.meta_url, "--json")
        self.assertEqual(rc, 0, msg(rc, out, err))
        report = json.loads(out)
        self.assertEqual(report["objects"], 0, report)
        self.assertEqual(report["packs_live"], report["pack_objects"], report)
        mnt = os.path.join(vol.dir, "reader")
        os.makedirs(mnt)
        res = vol.mount_at(mnt, "--cache-dir", "memory", "--cache-size", "0")
        self.assertEqual(res[0], 0, msg(*res))
        for name, data in want.items():
            with open(os.path.join(mnt, name), "rb") as f:
                self.assertEqual(f.read(), data, name)
                if len(data) > 5000:
                    f.seek(4000)
                    self.assertEqual(f.read(700), data[4000:4700], name)
        rc, out, err = tierfs("fsck", vol.meta_url, "--deep")
        self.assertEqual(rc, 0, msg(rc, out, err))


if __name__ == "__main__":
    harness.main()
