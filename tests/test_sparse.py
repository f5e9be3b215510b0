"""Sparse files: st_blocks counts the bytes that hold data, so du, cp --sparse and tar see
holes; SEEK_DATA / SEEK_HOLE find them; fallocate preallocates (counted, reads as zeros,
a hole for SEEK_DATA), punches and zeroes ranges as ext4 does, and fails with ENOSPC when
asked for more than the volume has. Where TierFS is exact the same steps run on the local
disk (ext4 on CI) and must agree."""

import os

import harness
from harness import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, fallocate

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30



def allocated(path):
    return os.stat(path).st_blocks * 512


def segments(path):
    """[(start, end, 'data'|'hole')] from SEEK_DATA / SEEK_HOLE, as tar and cp walk a file."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                data = size
            if data > pos:
                out.append((pos, data, "hole"))
            if data >= size:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            out.append((data, hole, "data"))
            pos = hole
    finally:
        os.close(fd)
    return out


def make_sparse(path):
    """A 200 MiB file with data at 0, 64 MiB - 4 KiB (across a chunk boundary) and 150 MiB."""
    with open(path, "wb") as f:
        f.truncate(200 * MiB)
        for off, n in ((0, 64 * KiB), (64 * MiB - 4 * KiB, 8 * KiB), (150 * MiB, MiB)):
            f.seek(off)
            f.write(os.urandom(n))
    return [(0, 64 * KiB, "data"), (64 * KiB, 64 * MiB - 4 * KiB, "hole"),
            (64 * MiB - 4 * KiB, 64 * MiB + 4 * KiB, "data"), (64 * MiB + 4 * KiB, 150 * MiB, "hole"),
            (150 * MiB, 151 * MiB, "data"), (151 * MiB, 200 * MiB, "hole")]


class SparseTest(harness.TierFSTestCase):
    def local(self, name):
        return os.path.join(self.local_tmpdir(), name)

    def test_sparse_file_blocks_and_seek(self):
        p = os.path.join(self.work, "sparse")
        want = make_sparse(p)
        ref = self.local("sparse")
        self.assertEqual(make_sparse(ref), want)
        self.assertEqual(segments(ref), want, "the checker disagrees with the local disk")
        self.assertEqual(segments(p), want)
        self.assertEqual(allocated(p), allocated(ref))
        self.assertEqual(allocated(p), 64 * KiB + 8 * KiB + MiB)
        fd = os.open(p, os.O_RDONLY)
        try:
            with self.assertRaises(OSError):
                os.lseek(fd, 200 * MiB, os.SEEK_DATA)  # ENXIO at the end
            self.assertEqual(os.lseek(fd, 151 * MiB - 1, os.SEEK_HOLE), 151 * MiB)
            self.assertEqual(os.lseek(fd, 199 * MiB, os.SEEK_HOLE), 199 * MiB)
        finally:
            os.close(fd)
        self.vol.remount()
        self.assertEqual(segments(p), want)
        self.assertEqual(allocated(p), 64 * KiB + 8 * KiB + MiB)

    def test_data_and_holes_in_4k_blocks_like_ext4(self):
        # Small writes at unaligned places: SEEK_DATA/SEEK_HOLE answer in 4 KiB blocks (a
        # block with one byte of data is data), as ext4 does, and st_blocks counts those
        # blocks, so a tool that probes the allocation unit finds 4 KiB, not 2 bytes.
        def make(path):
            with open(path, "wb") as f:
                f.truncate(40000)
                # (separate writes touch separate blocks: a block two writes share counts
                # twice, an upper bound, as rewritten data does; see the README)
                for off, data in ((1, b"a"), (5000, b"bc"), (12286, b"defg"), (30000, b"h" * 100)):
                    f.seek(off)
                    f.write(data)
            return os.open(path, os.O_RDONLY)

        p, ref = os.path.join(self.work, "small"), self.local("small")
        for path in (ref, p):
            fd = make(path)
            try:
                probes = {}
                for pos in (0, 1, 2, 100, 4095, 4096, 4097, 5002, 8191, 8192, 12288, 16383, 16384, 16385, 29999,
                            30100, 39999):
                    got = []
                    for whence in (os.SEEK_DATA, os.SEEK_HOLE):
                        try:
                            got.append(os.lseek(fd, pos, whence))
                        except OSError as e:
                            got.append(e.errno)
                    probes[pos] = got
            finally:
                os.close(fd)
            if path == ref:
                want = probes
                self.assertEqual(segments(ref), [(0, 16384, "data"), (16384, 28672, "hole"), (28672, 32768, "data"),
                                                 (32768, 40000, "hole")], "the local disk is not in 4 KiB blocks")
        self.assertEqual(probes, want)
        self.assertEqual(segments(p), segments(ref))
        self.assertEqual(allocated(p), allocated(ref))
        self.assertEqual(allocated(p), 5 * 4096)
        self.vol.remount()
        self.assertEqual(segments(p), segments(ref))
        self.assertEqual(allocated(p), 5 * 4096)

    def test_tools_keep_holes(self):
        p = os.path.join(self.work, "sparse")
        make_sparse(p)
        copy = os.path.join(self.work, "copy")
        self.assertOk(harness.run("cp", "--sparse=always", p, copy), "cp --sparse")
        self.assertEqual(harness.file_sha256(copy), harness.file_sha256(p))
        self.assertLess(allocated(copy), 2 * MiB)
        # du reports the data, not the length.
        rc, out, err = harness.run("du", "-k", p)
        self.assertEqual(rc, 0, err)
        self.assertLess(int(out.split()[0]), 2048)
        # tar finds the holes through SEEK_HOLE and restores them.
        tarball = self.local("s.tar")
        self.assertOk(harness.run("tar", "--sparse", "-cf", tarball, "-C", self.work, "sparse"), "tar -c")
        self.assertLess(os.path.getsize(tarball), 4 * MiB)
        out_dir = os.path.join(self.work, "x")
        os.mkdir(out_dir)
        self.assertOk(harness.run("tar", "-xf", tarball, "-C", out_dir), "tar -x")
        back = os.path.join(out_dir, "sparse")
        self.assertEqual(harness.file_sha256(back), harness.file_sha256(p))
        self.assertLess(allocated(back), 2 * MiB)

    def test_written_then_truncated(self):
        p = os.path.join(self.work, "f")
        with open(p, "wb") as f:
            f.write(os.urandom(10 * MiB))
            f.flush()
            self.assertEqual(allocated(p), 10 * MiB, "buffered data counts before it is committed")
        self.assertEqual(allocated(p), 10 * MiB)
        os.truncate(p, 3 * MiB + 1)
        self.assertEqual(allocated(p), 3 * MiB + 4 * KiB)
        os.truncate(p, 100 * MiB)
        self.assertEqual(allocated(p), 3 * MiB + 4 * KiB)
        # The data ends 1 byte into a 4 KiB block: the hole starts with the next block.
        self.assertEqual(segments(p)[-1], (3 * MiB + 4 * KiB, 100 * MiB, "hole"))

    def test_fallocate_punch_and_zero_like_ext4(self):
        def steps(path):
            seen = []
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fallocate(fd, 0, 0, 100 * MiB)
                seen.append(("allocate", os.fstat(fd).st_size, allocated(path)))
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 50 * MiB)
                seen.append(("punch", os.fstat(fd).st_size, allocated(path)))
                fallocate(fd, FALLOC_FL_ZERO_RANGE, 90 * MiB, 20 * MiB)
                seen.append(("zero", os.fstat(fd).st_size, allocated(path)))
                os.pwrite(fd, b"x" * 4096, 30 * MiB)  # into the punched hole
                seen.append(("write", allocated(path)))
                # (before any read: ext4 reports unwritten ranges with cached pages as data)
                seen.append(("segments", segments(path)))
                seen.append(("zeros", os.pread(fd, 4096, 60 * MiB) == bytes(4096)))
                # Beyond the end the size stays. (ext4 counts such blocks in st_blocks,
                # TierFS does not: documented.)
                fallocate(fd, FALLOC_FL_KEEP_SIZE, 110 * MiB, MiB)
                seen.append(("keep size", os.fstat(fd).st_size))
            finally:
                os.close(fd)
            return seen

        mine = steps(os.path.join(self.work, "pre"))
        ref = steps(self.local("pre"))
        self.assertEqual(mine, ref)
        self.assertEqual(mine[0], ("allocate", 100 * MiB, 100 * MiB))

    def test_fallocate_beyond_the_volume_is_enospc(self):
        st = os.statvfs(self.mnt)
        free = st.f_bavail * st.f_frsize
        # Tests running beside this one free space on the same disk between statvfs and
        # fallocate (CI once freed more than a MiB in that gap): ask for far more than that.
        beyond = free + 64 * GiB
        p = os.path.join(self.work, "huge")
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            for mode in (0, FALLOC_FL_KEEP_SIZE):
                with self.assertRaises(OSError) as cm:
                    fallocate(fd, mode, 0, beyond)
                self.assertEqual(cm.exception.errno, 28, "ENOSPC expected, got %s" % cm.exception)
            self.assertEqual(os.fstat(fd).st_size, 0)
            fallocate(fd, 0, 0, MiB)  # within the space left: fine
            self.assertEqual(os.fstat(fd).st_size, MiB)
        finally:
            os.close(fd)
        rc, _, err = harness.run("fallocate", "-l", str(beyond * 2), p)
        self.assertNotEqual(rc, 0)
        self.assertIn("No space left on device", err)


if __name__ == "__main__":
    harness.main()
