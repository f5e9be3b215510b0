"""Seeded randomized differential test: the same random operations applied to a TierFS
mount and to a local directory must give the same results (return values, errno) and the
same trees, before and after a remount.

Reproduce a failure with SEED=<printed seed> python3 tests/test_differential.py.
Env OPS overrides the number of operations (default 3000).
"""

import errno
import os
import random
import stat
import sys

import harness

MiB = 1 << 20
NAMES = ["a", "b", "c", "d", "e", "f", "g", "h"]
MAX_DEPTH = 3


class Differential:
    def __init__(self, root_a, root_b, rng, log):
        self.roots = (root_a, root_b)
        self.rng = rng
        self.log = log
        self.fds = []   # [(fd_a, fd_b, rel)]

    # ---- choosing paths (from the reference tree) ----

    def entries(self):
        ref = self.roots[1]
        out = []
        for dirpath, dirnames, filenames in os.walk(ref):
            for n in dirnames + filenames:
                out.append(os.path.relpath(os.path.join(dirpath, n), ref))
        return out

    def dirs(self):
        ref = self.roots[1]
        return [""] + [e for e in self.entries() if os.path.isdir(os.path.join(ref, e))
                       and not os.path.islink(os.path.join(ref, e))]

    def files(self):
        ref = self.roots[1]
        return [e for e in self.entries() if stat.S_ISREG(os.lstat(os.path.join(ref, e)).st_mode)]

    def new_path(self):
        d = self.rng.choice(self.dirs())
        if d.count(os.sep) >= MAX_DEPTH - 1:
            d = ""
        return os.path.join(d, self.rng.choice(NAMES))

    def any_path(self):
        ents = self.entries()
        if ents and self.rng.random() < 0.7:
            return self.rng.choice(ents)
        return self.new_path()

    def some_file(self):
        fs = self.files()
        if fs and self.rng.random() < 0.9:
            return self.rng.choice(fs)
        return self.new_path()

    # ---- applying an operation to both trees ----

    def both(self, desc, fn):
        """Runs fn(root) on both trees; results and errnos must match."""
        results = []
        for root in self.roots:
            try:
                results.append(("ok", fn(root)))
            except OSError as e:
                results.append(("err", errno.errorcode.get(e.errno, e.errno)))
        self.log.append("%s -> %s" % (desc, results[1]))
        if results[0] != results[1]:
            raise AssertionError("operation %r differs: tierfs=%r local=%r" % (desc, results[0], results[1]))

    def step(self):
        r = self.rng.random()
        rng = self.rng
        if r < 0.28:
            rel = self.some_file()
            size = self.size_of(rel)
            roll = rng.random()
            if roll < 0.6:
                off = rng.randrange(0, size + 1)
            elif roll < 0.99:
                off = size + rng.randrange(0, 2 * MiB)
            else:
                off = 64 * MiB - rng.randrange(1, 300000)       # across the chunk boundary
            n = rng.choice([1, 100, 4096, rng.randrange(1, 300000), rng.randrange(MiB, 3 * MiB)])
            data = rng.randbytes(n)

            def write(root):
                fd = os.open(os.path.join(root, rel), os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    return os.pwrite(fd, data, off)
                finally:
                    os.close(fd)
            self.both("write %s off=%d len=%d" % (rel, off, n), write)
        elif r < 0.34:
            # Replace the whole content the way editors and "open(path, 'w')" do.
            rel = self.some_file()
            data = rng.randbytes(rng.choice([0, 10, 5000, rng.randrange(1, 2 * MiB)]))

            def rewrite(root):
                fd = os.open(os.path.join(root, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    return os.write(fd, data)
                finally:
                    os.close(fd)
            self.both("rewrite %s len=%d" % (rel, len(data)), rewrite)
        elif r < 0.40:
            rel = self.some_file()
            size = self.size_of(rel)
            n = rng.choice([0, rng.randrange(0, size + 1), size + rng.randrange(0, 3 * MiB)])
            self.both("truncate %s %d" % (rel, n), lambda root: os.truncate(os.path.join(root, rel), n))
        elif r < 0.52:
            src, dst = self.any_path(), self.any_path()
            self.both("rename %s %s" % (src, dst),
                      lambda root: os.rename(os.path.join(root, src), os.path.join(root, dst)))
        elif r < 0.59:
            src, dst = self.some_file(), self.new_path()
            self.both("link %s %s" % (src, dst),
                      lambda root: os.link(os.path.join(root, src), os.path.join(root, dst)))
        elif r < 0.66:
            rel = self.any_path()
            self.both("unlink %s" % rel, lambda root: os.unlink(os.path.join(root, rel)))
        elif r < 0.74:
            rel = self.new_path()
            self.both("mkdir %s" % rel, lambda root: os.mkdir(os.path.join(root, rel)))
        elif r < 0.80:
            rel = self.rng.choice(self.dirs()[1:] or [self.new_path()])
            self.both("rmdir %s" % rel, lambda root: os.rmdir(os.path.join(root, rel)))
        elif r < 0.84:
            rel, target = self.new_path(), rng.choice(NAMES + ["x/y"])   # never leaves the tree
            self.both("symlink %s -> %s" % (rel, target), lambda root: os.symlink(target, os.path.join(root, rel)))
        elif r < 0.87:
            rel, mode = self.any_path(), rng.choice([0o600, 0o644, 0o755, 0o700, 0o640])

            def chmod(root):
                p = os.path.join(root, rel)
                if not os.path.islink(p):   # chmod would follow the link
                    os.chmod(p, mode)
            self.both("chmod %s %o" % (rel, mode), chmod)
        elif r < 0.91:
            self.op_open_fd()
        elif r < 0.96:
            self.op_fd_io()
        else:
            self.op_close_fd()

    def size_of(self, rel):
        try:
            st = os.lstat(os.path.join(self.roots[1], rel))
            return st.st_size if stat.S_ISREG(st.st_mode) else 0
        except OSError:
            return 0

    def op_open_fd(self):
        if len(self.fds) >= 4:
            return self.op_close_fd()
        rel = self.some_file()
        fds = []
        for root in self.roots:
            try:
                fds.append(os.open(os.path.join(root, rel), os.O_RDWR))
            except OSError as e:
                fds.append(("err", errno.errorcode.get(e.errno)))
        self.log.append("open %s -> %s" % (rel, fds))
        ok = [isinstance(f, int) for f in fds]
        if ok[0] != ok[1] or (not ok[0] and fds[0] != fds[1]):
            for f in fds:
                if isinstance(f, int):
                    os.close(f)
            raise AssertionError("open %s differs: %r" % (rel, fds))
        if ok[0]:
            self.fds.append((fds[0], fds[1], rel))

    def op_fd_io(self):
        if not self.fds:
            return self.op_open_fd()
        fa, fb, rel = self.rng.choice(self.fds)
        size = os.fstat(fb).st_size
        if self.rng.random() < 0.5:
            off = self.rng.randrange(0, size + MiB)
            data = self.rng.randbytes(self.rng.choice([1, 5000, 200000]))
            ra, rb = os.pwrite(fa, data, off), os.pwrite(fb, data, off)
            self.log.append("fd-write %s off=%d len=%d" % (rel, off, len(data)))
            if ra != rb:
                raise AssertionError("fd write differs %r %r" % (ra, rb))
        else:
            off = self.rng.randrange(0, size + 10)
            n = self.rng.choice([10, 4096, 500000])
            ra, rb = os.pread(fa, n, off), os.pread(fb, n, off)
            self.log.append("fd-read %s off=%d len=%d -> %d bytes" % (rel, off, n, len(rb)))
            if ra != rb:
                raise AssertionError("read through open fd of %s at %d+%d differs (tierfs %d bytes, local %d bytes)"
                                     % (rel, off, n, len(ra), len(rb)))
            sa, sb = os.fstat(fa), os.fstat(fb)
            if (sa.st_size, sa.st_nlink) != (sb.st_size, sb.st_nlink):
                raise AssertionError("fstat of open %s differs: size/nlink %r vs %r"
                                     % (rel, (sa.st_size, sa.st_nlink), (sb.st_size, sb.st_nlink)))

    def op_close_fd(self):
        if not self.fds:
            return
        i = self.rng.randrange(len(self.fds))
        fa, fb, rel = self.fds.pop(i)
        os.close(fa)
        os.close(fb)
        self.log.append("close %s" % rel)

    def close_all(self):
        while self.fds:
            fa, fb, _ = self.fds.pop()
            os.close(fa)
            os.close(fb)


def dir_nlink_convention(root):
    """True if the local file system counts subdirectories in a directory's link count."""
    d = os.path.join(root, ".probe")
    os.mkdir(d)
    os.mkdir(os.path.join(d, "s"))
    ok = os.stat(d).st_nlink == 3
    os.rmdir(os.path.join(d, "s"))
    os.rmdir(d)
    return ok


def compare(testcase, a, b, check_dir_nlink, what):
    diffs = harness.compare_trees(a, b, mtime=False, owner=True)
    for dirpath, dirnames, filenames in os.walk(b):
        for n in dirnames + filenames:
            pb = os.path.join(dirpath, n)
            pa = os.path.join(a, os.path.relpath(pb, b))
            try:
                sa, sb = os.lstat(pa), os.lstat(pb)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(sb.st_mode) and sa.st_nlink != sb.st_nlink:
                diffs.append("%s: nlink %d != %d" % (os.path.relpath(pb, b), sa.st_nlink, sb.st_nlink))
            if stat.S_ISDIR(sb.st_mode) and check_dir_nlink and sa.st_nlink != sb.st_nlink:
                diffs.append("%s: dir nlink %d != %d" % (os.path.relpath(pb, b), sa.st_nlink, sb.st_nlink))
    testcase.assertEqual(diffs[:30], [], "%s: trees differ (%d differences)" % (what, len(diffs)))


class DifferentialTest(harness.TierFSTestCase):
    BLOCK_SIZE = "1M"

    def test_random_operations(self):
        seed = int(os.environ.get("SEED") or int.from_bytes(os.urandom(4), "little"))
        nops = int(os.environ.get("OPS") or 3000)
        sys.stderr.write("\ntest_differential: SEED=%d OPS=%d\n" % (seed, nops))
        rng = random.Random(seed)
        local = self.local_tmpdir()
        check_dir_nlink = dir_nlink_convention(local)
        log = []
        diff = Differential(self.work, local, rng, log)
        try:
            for i in range(nops):
                diff.step()
                if i % 500 == 499:
                    compare(self, self.work, local, check_dir_nlink, "after %d ops (SEED=%d)" % (i + 1, seed))
            diff.close_all()
            compare(self, self.work, local, check_dir_nlink, "after all ops (SEED=%d)" % seed)
            self.vol.remount()
            compare(self, self.work, local, check_dir_nlink, "after remount (SEED=%d)" % seed)
        except AssertionError as e:
            raise AssertionError("%s\nSEED=%d; last operations:\n  %s" % (e, seed, "\n  ".join(log[-40:])))
        finally:
            try:
                diff.close_all()
            except OSError:
                pass


if __name__ == "__main__":
    harness.main()
