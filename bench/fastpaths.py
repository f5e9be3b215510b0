#!/usr/bin/env python3
"""Where TierFS stands on the metadata and developer-workload goals of issue "Fast paths"
(item 1 and the tar/git goals), side by side in one run.

    sudo bench/fastpaths.py [--files 3000] [--runs 3]

mdtest-style create, stat and unlink (the bench kit's mdtest.py, empty files, one
directory per worker) with 1 and 4 processes, on:
  - tmpfs, and libfuse3's passthrough_ll over that tmpfs (the cost of FUSE itself);
  - TierFS on the embedded default (SQLite, local bucket) and on Redis (a throwaway
    redis-server on loopback, local bucket), each with the trash off and on.
And, on the embedded default next to ext4 on the same disk: `tar -x` of /usr/include (a
source tree of ~17,000 files; timed to its exit, and until a `sync` after it returns, each
target starting after a sync and a drop of the page cache) and `git clone --no-local` of a
repository of ~24,000 objects (libfuse's, when a copy is at $FASTPATHS_REPO). Targets
interleaved in every round;
median (min-max) over the rounds. Writes the "fastpaths" section of docs/benchmarks.md."""
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

BEGIN, END = "<!-- BEGIN fastpaths (bench/fastpaths.py) -->", "<!-- END fastpaths (bench/fastpaths.py) -->"
MDTEST = os.path.join(os.path.dirname(REPO), "shared", "bench-kit", "mdtest.py")
PHASES = ("create", "stat", "unlink")


def mdtest(path, files, procs):
    args = [sys.executable, MDTEST, path, "-n", str(files), "-t", str(procs), "--phases", ",".join(PHASES)]
    if procs > 1:
        args.append("--procs")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    line = [x for x in out.splitlines() if x.startswith("RESULT_JSON")][-1]
    return json.loads(line.split(" ", 1)[1])


def timed(cmd, cwd=None):
    t = time.monotonic()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - t


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def cell(xs, fmt="%.0f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (med(xs), min(xs), max(xs)) if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    if not os.path.exists(MDTEST):
        raise SystemExit("the bench kit's mdtest.py is not at " + MDTEST)
    git_src = os.environ.get("FASTPATHS_REPO", "")
    work = tempfile.mkdtemp(prefix="tierfs-fastpaths-", dir="/var/tmp")  # ext4 here, as the volumes' disk
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2G", "tmpfs", tmpfs], check=True)
    ptll_mnt = os.path.join(work, "ptll")
    redis = servers.Redis(os.path.join(work, "srv"), port=servers.REDIS_PORT + 730).start()
    ptll, vols = None, {}
    try:
        ptll = PassthroughLL(tmpfs, ptll_mnt).start()
        for engine in ("sqlite", "redis"):
            for trash in (0, 1):
                name = "TierFS %s, trash %s" % ("SQLite" if engine == "sqlite" else "Redis", "on" if trash else "off")
                url = None if engine == "sqlite" else redis.url() + "/%d" % (len(vols) + 1)
                v = harness.Volume("fp", base=work, meta_url=url)
                v.format(trash_days=trash)
                v.mount()
                vols[name] = v
        md_targets = {"tmpfs": tmpfs, "passthrough_ll": ptll_mnt}
        md_targets.update({n: v.mnt for n, v in vols.items()})
        md = {}
        ext4 = os.path.join(work, "ext4")
        os.makedirs(ext4)
        tarball = os.path.join(work, "include.tar")
        subprocess.run(["tar", "-cf", tarball, "-C", "/usr", "include"], check=True)
        dev = {}
        default = vols["TierFS SQLite, trash on"]
        for r in range(a.runs):
            for procs in (1, 4):
                for t, root in md_targets.items():
                    d = os.path.join(root, "md-%d-%d" % (r, procs))
                    res = mdtest(d, a.files, procs)
                    for ph in PHASES:
                        md.setdefault((t, procs, ph), []).append(res[ph])
                    shutil.rmtree(d, ignore_errors=True)
                    print("round %d, %d procs, %-26s %s" % (r + 1, procs, t, res), flush=True)
            for t, root in (("ext4", ext4), ("TierFS (embedded default)", default.mnt)):
                d = os.path.join(root, "tar-%d" % r)
                os.makedirs(d)
                # Each target starts from a clean disk: earlier rounds' dirty data (mdtest's,
                # the other target's) otherwise lands during some runs and not others (ext4's
                # tar -x varied from 0.3 to 7 s).
                subprocess.run(["sync"])
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                t0 = time.monotonic()
                dev.setdefault((t, "tar -x"), []).append(timed(["tar", "-xf", tarball, "-C", d]))
                # Until the data is on disk: ext4 writes it back now; TierFS wrote it at each close.
                subprocess.run(["sync"])
                dev.setdefault((t, "tar -x, then sync"), []).append(time.monotonic() - t0)
                if git_src:
                    dev.setdefault((t, "git clone"), []).append(
                        timed(["git", "clone", "-q", "--no-local", git_src, os.path.join(root, "git-%d" % r)]))
                subprocess.run(["sync"])
                print("round %d %-26s %s" % (r + 1, t, {k[1]: v[-1] for k, v in dev.items() if k[0] == t}),
                      flush=True)
                shutil.rmtree(d, ignore_errors=True)
                shutil.rmtree(os.path.join(root, "git-%d" % r), ignore_errors=True)
        write_doc(a, md, md_targets, dev, bool(git_src))
    finally:
        for v in vols.values():
            v.cleanup()
        if ptll:
            ptll.stop()
        redis.stop()
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


def write_doc(a, md, md_targets, dev, with_git):
    lines = [BEGIN, "", "### Metadata operations and developer workloads (bench/fastpaths.py)", "",
             "`sudo bench/fastpaths.py --files %d --runs %d` on %s (%d cores), %s; TierFS with a local bucket on ext4, "
             "Redis on loopback. mdtest-style operations per second on empty files (the bench kit's mdtest.py, one "
             "directory per worker), median (min-max) over %d interleaved rounds, and the ratio to passthrough_ll "
             "(libfuse3's example over tmpfs)." % (a.files, a.runs, os.uname().nodename, os.cpu_count(),
                                                  os.uname().release, a.runs), ""]
    for procs in (1, 4):
        lines += ["%d process%s:" % (procs, "" if procs == 1 else "es"), "",
                  "| target | " + " | ".join("%s/s | / ptll" % ph for ph in PHASES) + " |",
                  "|---|" + "---|---|" * len(PHASES)]
        for t in md_targets:
            row = "| %s |" % t
            for ph in PHASES:
                xs, base = md[(t, procs, ph)], med(md[("passthrough_ll", procs, ph)])
                row += " %s | %.2fx |" % (cell(xs), med(xs) / base)
            lines.append(row)
        lines.append("")
    lines += ["On the embedded default (SQLite, local bucket, trash on) next to ext4 on the same disk, seconds "
              "(tar -x of /usr/include: %s, each target after a sync and a drop of the page cache; \"then sync\": "
              "until `sync` returns, i.e. the data on disk)%s:" % ("a tarball of ~17,000 files", ", git clone --no-local of "
                                                  "libfuse (~24,000 objects)" if with_git else ""), "",
              "| workload | ext4 s | TierFS s | TierFS / ext4 |", "|---|---|---|---|"]
    for w in ("tar -x", "tar -x, then sync", "git clone"):
        if ("ext4", w) not in dev:
            continue
        e, t = dev[("ext4", w)], dev[("TierFS (embedded default)", w)]
        lines.append("| %s | %s | %s | %.1fx |" % (w, cell(e, "%.2f"), cell(t, "%.2f"), med(t) / med(e)))
    lines += ["", END]
    write_section(a.doc, BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
