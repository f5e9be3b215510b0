#!/usr/bin/env python3
"""FUSE over io_uring (`mount --io-uring`, issue "Fast paths", item 4) against the same
mount reading /dev/fuse, side by side in one run, with tmpfs and libfuse3's passthrough_ll
over tmpfs as the limits.

    sudo bench/uring.py [--files 2000] [--big-mib 1024] [--runs 3]

Both TierFS targets: the embedded default (SQLite, local bucket on this disk), the disk
cache on tmpfs, `--no-passthrough` (so cached reads go through FUSE, which is what is
compared). Every round, targets interleaved:
  - mdtest-style create, stat and unlink of empty files (the bench kit's mdtest.py), 1
    and 4 processes;
  - a cold read of a --big-mib file (`dd bs=1M`, TierFS remounted with an empty disk
    cache: each READ waits for its block from the bucket), then the same file again with
    every block in the disk cache and the page cache dropped; MiB/s and the daemon's CPU
    seconds per GiB;
  - reading --files files of 64 KiB (in the disk cache, page cache dropped) with `cat`,
    by 1 and by 4 processes.
Median (min-max) over the rounds. Writes the "uring" section of docs/benchmarks.md."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
import harness  # noqa: E402
from doc_section import write_section  # noqa: E402
from fastpaths import MDTEST, PHASES, cell, mdtest  # noqa: E402
from passthrough import cpu_seconds, drop_caches  # noqa: E402
from passthrough_ll import PassthroughLL  # noqa: E402

BEGIN, END = "<!-- BEGIN uring (bench/uring.py) -->", "<!-- END uring (bench/uring.py) -->"
MiB = 1 << 20
DEV, URING, URING1 = "TierFS, /dev/fuse", "TierFS, --io-uring", "TierFS, --io-uring-threads 1"


def drop_page_cache():
    subprocess.run(["sync"])
    drop_caches()


def timed_read(path, pid):
    """dd of a whole file: (MiB/s, daemon CPU s per GiB)."""
    size = os.path.getsize(path)
    c0, t0 = cpu_seconds(pid), time.monotonic()
    subprocess.run(["dd", "if=" + path, "of=/dev/null", "bs=1M"], check=True, capture_output=True)
    dt, dc = time.monotonic() - t0, cpu_seconds(pid) - c0
    return size / MiB / dt, dc / (size / (1 << 30))


def read_files(d, procs):
    """Files per second reading every file of d with cat, by procs processes."""
    names = sorted(os.listdir(d))
    t0 = time.monotonic()
    subprocess.run("cd %s && ls | xargs -P%d -n %d cat > /dev/null" % (d, procs, max(1, len(names) // (procs * 4))),
                   shell=True, check=True)
    return len(names) / (time.monotonic() - t0)


class TierFSTarget:
    def __init__(self, work, name, cache_root, *args):
        self.v = harness.Volume(name.replace(" ", "").replace(",", "").replace("/", ""), base=work)
        self.cache = os.path.join(cache_root, os.path.basename(self.v.dir))
        self.args = ["--no-passthrough", "--cache-dir", self.cache] + list(args)
        self.v.format(trash_days=0)

    def mount(self, empty_cache=False):
        if empty_cache:
            shutil.rmtree(self.cache, ignore_errors=True)
        self.v.mount(*self.args)
        if "--io-uring" in self.args:
            os.stat(self.v.mnt)
            if not harness.wait_for(lambda: "FUSE over io_uring: " in self.v.log_tail(), timeout=10):
                raise SystemExit("--io-uring: the queues did not start:\n" + self.v.log_tail())

    @property
    def root(self):
        return self.v.mnt

    @property
    def pid(self):
        return self.v.pid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    if not os.path.exists(MDTEST):
        raise SystemExit("the bench kit's mdtest.py is not at " + MDTEST)
    if not harness.enable_fuse_uring():
        raise SystemExit("this kernel has no FUSE over io_uring (%s)" % harness.URING_PARAM)
    work = tempfile.mkdtemp(prefix="tierfs-uring-", dir="/var/tmp")
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6G", "tmpfs", tmpfs], check=True)
    src, caches = os.path.join(tmpfs, "ptll-src"), os.path.join(tmpfs, "caches")
    os.makedirs(src)
    os.makedirs(caches)
    ptll, tfs = None, {}
    try:
        ptll = PassthroughLL(src, os.path.join(work, "ptll")).start()
        tfs = {DEV: TierFSTarget(work, DEV, caches), URING: TierFSTarget(work, URING, caches, "--io-uring"),
               URING1: TierFSTarget(work, URING1, caches, "--io-uring", "--io-uring-threads", "1")}
        for t in tfs.values():
            t.mount()
        roots = {"tmpfs": os.path.join(tmpfs, "plain"), "passthrough_ll": ptll.mnt}
        os.makedirs(roots["tmpfs"])
        roots.update({n: t.root for n, t in tfs.items()})
        pids = {"tmpfs": 0, "passthrough_ll": ptll.pid}
        # The data: one big file and a directory of small ones per target.
        big = os.urandom(64 * MiB)
        small = os.urandom(64 << 10)
        for root in roots.values():
            with open(os.path.join(root, "big"), "wb") as f:
                for _ in range(a.big_mib // 64):
                    f.write(big)
            os.makedirs(os.path.join(root, "small"))
            for i in range(a.files):
                with open(os.path.join(root, "small", "f%05d" % i), "wb") as f:
                    f.write(small)
        res = {}
        for r in range(a.runs):
            for procs in (1, 4):
                for t, root in roots.items():
                    d = os.path.join(root, "md-%d-%d" % (r, procs))
                    out = mdtest(d, a.files, procs)
                    for ph in PHASES:
                        res.setdefault((t, "md", procs, ph), []).append(out[ph])
                    shutil.rmtree(d, ignore_errors=True)
                    print("round %d, %d procs, %-20s %s" % (r + 1, procs, t, out), flush=True)
            for n, t in tfs.items():  # cold: every block from the bucket
                t.v.umount()
                t.mount(empty_cache=True)
                drop_page_cache()
                mibs, cpu = timed_read(os.path.join(t.root, "big"), t.pid)
                res.setdefault((n, "cold", "MiB/s"), []).append(mibs)
                res.setdefault((n, "cold", "cpu"), []).append(cpu)
                subprocess.run([harness.tierfs_bin(), "warmup", os.path.join(t.root, "small")], check=True,
                               capture_output=True)
                print("round %d, cold read %-20s %.0f MiB/s, %.2f CPU-s/GiB" % (r + 1, n, mibs, cpu), flush=True)
            for t, root in roots.items():
                pid = tfs[t].pid if t in tfs else pids[t]
                drop_page_cache()
                mibs, cpu = timed_read(os.path.join(root, "big"), pid)
                res.setdefault((t, "cached", "MiB/s"), []).append(mibs)
                res.setdefault((t, "cached", "cpu"), []).append(cpu)
                for procs in (1, 4):
                    drop_page_cache()
                    res.setdefault((t, "small", procs), []).append(read_files(os.path.join(root, "small"), procs))
                print("round %d, cached %-20s %.0f MiB/s, %.2f CPU-s/GiB, small files/s %s" % (
                    r + 1, t, mibs, cpu, [round(res[(t, "small", p)][-1]) for p in (1, 4)]), flush=True)
        write_doc(a, res, list(roots))
    finally:
        for t in tfs.values():
            t.v.cleanup()
        if ptll:
            ptll.stop()
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


def write_doc(a, res, targets):
    lines = [BEGIN, "", "### FUSE over io_uring (bench/uring.py)", "",
             "`sudo bench/uring.py --files %d --big-mib %d --runs %d` on %s (%d cores), %s. TierFS: the embedded "
             "default (SQLite, local bucket on ext4), disk cache on tmpfs, `--no-passthrough`; `--io-uring` is "
             "the same mount taking requests through one io_uring queue per CPU, each served by 2 threads of 8 "
             "entries (the default), or by 1 (`--io-uring-threads 1`, libfuse's model). Median (min-max) "
             "over %d interleaved rounds." % (a.files, a.big_mib, a.runs, os.uname().nodename, os.cpu_count(),
                                              os.uname().release, a.runs), "",
             "mdtest-style operations per second on empty files (the bench kit's mdtest.py):", "",
             "| target | procs | " + " | ".join("%s/s" % ph for ph in PHASES) + " |", "|---|---|" + "---|" * len(PHASES)]
    for procs in (1, 4):
        for t in targets:
            lines.append("| %s | %d | " % (t, procs) + " | ".join(cell(res[(t, "md", procs, ph)]) for ph in PHASES)
                         + " |")
    lines += ["", "Reads (`dd bs=1M` of a %d MiB file, page cache dropped; `cat` of %d files of 64 KiB by 1 and 4 "
              "processes); cold: TierFS remounted with an empty disk cache, every block from the bucket; cached: "
              "every block in the disk cache. CPU: the FUSE daemon's seconds per GiB read." % (a.big_mib, a.files), "",
              "| target | cold MiB/s | cold CPU s/GiB | cached MiB/s | cached CPU s/GiB | small files/s, 1 proc | "
              "small files/s, 4 procs |", "|---|---|---|---|---|---|---|"]
    for t in targets:
        cold = (cell(res[(t, "cold", "MiB/s")]), cell(res[(t, "cold", "cpu")], "%.2f")) if (t, "cold", "cpu") in res \
            else ("-", "-")
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            t, cold[0], cold[1], cell(res[(t, "cached", "MiB/s")]), cell(res[(t, "cached", "cpu")], "%.2f"),
            cell(res[(t, "small", 1)]), cell(res[(t, "small", 4)])))
    lines += ["", END]
    write_section(a.doc, BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
