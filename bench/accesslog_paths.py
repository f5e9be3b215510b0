#!/usr/bin/env python3
"""What the access log costs a data loader in a large directory: list a directory of DIRFILES
small files, then open and read READFILES of them, with `MOUNTPOINT/.accesslog` being read.

    PREV_TIERFS=/path/to/tierfs-before-name-hints bench/accesslog_paths.py
    DIRFILES=20000 READFILES=3000 ROUNDS=5 bench/accesslog_paths.py

Each request's log line names its path. Before name hints, a file's path was found by
scanning its directory's entries (once per second per inode); now the names this mount gave
the kernel (lookups, readdirplus) are remembered and checked with one read.

One SQLite volume with a local bucket, its files written once. Configurations, each a fresh
mount (`--cache-dir memory`, so the kernel knows nothing yet), interleaved within a round and
reversed every other round:

    nolog   this tierfs, nobody reading .accesslog (the reference)
    log     this tierfs, `cat .accesslog > /dev/null` running
    prev    PREV_TIERFS (when given), the same with the log read

Reports files/s, median (min–max), and writes the section between
<!-- bench:accesslog:begin --> and <!-- bench:accesslog:end --> of docs/benchmarks.md.
Needs root. Environment: DIRFILES READFILES ROUNDS TIERFS PREV_TIERFS PREV_COMMIT BENCH_DOC BENCH_WORK.
"""

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from doc_section import write_section

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRFILES = int(os.environ.get("DIRFILES") or 20000)
READFILES = int(os.environ.get("READFILES") or 3000)
ROUNDS = int(os.environ.get("ROUNDS") or 3)
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
PREV = os.environ.get("PREV_TIERFS")
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:accesslog:begin -->", "<!-- bench:accesslog:end -->"
CONFIGS = ["nolog", "log"] + (["prev"] if PREV else [])
LABELS = {"nolog": "no access log reader", "log": ".accesslog read (name hints)",
          "prev": ".accesslog read, PREV_TIERFS (directory scans)"}


def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="tierfs-accesslog-", dir=os.environ.get("BENCH_WORK"))
    mnt, db = os.path.join(work, "mnt"), os.path.join(work, "meta.db")
    url = "sqlite3://" + db
    os.makedirs(mnt)
    results = {}

    def mount(binary):
        sh(binary, "mount", url, mnt, "-d", "--cache-dir", "memory", "--metrics", "0",
           "--log", os.path.join(work, "client.log"))

    try:
        sh(TIERFS, "format", url, "alog", "--storage", "file", "--bucket", os.path.join(work, "bucket"),
           "--trash-days", "0")
        mount(TIERFS)
        d = os.path.join(mnt, "dataset")
        os.mkdir(d)
        for i in range(DIRFILES):
            with open(os.path.join(d, "s%07d" % i), "wb") as f:
                f.write(b"%07d" % i)
        sh("umount", mnt)
        start = DIRFILES // 2 - READFILES // 2
        for r in range(ROUNDS):
            for config in (CONFIGS if r % 2 == 0 else list(reversed(CONFIGS))):
                mount(PREV if config == "prev" else TIERFS)
                reader = None
                try:
                    if config != "nolog":
                        reader = subprocess.Popen(["sh", "-c", "exec cat %s/.accesslog > /dev/null" % mnt])
                        time.sleep(0.3)
                    t0 = time.monotonic()
                    names = sorted(os.listdir(d))
                    for n in names[start:start + READFILES]:
                        with open(os.path.join(d, n), "rb") as f:
                            f.read()
                    rate = READFILES / (time.monotonic() - t0)
                finally:
                    if reader:
                        reader.kill()
                        reader.wait()
                    subprocess.run(["umount", mnt], capture_output=True)
                results.setdefault(config, []).append(rate)
                print("[accesslog_paths.py] round %d %-5s: %7.0f files/s" % (r + 1, config, rate), flush=True)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    def cell(xs):
        return "%.0f (%.0f–%.0f)" % (statistics.median(xs), min(xs), max(xs))

    ref = statistics.median(results["nolog"])
    # A binary is named by the commit it was built from, not by where it lies on this machine.
    env = " ".join("%s=%s" % (k, "/path/to/tierfs-" + os.environ.get("PREV_COMMIT", "old") if k == "PREV_TIERFS" else os.environ[k])
                   for k in ("DIRFILES", "READFILES", "ROUNDS", "PREV_TIERFS") if k in os.environ)
    lines = [BEGIN, "## Access log in a large directory", "",
             "Generated by `bench/accesslog_paths.py` (see the script's header); do not edit by hand, rerun the script.",
             "", "- Command: `%sbench/accesslog_paths.py`" % (env + " " if env else ""),
             "- Date: %s; %d cores (shared machine); %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                           os.cpu_count(), os.uname().release),
             "- SQLite, local bucket, `--cache-dir memory`, a fresh mount per run: list a directory of %d files, "
             "then open and read %d of them (files of 7 bytes)%s." % (
                 DIRFILES, READFILES, "; PREV_TIERFS is commit %s" % os.environ["PREV_COMMIT"]
                 if PREV and "PREV_COMMIT" in os.environ else ""),
             "- Rounds: %d, configurations interleaved (reversed every other round); median (min–max)." % ROUNDS, "",
             "| configuration | files/s | against no reader |", "|---|---:|---:|"]
    for config in CONFIGS:
        m = statistics.median(results[config])
        lines.append("| %s | %s | %s |" % (LABELS[config], cell(results[config]),
                                            "" if config == "nolog" else "%.2fx" % (m / ref)))
    lines += ["", END]
    section = "\n".join(lines)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
