#!/usr/bin/env python3
"""The cost of exact quota accounting: small-file creates and a sequential write into a
directory with no quota, with a quota on it, and with quotas on it and on its parent.

    bench/quota.py                          5000 files of 4 KiB and a 1 GiB file, 3 rounds
    FILES=1000 WRITE_MB=256 bench/quota.py  smaller

On SQLite with a local bucket (the embedded default) and on Redis (a throwaway server on
loopback), every configuration runs on a freshly formatted volume (`--trash-days 0`), so the
"no quota" runs are on a volume with no quota at all (any quota on a volume makes every
operation read the volume's quota list). In each volume the files go to /gp/p:

    none          no quota on the volume
    parent        `tierfs quota set --path /gp/p` (set after mkdir, before the workload)
    gp+parent     quotas on /gp and on /gp/p

Workloads, in one Python process through the mount: (a) FILES files of 4 KiB, each with
open, one write, close (files/s); (b) one WRITE_MB MiB file with 1 MiB writes and an fsync
at the end (MiB/s, fsync included). After each workload the quotas' used_inodes and
used_bytes (`tierfs quota get --json`) must equal what was written, or the script stops.
Configurations interleave within a round, in reversed order every other round. Reports
median (min–max) over the rounds and the cost against "none", and writes the section
between <!-- bench:quota:begin --> and <!-- bench:quota:end --> of docs/benchmarks.md.
Needs root (mounts).
Environment: FILES WRITE_MB ROUNDS TIERFS BENCH_DOC BENCH_WORK; BASE_TIERFS (and BASE_COMMIT, its
commit) adds a fourth configuration: a tierfs built before quotas, on a volume it formats.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from doc_section import write_section  # noqa: E402 (bench/, the script's own directory)
import servers  # noqa: E402

FILES = int(os.environ.get("FILES") or 5000)
WRITE_MB = int(os.environ.get("WRITE_MB") or 1024)
ROUNDS = int(os.environ.get("ROUNDS") or 3)
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:quota:begin -->", "<!-- bench:quota:end -->"
FILE_SIZE = 4096
CHUNK = 1 << 20
# configuration -> directories (from the volume's root) that get a quota
CONFIGS = {"none": [], "parent": ["/gp/p"], "gp+parent": ["/gp", "/gp/p"]}
LABELS = {"none": "no quota", "parent": "quota on parent", "gp+parent": "quotas on grandparent + parent"}
# BASE_TIERFS: a tierfs built before quotas existed; its "no quota" runs show what reading
# the quota list costs a volume that has none.
BASE = os.environ.get("BASE_TIERFS")
if BASE:
    CONFIGS["before"] = []
    LABELS["before"] = "no quota, tierfs without quotas (BASE_TIERFS)"
ENGINES = ("sqlite", "redis")


def sh(*cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def create_files(d):
    data = os.urandom(FILE_SIZE)
    t0 = time.monotonic()
    for i in range(FILES):
        fd = os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        if os.write(fd, data) != FILE_SIZE:
            raise RuntimeError("short write")
        os.close(fd)
    return FILES / (time.monotonic() - t0)


def write_big(path):
    data = os.urandom(CHUNK)
    t0 = time.monotonic()
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    try:
        for _ in range(WRITE_MB):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return WRITE_MB / (time.monotonic() - t0)


def check_usage(url, quota_dirs, files, big, config=""):
    """Every quota's recorded usage must be exactly what the workload made below it."""
    if config == "before":  # that tierfs has no quotas
        return
    if not quota_dirs:
        listed = json.loads(sh(TIERFS, "quota", "list", url, "--json").stdout)
        if listed:
            raise RuntimeError("volume without quotas lists quotas: %s" % listed)
        return
    for path in quota_dirs:
        out = sh(TIERFS, "quota", "get", url, "--path", path, "--json").stdout
        q = json.loads(out)
        if isinstance(q, list):
            q = q[0]
        # /gp/p holds the files (and the big one); /gp also holds /gp/p itself
        inodes = files + (1 if big else 0) + (1 if path == "/gp" else 0)
        nbytes = files * FILE_SIZE + (WRITE_MB * CHUNK if big else 0)
        if q.get("used_inodes") != inodes or q.get("used_bytes") != nbytes:
            raise RuntimeError("quota of %s on %s: used_inodes %s, used_bytes %s; expected %d and %d" %
                               (path, url, q.get("used_inodes"), q.get("used_bytes"), inodes, nbytes))


def umount(mnt):
    try:
        sh(TIERFS, "umount", mnt)
    except RuntimeError as e:
        print("[quota.py] %s; lazy unmount" % e, file=sys.stderr, flush=True)
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="tierfs-quota-", dir=os.environ.get("BENCH_WORK"))
    redis = servers.Redis(os.path.join(work, "srv"), port=servers.REDIS_PORT + 710)
    mounted = []
    results = {}  # (engine, config, "create"|"write") -> [values]
    try:
        redis.start()
        for r in range(ROUNDS):
            order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
            for engine in ENGINES:
                for config in order:
                    if engine == "sqlite":
                        db = os.path.join(work, "meta.db")
                        for suffix in ("", "-wal", "-shm", "-journal"):
                            if os.path.exists(db + suffix):
                                os.unlink(db + suffix)
                        url = "sqlite3://" + db
                    else:
                        url = redis.url() + "/%d" % (list(CONFIGS).index(config) + 1)
                    bucket, mnt = os.path.join(work, "bucket"), os.path.join(work, "mnt")
                    shutil.rmtree(bucket, ignore_errors=True)
                    os.makedirs(mnt, exist_ok=True)
                    binary = BASE if config == "before" else TIERFS
                    trash = [] if config == "before" else ["--trash-days", "0"]
                    sh(binary, "format", url, "quotabench", "--storage", "file", "--bucket", bucket,
                       "--force", *trash)
                    sh(binary, "mount", url, mnt, "-d", "--log", os.path.join(work, "client.log"),
                       "--cache-dir", "memory")
                    mounted.append(mnt)
                    try:
                        d = os.path.join(mnt, "gp", "p")
                        os.makedirs(d)
                        for path in CONFIGS[config]:
                            err = sh(TIERFS, "quota", "set", url, "--path", path, "--capacity", "1T",
                                     "--inodes", "100000000").stderr
                            if err.strip():
                                print("[quota.py] quota set %s: %s" % (path, err.strip()), file=sys.stderr, flush=True)
                        check_usage(url, CONFIGS[config], 0, False, config)
                        rate = create_files(d)
                        check_usage(url, CONFIGS[config], FILES, False, config)
                        mbps = write_big(os.path.join(d, "big"))
                        check_usage(url, CONFIGS[config], FILES, True, config)
                    finally:
                        mounted.remove(mnt)
                        umount(mnt)
                    shutil.rmtree(bucket, ignore_errors=True)
                    results.setdefault((engine, config, "create"), []).append(rate)
                    results.setdefault((engine, config, "write"), []).append(mbps)
                    print("[quota.py] round %d %s %-9s: %6.0f files/s, %6.1f MiB/s" %
                          (r + 1, engine, config, rate, mbps), flush=True)
    finally:
        for mnt in mounted:
            umount(mnt)
        redis.stop()
        if not os.path.ismount(os.path.join(work, "mnt")):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("[quota.py] %s still mounted; left %s" % (os.path.join(work, "mnt"), work), file=sys.stderr)

    def cell(xs, fmt):
        return "%s (%s–%s)" % (fmt % statistics.median(xs), fmt % min(xs), fmt % max(xs))

    def cost(engine, config, kind):
        base = statistics.median(results[(engine, "none", kind)])
        return (1 - statistics.median(results[(engine, config, kind)]) / base) * 100

    def spread(engine, config, kind):  # (max-min)/median of one configuration, %
        xs = results[(engine, config, kind)]
        return (max(xs) - min(xs)) / statistics.median(xs) * 100

    # A binary is named by the commit it was built from, not by where it lies on this machine.
    env = " ".join("%s=%s" % (k, "/path/to/tierfs-" + os.environ.get("BASE_COMMIT", "old") if k == "BASE_TIERFS" else os.environ[k])
                   for k in ("FILES", "WRITE_MB", "ROUNDS", "BASE_TIERFS") if k in os.environ)
    lines = [BEGIN, "## Quota accounting: small-file creates and sequential write", "",
             "Generated by `bench/quota.py` (see the script's header); do not edit by hand, rerun the script.", "",
             "- Command: `%sbench/quota.py`" % (env + " " if env else ""),
             "- Date: %s; %d cores (shared machine); %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                           os.cpu_count(), os.uname().release),
             "- Every configuration of every round runs on a freshly formatted volume (`--trash-days 0`, local "
             "bucket, mount with `--cache-dir memory`), so \"no quota\" is a volume with no quota at all. Files go "
             "to /gp/p; quotas (1 TiB, 10^8 inodes, never reached) are set with `tierfs quota set` after the "
             "mkdir and before the workload. Redis is a throwaway server on loopback.",
             "- Workloads from one Python process: create %d files of %d KiB (open, one write, close), then "
             "write one %d MiB file with 1 MiB writes and fsync (fsync timed). After each, every quota's "
             "used_inodes and used_bytes matched what was written." % (FILES, FILE_SIZE // 1024, WRITE_MB),
             "- Rounds: %d, configurations in reversed order every other round; cells are median (min–max). "
             "Cost: how much lower the median is than with no quota (negative: faster)." % ROUNDS]
    if BASE:
        lines.append("- The last row runs a tierfs built before quotas existed (`BASE_TIERFS`, commit %s): "
                     "its negative cost is what reading the quota list costs a volume without quotas." %
                     os.environ.get("BASE_COMMIT", "?"))
    lines.append("")
    for engine in ENGINES:
        lines += ["%s:" % ("SQLite" if engine == "sqlite" else "Redis"), "",
                  "| configuration | create files/s | cost | write MiB/s | cost |", "|---|---:|---:|---:|---:|"]
        for config in CONFIGS:
            c = [cell(results[(engine, config, "create")], "%.0f"), cell(results[(engine, config, "write")], "%.1f")]
            k = ["", ""] if config == "none" else ["%+.1f%%" % cost(engine, config, w) for w in ("create", "write")]
            lines.append("| %s | %s | %s | %s | %s |" % (LABELS[config], c[0], k[0], c[1], k[1]))
        lines.append("")
    # What it shows, from the numbers: each quota configuration's cost against the run-to-run
    # spread of the no-quota runs of the same engine and workload.
    said = []
    for engine in ENGINES:
        parts = []
        for kind, what in (("create", "creates"), ("write", "the sequential write")):
            noise = spread(engine, "none", kind)
            costs = ", ".join("%s %+.1f%%" % (LABELS[c], cost(engine, c, kind)) for c in CONFIGS if c != "none")
            worst = max(cost(engine, c, kind) for c in CONFIGS if c != "none")
            if ROUNDS < 2:
                parts.append("%s: %s" % (what, costs))
                continue
            verdict = "within" if worst <= noise else "beyond"
            parts.append("%s: %s (%s the %.1f%% spread of the no-quota runs)" % (what, costs, verdict, noise))
        said.append("On %s, %s." % ("SQLite" if engine == "sqlite" else "Redis", "; ".join(parts)))
    if ROUNDS < 2:
        said.append("One round only: there is no run-to-run spread to tell these costs from noise.")
    lines += ["What it shows: " + " ".join(said), "", END]
    section = "\n".join(lines)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
