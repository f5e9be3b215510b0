"""Data path: concurrent writers, huge sparse files, overlapping writes and truncates,
large sequential files with random reads, a fully written file beyond 4 GiB, O_DIRECT,
read-your-writes before close."""

import hashlib
import mmap
import os
import time
import random
import stat
import threading

import harness

MiB = 1 << 20
GiB = 1 << 30
CHUNK = 64 * MiB


def pattern_block(seed, index, size=MiB):
    return random.Random("%s/%d" % (seed, index)).randbytes(size)


def read_range(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = bytearray()
        while len(out) < n:
            b = os.pread(fd, n - len(out), off + len(out))
            if not b:
                break
            out += b
        return bytes(out)
    finally:
        os.close(fd)


class ConcurrentWritersTest(harness.TierFSTestCase):
    def _writer(self, path, idx, errors):
        try:
            rng = random.Random(idx)
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            try:
                pos = 0
                total = 10 * MiB + idx * 12345
                while pos < total:
                    n = min(total - pos, rng.choice([4096, 65536, 300000, MiB, 2 * MiB + 1]))
                    data = self._content(idx, pos, n)
                    written = 0
                    while written < n:
                        written += os.write(fd, data[written:])
                    pos += n
            finally:
                os.close(fd)
        except BaseException as e:
            errors.append((idx, repr(e)))

    @staticmethod
    def _content(idx, pos, n):
        # Position-dependent content distinct per writer: a read at the wrong offset or
        # from another writer's file cannot match.
        out = bytearray()
        block = 4096
        start = pos - pos % block
        while start < pos + n:
            out += hashlib.sha256(b"%d:%d" % (idx, start)).digest() * (block // 32)
            start += block
        skip = pos % block
        return bytes(out[skip:skip + n])

    def _verify(self, paths):
        for idx, p in enumerate(paths):
            total = 10 * MiB + idx * 12345
            self.assertEqual(os.path.getsize(p), total, p)
            with open(p, "rb") as f:
                data = f.read()
            self.assertTrue(data == self._content(idx, 0, total), "content of %s differs" % p)

    def test_eight_concurrent_writers(self):
        paths = [os.path.join(self.work, "w%d" % i) for i in range(8)]
        errors = []
        threads = [threading.Thread(target=self._writer, args=(p, i, errors)) for i, p in enumerate(paths)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        self.assertFalse(any(t.is_alive() for t in threads), "writers hung")
        self.assertEqual(errors, [])
        self._verify(paths)
        self.vol.remount()
        self._verify(paths)

    def test_concurrent_writers_one_file_disjoint_regions(self):
        p = os.path.join(self.work, "shared")
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
        region = 3 * MiB + 777
        errors = []

        def writer(i):
            try:
                fd = os.open(p, os.O_WRONLY)
                try:
                    data = self._content(100 + i, 0, region)
                    off = 0
                    rng = random.Random(i)
                    while off < region:
                        n = min(region - off, rng.choice([1000, 65536, 500000]))
                        os.pwrite(fd, data[off:off + n], i * region + off)
                        off += n
                finally:
                    os.close(fd)
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        self.assertEqual(errors, [])

        def check():
            with open(p, "rb") as f:
                data = f.read()
            self.assertEqual(len(data), 6 * region)
            for i in range(6):
                self.assertTrue(data[i * region:(i + 1) * region] == self._content(100 + i, 0, region),
                                "region %d differs" % i)
        check()
        self.vol.remount()
        check()

    def test_concurrent_processes(self):
        paths = [os.path.join(self.work, "p%d" % i) for i in range(8)]
        pids = []
        for i, p in enumerate(paths):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    errs = []
                    self._writer(p, i, errs)
                    code = 0 if not errs else 2
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
        self._verify(paths)


class SparseFileTest(harness.TierFSTestCase):
    def test_10gib_sparse_file_space(self):
        p = os.path.join(self.work, "sparse")
        size = 10 * GiB
        sv0 = os.statvfs(self.mnt)
        used0 = (sv0.f_blocks - sv0.f_bfree) * sv0.f_frsize
        with open(p, "wb") as f:
            f.write(b"start")
            f.seek(5 * GiB)
            f.write(b"middle")
            f.seek(size - 1)
            f.write(b"Z")
        st = os.stat(p)
        self.assertEqual(st.st_size, size)
        # The object store holds only the bytes written: holes cost nothing there.
        stored = 0
        for root, _dirs, files in os.walk(self.vol.bucket):
            for name in files:
                stored += os.path.getsize(os.path.join(root, name))
        self.assertLess(stored, 1 * MiB, "the bucket holds %d bytes for a sparse file" % stored)
        # Space accounting is by length, rounded to 4 KiB (as in JuiceFS; docs/design.md):
        # statfs and `tierfs status` charge the full 10 GiB, consistently; st_blocks counts
        # the bytes that hold data, so du and tar see a sparse file.
        st = os.stat(p)
        self.assertLess(st.st_blocks * 512, 64 * 1024)
        self.assertGreater(st.st_blocks, 0)
        deadline = time.time() + 10
        while True:
            sv = os.statvfs(self.mnt)
            used = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
            status = self.vol.status_json()
            if used - used0 >= size and status["used_bytes"] >= size:
                break
            self.assertLess(time.time(), deadline, "usage never reached the file's length: statfs %d, status %d"
                            % (used - used0, status["used_bytes"]))
            time.sleep(0.5)
        self.assertLess(used - used0, size + 1 * MiB)

    def test_10gib_sparse_file(self):
        p = os.path.join(self.work, "sparse")
        size = 10 * GiB
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.pwrite(fd, b"Z", size - 1)
            os.pwrite(fd, b"middle of nowhere", 5 * GiB + 12345)
            os.pwrite(fd, b"chunk-edge", 7 * CHUNK - 5)
            self.assertEqual(os.fstat(fd).st_size, size)
        finally:
            os.close(fd)
        st = os.stat(p)
        self.assertEqual(st.st_size, size)
        self.assertEqual(read_range(p, size - 1, 10), b"Z")
        self.assertEqual(read_range(p, size - 4096, 4096), bytes(4095) + b"Z")
        self.assertEqual(read_range(p, 5 * GiB + 12345 - 3, 23), bytes(3) + b"middle of nowhere" + bytes(3))
        self.assertEqual(read_range(p, 7 * CHUNK - 8, 16), bytes(3) + b"chunk-edge" + bytes(3))
        for off in (0, MiB, 3 * GiB + 7, 9 * GiB):
            self.assertEqual(read_range(p, off, 4 * MiB), bytes(4 * MiB), "hole at %d not zero" % off)
        self.assertEqual(read_range(p, size, 100), b"")

        # Shrink and grow again: old data must not come back.
        os.truncate(p, GiB)
        self.assertEqual(os.stat(p).st_size, GiB)
        os.truncate(p, size)
        self.assertEqual(read_range(p, 5 * GiB + 12345, 17), bytes(17), "truncated data resurrected")
        self.assertEqual(read_range(p, size - 1, 1), b"\0")
        self.vol.remount()
        self.assertEqual(os.stat(p).st_size, size)
        self.assertEqual(read_range(p, 5 * GiB + 12345, 17), bytes(17))
        self.assertEqual(read_range(p, size - 1, 1), b"\0")
        os.unlink(p)


class OverlapTest(harness.TierFSTestCase):
    """Overlapping writes and truncates against an in-memory model."""

    def check(self, p, model, what):
        data = read_range(p, 0, len(model) + 100)
        self.assertEqual(len(data), len(model), "%s: length" % what)
        if data != bytes(model):
            first = next(i for i in range(len(model)) if data[i] != model[i])
            self.fail("%s: content differs first at offset %d" % (what, first))

    def test_overlapping_writes_and_truncates(self):
        rng = random.Random(42)
        p = os.path.join(self.work, "f")
        model = bytearray()
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)

        def write(off, n):
            data = rng.randbytes(n)
            os.pwrite(fd, data, off)
            if len(model) < off:
                model.extend(bytes(off - len(model)))
            model[off:off + n] = data

        def truncate(n):
            os.ftruncate(fd, n)
            if n < len(model):
                del model[n:]
            else:
                model.extend(bytes(n - len(model)))

        try:
            write(0, 3 * MiB)
            write(MiB, MiB // 2)
            write(MiB + 100, 10)
            write(4 * MiB - 100, 300)            # across a 4 MiB block boundary
            write(2 * MiB + 5, 3 * MiB)          # overlaps end, extends
            truncate(1234567)
            write(5 * MiB, 4096)                 # hole between EOF and write
            truncate(70 * MiB)                   # extend across the chunk boundary
            write(CHUNK - 1000, 5000)            # write across the chunk boundary
            write(66 * MiB, MiB)
            truncate(CHUNK + 10)
            write(CHUNK - 3, 3)
            truncate(MiB)
            truncate(3 * MiB)
            write(2 * MiB, 10)
            self.check(p, model, "same process, file open")
            fd2 = os.open(p, os.O_RDONLY)
            self.assertEqual(os.pread(fd2, 20, 2 * MiB - 5), bytes(model[2 * MiB - 5:2 * MiB + 15]))
            os.close(fd2)
            for i in range(200):
                op = rng.random()
                if op < 0.75:
                    off = rng.randrange(0, len(model) + 2 * MiB)
                    write(off, rng.choice([1, 7, 4096, rng.randrange(1, 2 * MiB)]))
                else:
                    truncate(rng.randrange(0, len(model) + MiB))
                if i % 50 == 49:
                    self.check(p, model, "after %d random ops" % (i + 1))
        finally:
            os.close(fd)
        self.check(p, model, "after close")
        self.vol.remount()
        self.check(p, model, "after remount")

    def test_rewrite_many_times(self):
        # Many slices stacked on the same range: the latest must win.
        p = os.path.join(self.work, "f")
        model = bytearray(2 * MiB)
        with open(p, "wb") as f:
            f.write(model)
        rng = random.Random(3)
        for i in range(300):
            off = rng.randrange(0, 2 * MiB - 1000)
            b = bytes([i % 251 + 1]) * rng.randrange(1, 1000)
            with open(p, "r+b") as f:
                f.seek(off)
                f.write(b)
            model[off:off + len(b)] = b
        self.check(p, model, "after 300 small overwrites")
        self.vol.remount()
        self.check(p, model, "after remount")


class LargeFileTest(harness.TierFSTestCase):
    def test_200mib_sequential_with_random_reads(self):
        p = os.path.join(self.work, "big")
        nblocks = 200
        h = hashlib.sha256()
        with open(p, "wb") as f:
            for i in range(nblocks):
                b = pattern_block("big", i)
                h.update(b)
                f.write(b)
        self.assertEqual(os.path.getsize(p), nblocks * MiB)
        self.assertEqual(harness.file_sha256(p, 4 * MiB), h.hexdigest(), "sequential read differs")
        rng = random.Random(77)
        fd = os.open(p, os.O_RDONLY)
        try:
            for _ in range(200):
                off = rng.randrange(0, nblocks * MiB - 1)
                n = min(rng.choice([1, 100, 4096, 100000, MiB, 3 * MiB]), nblocks * MiB - off)
                got = os.pread(fd, n, off)
                want = bytearray()
                first = off // MiB
                last = (off + n - 1) // MiB
                for blk in range(first, last + 1):
                    want += pattern_block("big", blk)
                want = bytes(want[off - first * MiB:off - first * MiB + n])
                self.assertEqual(len(got), len(want))
                self.assertTrue(got == want, "random read at %d+%d differs" % (off, n))
        finally:
            os.close(fd)


def numbered_block(base, index):
    """base (1 MiB) with the block index written over its first 8 bytes: cheap to make,
    different for every block, so a block read from the wrong place is caught."""
    return index.to_bytes(8, "little") + base[8:]


class Beyond4GiBTest(harness.TierFSTestCase):
    def test_fully_written_file_beyond_4gib(self):
        # Every byte written (no holes): offsets past 2^32 through the whole data path,
        # chunk indexes past 64, and lengths that do not fit 32 bits.
        p = os.path.join(self.work, "big")
        base = random.Random(4).randbytes(MiB)
        nblocks = 4 * 1024 + 70           # 4 GiB + 70 MiB
        tail = b"tail-beyond-4GiB" * 7    # a final partial block
        size = nblocks * MiB + len(tail)
        h = hashlib.sha256()
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            for i in range(nblocks):
                b = numbered_block(base, i)
                h.update(b)
                self.assertEqual(os.write(fd, b), MiB)
            os.write(fd, tail)
            h.update(tail)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.assertEqual(os.stat(p).st_size, size)
        info = self.vol.info_json(p)
        self.assertEqual(info["length"], size)

        def check_spots(path):
            fd = os.open(path, os.O_RDONLY)
            try:
                for off in (4 * GiB - 3, 4 * GiB, 4 * GiB + 5 * MiB + 17, 65 * CHUNK - 1, size - len(tail) - 10):
                    n = 64
                    got = os.pread(fd, n, off)
                    want = b""
                    for blk in range(off // MiB, (off + n - 1) // MiB + 1):
                        want += numbered_block(base, blk) if blk < nblocks else tail
                    start = off - (off // MiB) * MiB
                    self.assertEqual(got, want[start:start + n], "read at %d differs" % off)
                self.assertEqual(os.pread(fd, 200, size - len(tail)), tail)
                self.assertEqual(os.pread(fd, 10, size), b"")
            finally:
                os.close(fd)

        check_spots(p)
        self.vol.remount()
        self.assertEqual(harness.file_sha256(p, 4 * MiB), h.hexdigest(), "the 4 GiB+ file differs after remount")
        check_spots(p)
        # Truncate to just past 4 GiB and extend: the cut-off data reads as zeros.
        os.truncate(p, 4 * GiB + 1)
        os.truncate(p, 4 * GiB + 2 * MiB)
        self.assertEqual(read_range(p, 4 * GiB - 1, 4),
                         numbered_block(base, 4095)[-1:] + numbered_block(base, 4096)[:1] + bytes(2))
        self.assertEqual(read_range(p, 4 * GiB + 1, MiB), bytes(MiB))
        os.unlink(p)


class DirectIOTest(harness.TierFSTestCase):
    """O_DIRECT opens work, move exact bytes, and stay coherent with buffered I/O on the
    same file (the kernel bypasses its page cache for them)."""

    @staticmethod
    def aligned(data):
        buf = mmap.mmap(-1, max(len(data), mmap.PAGESIZE))  # page-aligned memory
        buf[:len(data)] = data
        return buf

    def direct_pwrite(self, fd, data, off):
        buf = self.aligned(data)
        try:
            return os.pwritev(fd, [memoryview(buf)[:len(data)]], off)
        finally:
            buf.close()

    def direct_pread(self, fd, n, off):
        buf = mmap.mmap(-1, max(n, mmap.PAGESIZE))
        try:
            got = os.preadv(fd, [memoryview(buf)[:n]], off)
            return bytes(buf[:got])
        finally:
            buf.close()

    def test_direct_write_and_read(self):
        p = os.path.join(self.work, "direct")
        rng = random.Random(9)
        data = rng.randbytes(3 * MiB)
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
        try:
            self.assertTrue(os.get_blocking(fd))
            # 1 MiB requests, then 4 KiB ones, then one at an offset past a hole.
            for off in range(0, 2 * MiB, MiB):
                self.assertEqual(self.direct_pwrite(fd, data[off:off + MiB], off), MiB)
            for off in range(2 * MiB, 3 * MiB, 4096):
                self.assertEqual(self.direct_pwrite(fd, data[off:off + 4096], off), 4096)
            self.assertEqual(self.direct_pwrite(fd, data[:8192], 5 * MiB), 8192)
            self.assertEqual(os.fstat(fd).st_size, 5 * MiB + 8192)
            self.assertEqual(self.direct_pread(fd, 3 * MiB, 0), data)
            self.assertEqual(self.direct_pread(fd, 2 * MiB, 3 * MiB), bytes(2 * MiB), "hole not zero")
            self.assertEqual(self.direct_pread(fd, 16384, 5 * MiB), data[:8192], "short read at EOF")
        finally:
            os.close(fd)
        # Buffered readers see what O_DIRECT wrote, before and after a remount.
        self.assertEqual(read_range(p, 0, 3 * MiB), data)
        self.vol.remount()
        self.assertEqual(read_range(p, 5 * MiB, 8192), data[:8192])

    def test_direct_and_buffered_are_coherent(self):
        p = os.path.join(self.work, "mixed")
        with open(p, "wb") as f:
            f.write(b"a" * (2 * MiB))
        buffered = os.open(p, os.O_RDWR)
        direct = os.open(p, os.O_RDWR | os.O_DIRECT)
        try:
            self.assertEqual(os.pread(buffered, 4096, 4096), b"a" * 4096)  # now in the page cache
            self.assertEqual(self.direct_pwrite(direct, b"D" * 4096, 4096), 4096)
            self.assertEqual(os.pread(buffered, 4096, 4096), b"D" * 4096, "stale page after a direct write")
            os.pwrite(buffered, b"B" * 4096, MiB)
            self.assertEqual(self.direct_pread(direct, 4096, MiB), b"B" * 4096, "direct read missed a buffered write")
            os.ftruncate(direct, MiB + 4096)
            self.assertEqual(os.fstat(buffered).st_size, MiB + 4096)
            self.assertEqual(self.direct_pread(direct, 8192, MiB), b"B" * 4096)
        finally:
            os.close(buffered)
            os.close(direct)


    def test_mmap_of_a_file_opened_with_o_direct(self):
        # ext4 allows it, and programs that mix both do it; FUSE's own direct-I/O mode
        # refused shared mappings with ENODEV.
        p = os.path.join(self.work, "mapped")
        with open(p, "wb") as f:
            f.write(b"a" * (2 * MiB))
        direct = os.open(p, os.O_RDWR | os.O_DIRECT)
        buffered = os.open(p, os.O_RDWR)
        try:
            with mmap.mmap(direct, 2 * MiB) as m:
                m[4096:8192] = b"M" * 4096
                m.flush()
                self.assertEqual(os.pread(buffered, 4096, 4096), b"M" * 4096, "msync'ed page not read back")
                self.assertEqual(self.direct_pread(direct, 4096, 4096), b"M" * 4096)
                # A direct write drops the mapped page: the mapping sees the new data.
                self.assertEqual(self.direct_pwrite(direct, b"D" * 4096, 4096), 4096)
                self.assertEqual(m[4096:8192], b"D" * 4096, "the mapping kept data older than a direct write")
                os.pwrite(buffered, b"B" * 100, MiB)
                self.assertEqual(m[MiB:MiB + 100], b"B" * 100)
        finally:
            os.close(direct)
            os.close(buffered)
        self.vol.remount()
        self.assertEqual(read_range(p, 4096, 4096), b"D" * 4096)
        self.assertEqual(read_range(p, MiB, 100), b"B" * 100)


class ReadYourWritesTest(harness.TierFSTestCase):
    def test_read_through_other_fd_before_close(self):
        p = os.path.join(self.work, "f")
        w = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        r = os.open(p, os.O_RDONLY)
        try:
            a = os.urandom(5 * MiB + 3)
            os.write(w, a)
            self.assertEqual(os.stat(p).st_size, len(a))
            self.assertEqual(os.fstat(r).st_size, len(a))
            self.assertTrue(read_range(p, 0, len(a) + 10) == a)
            self.assertEqual(os.pread(r, 100, 4 * MiB), a[4 * MiB:4 * MiB + 100])
            os.pwrite(w, b"PATCH", 4 * MiB + 10)
            self.assertEqual(os.pread(r, 5, 4 * MiB + 10), b"PATCH")
            os.pwrite(w, b"APPENDED", len(a))
            self.assertEqual(os.pread(r, 100, len(a)), b"APPENDED")
            # A different process sees it too.
            rd, wr = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(rd)
                    with open(p, "rb") as f:
                        f.seek(4 * MiB + 10)
                        os.write(wr, f.read(5))
                finally:
                    os._exit(0)
            os.close(wr)
            got = os.read(rd, 100)
            os.close(rd)
            os.waitpid(pid, 0)
            self.assertEqual(got, b"PATCH")
        finally:
            os.close(w)
            os.close(r)
        expect = bytearray(a)
        expect[4 * MiB + 10:4 * MiB + 15] = b"PATCH"
        expect += b"APPENDED"
        self.assertTrue(read_range(p, 0, len(expect) + 10) == bytes(expect))
        self.vol.remount()
        self.assertTrue(read_range(p, 0, len(expect) + 10) == bytes(expect))

    def test_truncate_visible_to_open_reader(self):
        p = os.path.join(self.work, "f")
        with open(p, "wb") as f:
            f.write(os.urandom(3 * MiB))
        r = os.open(p, os.O_RDONLY)
        try:
            self.assertEqual(len(os.pread(r, 10, 2 * MiB)), 10)
            os.truncate(p, MiB)
            self.assertEqual(os.pread(r, 10, 2 * MiB), b"")
            self.assertEqual(os.fstat(r).st_size, MiB)
            w = os.open(p, os.O_WRONLY)
            os.pwrite(w, b"x", 2 * MiB)
            self.assertEqual(os.pread(r, 10, 2 * MiB - 5), bytes(5) + b"x")
            os.close(w)
        finally:
            os.close(r)

    def test_append_from_two_descriptors(self):
        p = os.path.join(self.work, "log")
        a = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        b = os.open(p, os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(100):
                os.write(a if i % 2 == 0 else b, b"%04d\n" % i)
        finally:
            os.close(a)
            os.close(b)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"".join(b"%04d\n" % i for i in range(100)))


if __name__ == "__main__":
    harness.main()
