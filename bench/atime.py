#!/usr/bin/env python3
"""What access times cost a read-heavy workload: FILES small files read through a fresh
mount, twice (pass 1: the first read of each file since it was written, when relatime
updates its atime; pass 2: read again, when relatime has nothing to do), with relatime (the
default), -o noatime and -o strictatime, and optionally with an older tierfs that never
updated atime (PREV_TIERFS).

    sudo bench/atime.py
    sudo FILES=20000 ROUNDS=5 PREV_TIERFS=/path/to/old/tierfs PREV_COMMIT=abc1234 bench/atime.py

One SQLite volume with a local bucket on a tmpfs, its files written once (4 KiB each, in
directories of 1000). Configurations, each a fresh mount (`--cache-dir memory`, so reads
reach the client), interleaved within a round and reversed every other round. Before each
configuration the files get their atime set back to their mtime (`os.utime`, which also
moves ctime), so every pass 1 starts with every file due under relatime. Reports files/s,
median (min–max), and the metadata write transactions each pass made (from tierfs.stats),
and writes the section between <!-- bench:atime:begin --> and <!-- bench:atime:end --> of
docs/benchmarks.md. Needs root. Environment: FILES ROUNDS THREADS TIERFS PREV_TIERFS
PREV_COMMIT BENCH_DOC BENCH_WORK.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from doc_section import write_section

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = int(os.environ.get("FILES") or 20000)
ROUNDS = int(os.environ.get("ROUNDS") or 3)
THREADS = int(os.environ.get("THREADS") or 4)
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
PREV = os.environ.get("PREV_TIERFS")
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:atime:begin -->", "<!-- bench:atime:end -->"
CONFIGS = ["relatime", "noatime", "strictatime"] + (["prev"] if PREV else [])
LABELS = {"relatime": "relatime (default)", "noatime": "`-o noatime`", "strictatime": "`-o strictatime`",
          "prev": "%s (no atime updates)" % (os.environ.get("PREV_COMMIT") or "PREV_TIERFS")}


def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def paths(root):
    return [os.path.join(root, "d%03d" % (i // 1000), "f%06d" % i) for i in range(FILES)]


def read_all(files):
    """Reads every file with THREADS threads; returns files/s."""
    def work(part):
        for p in part:
            with open(p, "rb") as f:
                f.read()
    parts = [files[i::THREADS] for i in range(THREADS)]
    threads = [threading.Thread(target=work, args=(part,)) for part in parts]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(files) / (time.monotonic() - t0)


def rw_txns(mnt):
    m = json.loads(os.getxattr(mnt, "tierfs.stats")).get("metrics", {})
    return m.get('tierfs_meta_txn_duration_seconds_count{kind="rw"}', 0)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="tierfs-atime-", dir=os.environ.get("BENCH_WORK"))
    fs = os.path.join(work, "fs")
    mnt = os.path.join(work, "mnt")
    os.makedirs(fs)
    os.makedirs(mnt)
    url = "sqlite3://" + os.path.join(fs, "meta.db")
    results = {}  # (config, pass) -> [files/s]
    txns = {}     # (config, pass) -> [rw transactions]

    def mount(binary, *opts):
        sh(binary, "mount", url, mnt, "-d", "--cache-dir", "memory", "--metrics", "0",
           "--log", os.path.join(work, "client.log"), *opts)

    try:
        sh("mount", "-t", "tmpfs", "-o", "size=4g", "tmpfs", fs)
        sh(TIERFS, "format", url, "atime", "--storage", "file", "--bucket", os.path.join(fs, "bucket"),
           "--trash-days", "0")
        mount(TIERFS)
        files = paths(mnt)
        for i, p in enumerate(files):
            if i % 1000 == 0:
                os.mkdir(os.path.dirname(p))
            with open(p, "wb") as f:
                f.write(os.urandom(4096))
        sh("umount", mnt)
        for r in range(ROUNDS):
            for config in (CONFIGS if r % 2 == 0 else list(reversed(CONFIGS))):
                mount(TIERFS)  # every file due again under relatime
                for p in files:
                    st = os.stat(p)
                    os.utime(p, ns=(st.st_mtime_ns, st.st_mtime_ns))
                sh("umount", mnt)
                if config == "prev":
                    mount(PREV)
                else:
                    mount(TIERFS, *([] if config == "relatime" else ["-o", config]))
                try:
                    for n in (1, 2):
                        before = rw_txns(mnt) if config != "prev" else 0
                        rate = read_all(files)
                        time.sleep(1.0)  # the batched atime writes of the pass land
                        results.setdefault((config, n), []).append(rate)
                        if config != "prev":
                            txns.setdefault((config, n), []).append(rw_txns(mnt) - before)
                        print("[atime.py] round %d %-11s pass %d: %7.0f files/s" % (r + 1, config, n, rate), flush=True)
                finally:
                    subprocess.run(["umount", mnt], capture_output=True)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        if os.path.ismount(fs):
            subprocess.run(["umount", fs], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    def cell(xs):
        return "%.0f (%.0f–%.0f)" % (statistics.median(xs), min(xs), max(xs))

    env = " ".join("%s=%s" % (k, "/path/to/tierfs-" + os.environ.get("PREV_COMMIT", "old")
                              if k == "PREV_TIERFS" else os.environ[k])
                   for k in ("FILES", "ROUNDS", "THREADS", "PREV_TIERFS", "PREV_COMMIT") if k in os.environ)
    lines = [BEGIN, "## Access times on a read-heavy workload", "",
             "Generated by `bench/atime.py` (see the script's header); do not edit by hand, rerun the script.",
             "", "- Command: `sudo %sbench/atime.py`" % (env + " " if env else ""),
             "- Date: %s; %d cores (shared machine); %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                           os.cpu_count(), os.uname().release),
             "- SQLite and a local bucket on tmpfs, `--cache-dir memory`, a fresh mount per configuration: "
             "%d files of 4 KiB read by %d threads, twice; every file's atime set back to its mtime "
             "before each configuration (all due under relatime)." % (FILES, THREADS),
             "- Rounds: %d, configurations interleaved (reversed every other round); files/s as median "
             "(min–max); metadata write transactions per pass (median; 0 for the old binary, not "
             "counted)." % ROUNDS, "",
             "| configuration | pass 1 (files/s) | pass 2 (files/s) | write transactions, pass 1 | pass 2 |",
             "|---|---:|---:|---:|---:|"]
    for config in CONFIGS:
        t1 = statistics.median(txns[(config, 1)]) if (config, 1) in txns else 0
        t2 = statistics.median(txns[(config, 2)]) if (config, 2) in txns else 0
        lines.append("| %s | %s | %s | %.0f | %.0f |" % (LABELS[config], cell(results[(config, 1)]),
                                                          cell(results[(config, 2)]), t1, t2))
    lines += ["", END]
    section = "\n".join(lines)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
