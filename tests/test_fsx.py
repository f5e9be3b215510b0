"""File-exerciser (in the manner of the classic fsx): thousands of random operations on one
file in the mount, each read checked byte for byte against an in-memory model of what the
file must hold. Operations: pread/pwrite of every size, reads and writes through a shared
mmap, O_DIRECT reads and writes, truncate up and down, fallocate (allocate, keep-size, punch
hole, zero range), copy_file_range inside the file, fsync, and close/reopen. The whole file
is compared again after a remount.

Reproduce a failure with SEED=<printed seed> python3 tests/test_fsx.py; OPS sets the count.
"""

import mmap
import os
import random
import sys

import harness
from harness import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, fallocate

KiB = 1 << 10
MiB = 1 << 20
MAX_LEN = 12 * MiB          # spans several 4 MiB blocks (the default block size)
PAGE = mmap.PAGESIZE




class Fsx:
    def __init__(self, testcase, path, rng):
        self.t = testcase
        self.path = path
        self.rng = rng
        self.model = bytearray()
        self.history = []
        self.fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        self.dfd = os.open(path, os.O_RDWR | os.O_DIRECT)

    # ---- helpers ----

    def note(self, s):
        self.history.append(s)
        del self.history[:-30]

    def fail(self, what):
        self.t.fail("%s\nlast operations:\n  %s" % (what, "\n  ".join(self.history)))

    def span(self, max_len=MAX_LEN):
        r = self.rng.random()
        if r < 0.3:
            n = self.rng.randint(1, 100)
        elif r < 0.7:
            n = self.rng.randint(1, 256 * KiB)
        else:
            n = self.rng.randint(1, 3 * MiB)
        off = self.rng.randrange(0, max_len)
        return off, max(1, min(n, max_len - off))

    def extend(self, end):
        if end > len(self.model):
            self.model.extend(bytes(end - len(self.model)))

    def check(self, off, got, want, how):
        if got != want:
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            self.fail("%s at %d+%d: %d bytes returned, %d expected; first difference at file offset %d"
                      % (how, off, len(want), len(got), len(want), off + first))

    def check_size(self, how):
        size = os.fstat(self.fd).st_size
        if size != len(self.model):
            self.fail("%s: size %d, expected %d" % (how, size, len(self.model)))

    # ---- operations ----

    def op_read(self):
        off, n = self.span(MAX_LEN + MiB)
        self.note("read %d+%d" % (off, n))
        self.check(off, os.pread(self.fd, n, off), bytes(self.model[off:off + n]), "read")

    def op_write(self):
        off, n = self.span()
        data = self.rng.randbytes(n)
        self.note("write %d+%d" % (off, n))
        if os.pwrite(self.fd, data, off) != n:
            self.fail("short write")
        self.extend(off + n)
        self.model[off:off + n] = data

    def op_mapread(self):
        size = len(self.model)
        if size == 0:
            return
        off = self.rng.randrange(0, size)
        n = self.rng.randint(1, min(size - off, 2 * MiB))
        self.note("mapread %d+%d" % (off, n))
        with mmap.mmap(self.fd, size, prot=mmap.PROT_READ) as m:
            self.check(off, bytes(m[off:off + n]), bytes(self.model[off:off + n]), "mmap read")

    def op_mapwrite(self):
        off, n = self.span()
        n = min(n, 2 * MiB)
        data = self.rng.randbytes(n)
        self.note("mapwrite %d+%d" % (off, n))
        if off + n > len(self.model):  # a mapping cannot grow the file: extend it first
            os.ftruncate(self.fd, off + n)
            self.extend(off + n)
        with mmap.mmap(self.fd, len(self.model)) as m:
            m[off:off + n] = data
            if self.rng.random() < 0.5:
                m.flush()
        self.model[off:off + n] = data

    def op_truncate(self):
        size = self.rng.randrange(0, MAX_LEN)
        self.note("truncate %d" % size)
        os.ftruncate(self.fd, size)
        if size < len(self.model):
            del self.model[size:]
        else:
            self.extend(size)

    def op_fallocate(self):
        off, n = self.span()
        mode = self.rng.choice([0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE])
        self.note("fallocate mode=%#x %d+%d" % (mode, off, n))
        fallocate(self.fd, mode, off, n)
        end = off + n
        if not (mode & FALLOC_FL_KEEP_SIZE):
            self.extend(end)
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            end = min(end, len(self.model))
            if end > off:
                self.model[off:end] = bytes(end - off)

    def op_copy_range(self):
        size = len(self.model)
        if size < 2:
            return
        src = self.rng.randrange(0, size)
        n = self.rng.randint(1, min(size - src, 3 * MiB))
        dst = self.rng.randrange(0, MAX_LEN)
        if src < dst + n and dst < src + n:  # overlapping ranges of one file: EINVAL by design
            return
        self.note("copy_file_range %d+%d -> %d" % (src, n, dst))
        done = 0
        while done < n:
            c = os.copy_file_range(self.fd, self.fd, n - done, src + done, dst + done)
            if c <= 0:
                self.fail("copy_file_range returned %d" % c)
            done += c
        chunk = bytes(self.model[src:src + n])
        self.extend(dst + n)
        self.model[dst:dst + n] = chunk

    def op_direct(self):
        # O_DIRECT through a second descriptor: page-aligned buffers, 4 KiB-aligned ranges.
        off = self.rng.randrange(0, MAX_LEN // 4096) * 4096
        n = self.rng.randint(1, 64) * 4096
        buf = mmap.mmap(-1, n)
        try:
            if self.rng.random() < 0.5:
                data = self.rng.randbytes(n)
                buf[:] = data
                self.note("direct write %d+%d" % (off, n))
                if os.pwritev(self.dfd, [buf], off) != n:
                    self.fail("short direct write")
                self.extend(off + n)
                self.model[off:off + n] = data
            else:
                self.note("direct read %d+%d" % (off, n))
                got = os.preadv(self.dfd, [buf], off)
                self.check(off, bytes(buf[:got]), bytes(self.model[off:off + n]), "O_DIRECT read")
        finally:
            buf.close()

    def op_fsync(self):
        self.note("fsync")
        os.fsync(self.fd)

    def op_reopen(self):
        self.note("close and reopen")
        os.close(self.fd)
        os.close(self.dfd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.dfd = os.open(self.path, os.O_RDWR | os.O_DIRECT)
        self.check_size("after reopen")

    OPS = [(op_read, 20), (op_write, 20), (op_mapread, 6), (op_mapwrite, 6), (op_truncate, 5),
           (op_fallocate, 8), (op_copy_range, 6), (op_direct, 6), (op_fsync, 2), (op_reopen, 2)]

    def step(self):
        ops, weights = zip(*self.OPS)
        op = self.rng.choices(ops, weights)[0]
        try:
            op(self)
        except OSError as e:
            self.fail("%s failed: %s" % (op.__name__, e))
        self.check_size(op.__name__)

    def close(self):
        os.close(self.fd)
        os.close(self.dfd)

    def compare_whole(self, how):
        with open(self.path, "rb") as f:
            got = f.read()
        self.check(0, got, bytes(self.model), how)


class FsxTest(harness.TierFSTestCase):
    PER_TEST = True

    def test_random_file_operations(self):
        seed = int(os.environ.get("SEED") or random.randrange(1 << 30))
        nops = int(os.environ.get("OPS") or 2500)
        print("fsx seed %d, %d operations" % (seed, nops), file=sys.stderr)
        fsx = Fsx(self, os.path.join(self.mnt, "fsx-file"), random.Random(seed))
        for i in range(nops):
            fsx.step()
            if i % 500 == 499:
                fsx.compare_whole("whole file after %d operations (seed %d)" % (i + 1, seed))
        fsx.close()
        fsx.compare_whole("whole file at the end (seed %d)" % seed)
        self.vol.remount()
        fsx.compare_whole("whole file after remount (seed %d)" % seed)
        self.assertEqual(os.stat(fsx.path).st_size, len(fsx.model))


if __name__ == "__main__":
    harness.main()
