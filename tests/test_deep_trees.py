"""Commands that walk trees (`tierfs warmup`, `compact`, `summary`, `clone`, `rmr`) on a
directory chain 10,000 levels deep, made with mkdirat relative to a descriptor (its full
path is about 20,000 bytes, far past PATH_MAX): each succeeds with bounded memory (its
peak resident size is watched and the command killed past 1 GiB) and finds every file.
"""

import os
import sys
import threading
import time

import harness
from harness import msg

DEPTH = 10000
RSS_LIMIT = 1 << 30  # killed past this: the old walkers grew to gigabytes


def make_chain(top, depth, files_every=1000):
    """top/d/d/.../d (depth levels) with a file at every files_every-th level and at the
    bottom; returns the number of files. Never builds a long path."""
    os.mkdir(top)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    n = 0
    try:
        for level in range(1, depth + 1):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            if level % files_every == 0 or level == depth:
                wfd = os.open("file", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(wfd, os.urandom(70000))
                os.close(wfd)
                n += 1
    finally:
        os.close(fd)
    return n


def run_watched(*args, timeout=900):
    """Runs tierfs with args, polling its resident size; returns (rc, out, err, peak_rss)
    and kills it past RSS_LIMIT."""
    import subprocess
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([harness.tierfs_bin()] + list(args), stdout=out, stderr=err)
        peak = 0
        killed = False
        t0 = time.monotonic()
        while p.poll() is None:
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            peak = max(peak, int(line.split()[1]) * 1024)
            except OSError:
                pass
            if peak > RSS_LIMIT and not killed:
                p.kill()
                killed = True
            if time.monotonic() - t0 > timeout:
                p.kill()
                raise AssertionError("tierfs %s timed out" % " ".join(args))
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        text_out = out.read().decode(errors="replace")
        text_err = err.read().decode(errors="replace") + ("\n(killed at %d bytes resident)" % peak if killed else "")
        return p.returncode, text_out, text_err, peak


class DeepTreeTest(harness.TierFSTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        t0 = time.monotonic()
        cls.top = os.path.join(cls.vol.mnt, "chain")
        cls.nfiles = make_chain(cls.top, DEPTH)
        sys.stderr.write("made a %d-deep chain with %d files in %.1f s\n" % (DEPTH, cls.nfiles, time.monotonic() - t0))

    def check(self, what, res, limit=256 << 20):
        rc, out, err, peak = res
        sys.stderr.write("tierfs %s: rc %d, peak RSS %.1f MiB\n" % (what, rc, peak / (1 << 20)))
        self.assertEqual(rc, 0, "%s\n%s" % (what, msg(rc, out, err)))
        self.assertLess(peak, limit, "tierfs %s used %d MiB" % (what, peak >> 20))
        return out

    def test_warmup_walks_the_whole_chain(self):
        out = self.check("warmup", run_watched("warmup", "--json", self.top))
        import json
        j = json.loads(out)
        self.assertEqual(j["files"], self.nfiles)
        self.assertEqual(j["failed"], 0)
        out = self.check("warmup --check", run_watched("warmup", "--check", "--json", self.top))
        self.assertEqual(json.loads(out)["cached_bytes"], json.loads(out)["bytes"])

    def test_compact_walks_the_whole_chain(self):
        import json
        out = self.check("compact", run_watched("compact", "--json", self.top))
        self.assertEqual(json.loads(out)["files"], self.nfiles)

    def test_summary_clone_and_rmr_of_the_chain(self):
        import json
        out = self.check("summary", run_watched("summary", "--json", self.top))
        j = json.loads(out)
        self.assertEqual(j["files"], self.nfiles, out)
        copy = os.path.join(self.vol.mnt, "chain-copy")
        self.check("clone", run_watched("clone", self.top, copy))
        out = self.check("summary of the clone", run_watched("summary", "--json", copy))
        self.assertEqual(json.loads(out)["files"], self.nfiles, out)
        self.check("rmr", run_watched("rmr", copy))
        self.assertFalse(os.path.exists(copy))


if __name__ == "__main__":
    harness.main()
