#!/usr/bin/env python3
"""The cost of observability: small-file creates and 4 KiB random reads through a mount with
metrics scraped every second, with the access log being read, and with neither.

    BASE_TIERFS=/path/to/older/tierfs bench/metrics.py      3 rounds
    FILES=3000 READS=20000 ROUNDS=5 bench/metrics.py

On SQLite with a local bucket (the embedded default), every configuration on a freshly
formatted volume, mounted with `--cache-dir memory`:

    base        BASE_TIERFS: a tierfs built before metrics existed (no instrumentation at all)
    off         this tierfs with `--metrics 0` (requests still counted, nothing served)
    metrics     this tierfs serving /metrics, scraped every second during the workload
    accesslog   as metrics, and `cat MOUNTPOINT/.accesslog > /dev/null` running

Workloads, in one Python process through the mount: (a) FILES files of 4 KiB (open, write,
close; files/s); (b) READS random 4 KiB preads with O_DIRECT (every read reaches the
client) of a 256 MiB file written before (reads/s). Configurations interleave within a
round, in reversed order every other round. Reports median (min–max) and each
configuration's cost against "base" (or "off" without BASE_TIERFS), and writes the section
between <!-- bench:metrics:begin --> and <!-- bench:metrics:end --> of docs/benchmarks.md.
Needs root. Environment: FILES READS ROUNDS TIERFS BASE_TIERFS BASE_COMMIT BENCH_DOC BENCH_WORK.
"""

import json
import mmap
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from doc_section import write_section  # noqa: E402 (bench/, the script's own directory)

FILES = int(os.environ.get("FILES") or 3000)
READS = int(os.environ.get("READS") or 20000)
ROUNDS = int(os.environ.get("ROUNDS") or 3)
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
BASE = os.environ.get("BASE_TIERFS")
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:metrics:begin -->", "<!-- bench:metrics:end -->"
PORT = 9790
CONFIGS = (["base"] if BASE else []) + ["off", "metrics", "accesslog"]
LABELS = {"base": "tierfs without metrics (BASE_TIERFS)", "off": "--metrics 0",
          "metrics": "metrics served, scraped every 1 s", "accesslog": "metrics and .accesslog read"}
BIG = 256 << 20


def sh(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def create_files(d):
    data = os.urandom(4096)
    t0 = time.monotonic()
    for i in range(FILES):
        fd = os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)
    return FILES / (time.monotonic() - t0)


def random_reads(path):
    buf = mmap.mmap(-1, 4096)  # O_DIRECT wants an aligned buffer
    rng = random.Random(1)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        t0 = time.monotonic()
        for _ in range(READS):
            os.preadv(fd, [buf], rng.randrange(BIG // 4096) * 4096)
        return READS / (time.monotonic() - t0)
    finally:
        os.close(fd)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="tierfs-metrics-", dir=os.environ.get("BENCH_WORK"))
    mnt, bucket, db = os.path.join(work, "mnt"), os.path.join(work, "bucket"), os.path.join(work, "meta.db")
    os.makedirs(mnt)
    results = {}
    try:
        for r in range(ROUNDS):
            order = CONFIGS if r % 2 == 0 else list(reversed(CONFIGS))
            for config in order:
                binary = BASE if config == "base" else TIERFS
                shutil.rmtree(bucket, ignore_errors=True)
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(db + suffix):
                        os.unlink(db + suffix)
                sh(binary, "format", "sqlite3://" + db, "metricsbench", "--storage", "file", "--bucket", bucket,
                   "--trash-days", "0")
                extra = [] if config == "base" else (["--metrics", "0"] if config == "off"
                                                     else ["--metrics", "127.0.0.1:%d" % PORT])
                sh(binary, "mount", "sqlite3://" + db, mnt, "-d", "--cache-dir", "memory",
                   "--log", os.path.join(work, "client.log"), *extra)
                stop = threading.Event()
                helpers = []
                try:
                    with open(os.path.join(mnt, "big"), "wb") as f:
                        for _ in range(BIG >> 20):
                            f.write(os.urandom(1 << 20))
                    if config in ("metrics", "accesslog"):
                        addr = json.loads(os.getxattr(mnt, "tierfs.stats"))["metrics_addr"]

                        def scrape():
                            while not stop.is_set():
                                urllib.request.urlopen("http://%s/metrics" % addr, timeout=5).read()
                                stop.wait(1)
                        t = threading.Thread(target=scrape, daemon=True)
                        t.start()
                        helpers.append(t)
                    reader = None
                    if config == "accesslog":
                        reader = subprocess.Popen(["sh", "-c", "exec cat %s/.accesslog > /dev/null" % mnt])
                        time.sleep(0.3)
                    d = os.path.join(mnt, "files")
                    os.mkdir(d)
                    creates = create_files(d)
                    reads = random_reads(os.path.join(mnt, "big"))
                    if reader:
                        reader.kill()
                        reader.wait()
                finally:
                    stop.set()
                    for t in helpers:
                        t.join()
                    subprocess.run(["umount", mnt], capture_output=True)
                results.setdefault((config, "create"), []).append(creates)
                results.setdefault((config, "read"), []).append(reads)
                print("[metrics.py] round %d %-9s: %6.0f files/s, %7.0f reads/s" % (r + 1, config, creates, reads),
                      flush=True)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    ref = "base" if BASE else "off"

    def cell(xs, fmt):
        return "%s (%s–%s)" % (fmt % statistics.median(xs), fmt % min(xs), fmt % max(xs))

    def cost(config, kind):
        return (1 - statistics.median(results[(config, kind)]) / statistics.median(results[(ref, kind)])) * 100

    # A binary is named by the commit it was built from, not by where it lies on this machine.
    env = " ".join("%s=%s" % (k, "/path/to/tierfs-" + os.environ.get("BASE_COMMIT", "old") if k == "BASE_TIERFS" else os.environ[k])
                   for k in ("FILES", "READS", "ROUNDS", "BASE_TIERFS") if k in os.environ)
    lines = [BEGIN, "## Observability: cost of metrics and of the access log", "",
             "Generated by `bench/metrics.py` (see the script's header); do not edit by hand, rerun the script.", "",
             "- Command: `%sbench/metrics.py`" % (env + " " if env else ""),
             "- Date: %s; %d cores (shared machine); %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                           os.cpu_count(), os.uname().release),
             "- SQLite, local bucket, `--cache-dir memory`, a fresh volume per run. %d files of 4 KiB created "
             "(open, write, close), then %d random 4 KiB O_DIRECT reads of a 256 MiB file." % (FILES, READS),
             "- Rounds: %d, configurations interleaved (reversed every other round); median (min–max). Cost: how "
             "much lower the median is than \"%s\"%s." % (ROUNDS, LABELS[ref],
                                                         " (commit %s)" % os.environ["BASE_COMMIT"]
                                                         if BASE and "BASE_COMMIT" in os.environ else ""), "",
             "| configuration | create files/s | cost | 4 KiB random reads/s | cost |", "|---|---:|---:|---:|---:|"]
    for config in CONFIGS:
        k = ["", ""] if config == ref else ["%+.1f%%" % cost(config, w) for w in ("create", "read")]
        lines.append("| %s | %s | %s | %s | %s |" % (LABELS[config], cell(results[(config, "create")], "%.0f"), k[0],
                                                     cell(results[(config, "read")], "%.0f"), k[1]))
    spread = max((max(results[(ref, w)]) - min(results[(ref, w)])) / statistics.median(results[(ref, w)]) * 100
                 for w in ("create", "read"))
    worst = max(cost(c, w) for c in CONFIGS if c != ref for w in ("create", "read"))
    metrics_worst = max(cost("metrics", w) for w in ("create", "read"))
    lines += ["", "What it shows: metrics served and scraped cost %+.1f%% at most against %s (the goal is under 3%%); "
              "the worst configuration costs %+.1f%%; the reference's own run-to-run spread is %.1f%%." %
              (metrics_worst, LABELS[ref], worst, spread), "", END]
    section = "\n".join(lines)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
