#!/usr/bin/env python3
"""`import numpy` and `import torch` from a volume after a remount with its cache kept
(issue "Fast paths", item 1's import goal), side by side in one run.

    sudo bench/imports.py [--runs 5]

Debian's numpy and torch packages (python3-numpy, python3-torch) are copied with their
compiled .pyc files into each target (torch's shared libraries stay the system's, as the
package links them), and Python runs with PYTHONPATH at the copy, so
every import looks in the volume first (the module search a virtualenv makes). Targets:
  - libfuse3's passthrough_ll over tmpfs (the cost of FUSE itself), restarted each round;
  - TierFS on the embedded default (SQLite, local bucket);
  - TierFS on Redis (a throwaway redis-server on loopback, local bucket), with the default
    1 s kernel caches, and with 60 s caches (the watch drops what others change);
each TierFS mount with its disk cache on tmpfs, unmounted and mounted again each round.
Before each timed import the page cache is dropped and the system's own files are read
again by importing the system's torch, so the time is the volume's. Median (min-max) over
the rounds, targets interleaved; for TierFS also the FUSE requests and metadata
transactions one import made. Writes the "imports" section of docs/benchmarks.md."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
import harness  # noqa: E402
import servers  # noqa: E402
from doc_section import write_section  # noqa: E402
from passthrough_ll import PassthroughLL  # noqa: E402

BEGIN, END = "<!-- BEGIN imports (bench/imports.py) -->", "<!-- END imports (bench/imports.py) -->"
PY = "/usr/bin/python3"
DIST = "/usr/lib/python3/dist-packages"
MODULES = ("numpy", "torch")
LONG = ["--attr-cache", "60", "--entry-cache", "60", "--dir-entry-cache", "60"]


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    # The system's own libraries and modules (outside the volume), read again.
    subprocess.run([PY, "-c", "import torch"], check=True, env={"PATH": os.environ["PATH"]})


def absolute_links(site):
    """Debian's packages link torch/lib/*.so to the system's copies with relative paths,
    which break in the copy: they point at the same system files again, absolutely."""
    for root, _, files in os.walk(site):
        for f in files:
            p = os.path.join(root, f)
            if os.path.islink(p) and not os.path.isabs(os.readlink(p)):
                orig = os.path.join(DIST, os.path.relpath(root, site))
                target = os.path.realpath(os.path.join(orig, os.readlink(p)))
                os.unlink(p)
                os.symlink(target, p)


def timed_import(site, module):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import %s as m; assert m.__file__.startswith(%r), m.__file__" % (module, site)
    t = time.monotonic()
    subprocess.run([PY, "-c", code], check=True, env=env)
    return time.monotonic() - t


def counters(mnt):
    m = json.loads(os.getxattr(mnt, "tierfs.stats"))["metrics"]
    out = {"txns": 0, "requests": 0}
    for k, v in m.items():
        if k.startswith("tierfs_meta_txn_duration_seconds_count"):
            out["txns"] += v
        elif k.startswith("tierfs_fuse_op_duration_seconds_count"):
            out["requests"] += v
            op = k.split('op="', 1)[1].split('"', 1)[0]
            out[op] = out.get(op, 0) + v
    return out


def cell(xs, fmt="%.2f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs)) if xs else "-"


class TierFSTarget:
    def __init__(self, name, work, tmpfs, meta_url, extra):
        self.name, self.extra = name, list(extra)
        self.vol = harness.Volume("imp", base=work, meta_url=meta_url)
        self.cache = os.path.join(tmpfs, "cache-%d" % abs(hash(name)))
        self.vol.format()
        self.mount()
        self.site = os.path.join(self.vol.mnt, "site")

    def mount(self):
        self.vol.mount("--cache-dir", self.cache, *self.extra)

    def remount(self):
        self.vol.umount()
        self.mount()

    def stop(self):
        self.vol.cleanup()


class PtllTarget:
    def __init__(self, work, tmpfs):
        self.name = "passthrough_ll over tmpfs"
        self.src = os.path.join(tmpfs, "ptll-src")
        os.makedirs(self.src)
        self.p = PassthroughLL(self.src, os.path.join(work, "ptll")).start()
        self.site = os.path.join(self.p.mnt, "site")

    def remount(self):
        self.p.stop()
        self.p.start()

    def stop(self):
        self.p.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tierfs-imports-", dir="/var/tmp")
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4G", "tmpfs", tmpfs], check=True)
    redis = servers.Redis(os.path.join(work, "srv"), port=servers.REDIS_PORT + 740).start()
    targets = []
    try:
        targets.append(PtllTarget(work, tmpfs))
        targets.append(TierFSTarget("TierFS SQLite", work, tmpfs, None, []))
        targets.append(TierFSTarget("TierFS Redis", work, tmpfs, redis.url() + "/1", []))
        targets.append(TierFSTarget("TierFS Redis, 60 s caches", work, tmpfs, redis.url() + "/2", LONG))
        for t in targets:
            os.makedirs(t.site)
            for m in MODULES:
                subprocess.run(["cp", "-a", os.path.join(DIST, m), t.site], check=True)
            absolute_links(t.site)
            timed_import(t.site, "torch")  # reads everything once: the disk cache holds it
        times, calls = {}, {}
        for r in range(a.runs):
            for m in MODULES:
                for t in (targets if r % 2 == 0 else list(reversed(targets))):
                    t.remount()
                    drop_caches()
                    before = counters(t.vol.mnt) if isinstance(t, TierFSTarget) else None
                    s = timed_import(t.site, m)
                    times.setdefault((t.name, m), []).append(s)
                    if before is not None:
                        after = counters(t.vol.mnt)
                        calls.setdefault((t.name, m), []).append({k: after.get(k, 0) - before.get(k, 0)
                                                                  for k in after})
                    print("round %d %-6s %-28s %.2f s" % (r + 1, m, t.name, s), flush=True)
        write_doc(a, targets, times, calls)
    finally:
        for t in targets:
            t.stop()
        redis.stop()
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


def write_doc(a, targets, times, calls):
    ref = "passthrough_ll over tmpfs"
    rows = ["| target | import numpy (s) | vs passthrough_ll | import torch (s) | vs passthrough_ll |"
            " FUSE requests (torch) | lookups | opens | metadata transactions |",
            "|---|---|---|---|---|---|---|---|---|"]
    for t in targets:
        cells = []
        for m in MODULES:
            xs = times[(t.name, m)]
            cells += [cell(xs), "%.2fx" % (statistics.median(xs) / statistics.median(times[(ref, m)]))]
        c = calls.get((t.name, "torch"))
        if c:
            mid = lambda k: "%.0f" % statistics.median([x.get(k, 0) for x in c])  # noqa: E731
            cells += [mid("requests"), mid("lookup"), mid("open"), mid("txns")]
        else:
            cells += ["", "", "", ""]
        rows.append("| %s | %s |" % (t.name, " | ".join(cells)))
    cmd = "sudo bench/imports.py " + " ".join(sys.argv[1:])
    section = "\n".join([
        BEGIN, "## Imports from a volume after a remount", "",
        "`%s` (%s, %d cores, kernel %s). Debian's numpy and torch with their .pyc files in each target, "
        "PYTHONPATH at the copy; each round the target is mounted again (TierFS keeps its disk cache, on tmpfs) "
        "and the page cache dropped; seconds, median (min-max) of %d rounds, targets interleaved. "
        "The goal (issue \"Fast paths\"): imports from a Redis volume after a remount within 1.1x of "
        "passthrough_ll." % (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(), os.uname().release, a.runs), ""]
        + rows + ["", END])
    write_section(a.doc, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    sys.exit(main())
