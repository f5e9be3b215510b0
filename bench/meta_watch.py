#!/usr/bin/env python3
"""What the metadata watch buys a mount (fuse/remote_invalidation.h): the kernel may cache
attributes and names for long and still see another client's change at once.

    sudo bench/meta_watch.py [--engine etcd|redis|sqlite|postgres] [--files 2000] [--passes 5] [--trials 30]

A three-member etcd cluster, or one Redis or PostgreSQL server, on loopback
(tests/servers.py, ports moved by 600), or SQLite (every mount on this host); SQLite and
PostgreSQL volumes are formatted with --changelog-hours 1, whose log the mounts poll
(meta/change_log_watch.h). One mount
writes, four others read, each with one of: kernel caches of 1 s (the default) or 60 s
(--attr-cache, --entry-cache, --dir-entry-cache), with the watch (the default) or
--no-meta-watch. For each reader, interleaved:
  - staleness: the writer chmods a file the reader has just stat'ed; the reader stats it
    every millisecond until it sees the new mode (at most 3 s): median and max over
    --trials changes, and how many were still stale after 3 s;
  - stat cost: --passes passes of stat over --files files the reader has listed (after
    one that fills the caches), and the metadata transactions it ran for them
    (tierfs_meta_txn_duration_seconds_count).
Writes the "meta-watch" section of docs/benchmarks.md (etcd) or "meta-watch-ENGINE"."""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("TIERFS_TEST_PORT_OFFSET", "600")
os.environ.setdefault("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
import harness  # noqa: E402
import servers  # noqa: E402
from doc_section import write_section  # noqa: E402



class NoServer:
    """SQLite: the volume's own database file."""
    def start(self):
        pass

    def stop(self):
        pass


def markers(engine):
    name = "meta-watch" if engine == "etcd" else "meta-watch-" + engine
    return "<!-- BEGIN %s (bench/meta_watch.py) -->" % name, "<!-- END %s (bench/meta_watch.py) -->" % name

READERS = [
    ("1 s caches, no watch", ["--no-meta-watch"]),
    ("1 s caches, watch", []),
    ("60 s caches, no watch", ["--attr-cache", "60", "--entry-cache", "60", "--dir-entry-cache", "60",
                               "--no-meta-watch"]),
    ("60 s caches, watch", ["--attr-cache", "60", "--entry-cache", "60", "--dir-entry-cache", "60"]),
]
STALE_S = 3.0


def txns(mnt):
    s = json.loads(os.getxattr(mnt, "tierfs.stats"))["metrics"]
    return sum(v for k, v in s.items() if k.startswith("tierfs_meta_txn_duration_seconds_count"))


def staleness(writer, reader, mode):
    os.stat(os.path.join(reader, "probe"))  # cached now
    os.chmod(os.path.join(writer, "probe"), mode)
    t0 = time.monotonic()
    while time.monotonic() - t0 < STALE_S:
        if os.stat(os.path.join(reader, "probe")).st_mode & 0o777 == mode:
            return time.monotonic() - t0
        time.sleep(0.001)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--engine", choices=["etcd", "redis", "sqlite", "postgres"], default="etcd")
    a = ap.parse_args()
    BEGIN, END = markers(a.engine)
    work = tempfile.mkdtemp(prefix="tierfs-watch-bench-")
    if a.engine == "etcd":
        server = servers.Etcd(work, name="etcd-watch-bench")
        url = lambda: server.url("watchbench")  # noqa: E731
        where = "three etcd members on loopback"
    elif a.engine == "redis":
        server = servers.Redis(work, port=servers.free_ports(1))
        url = lambda: server.url() + "/1"  # noqa: E731
        where = "one Redis server on loopback"
    elif a.engine == "postgres":
        os.chmod(work, 0o755)  # the server runs as the postgres user
        server = servers.Postgres(work, port=servers.free_ports(1))
        url = lambda: server.url("tierfs_bench")  # noqa: E731
        where = "one PostgreSQL server on loopback, change log polled"
    else:
        server = NoServer()
        url = lambda: None  # noqa: E731
        where = "SQLite, mounts on one host, change log polled"
    vol = None
    try:
        server.start()
        vol = harness.Volume("watchbench", meta_url=url(), base=work)
        vol.format(*(["--changelog-hours", "1"] if a.engine in ("sqlite", "postgres") else []))
        vol.mount()
        mnts = []
        for i, (_, extra) in enumerate(READERS):
            m = os.path.join(work, "r%d" % i)
            os.makedirs(m)
            res = vol.mount_at(m, *extra)
            if res[0] != 0:
                raise RuntimeError(harness.msg(*res))
            mnts.append(m)
        os.makedirs(os.path.join(vol.mnt, "d"))
        for i in range(a.files):
            open(os.path.join(vol.mnt, "d", "f%05d" % i), "w").close()
        open(os.path.join(vol.mnt, "probe"), "w").close()

        lags = {i: [] for i in range(len(READERS))}
        stale = {i: 0 for i in range(len(READERS))}
        n = 0
        for t in range(a.trials):
            for i in (range(len(READERS)) if t % 2 == 0 else reversed(range(len(READERS)))):
                mode = 0o600 | (n % 0o100)  # never one a reader may still hold from an earlier trial
                n += 1
                lag = staleness(vol.mnt, mnts[i], mode)
                if lag is None:
                    stale[i] += 1
                else:
                    lags[i].append(lag)
            time.sleep(0.05)

        names = {}
        cost = {i: [] for i in range(len(READERS))}
        calls = {i: [] for i in range(len(READERS))}
        for i, m in enumerate(mnts):
            names[i] = [os.path.join(m, "d", n) for n in sorted(os.listdir(os.path.join(m, "d")))]
        for p in range(a.passes + 1):  # the first pass fills the caches: not counted
            for i in (range(len(READERS)) if p % 2 == 0 else reversed(range(len(READERS)))):
                before = txns(mnts[i])
                t0 = time.monotonic()
                for name in names[i]:
                    os.stat(name)
                if p > 0:
                    cost[i].append(len(names[i]) / (time.monotonic() - t0))
                    calls[i].append(txns(mnts[i]) - before)
                time.sleep(0.2)

        rows = ["| reader | change seen after: median | max | still stale after %.0f s | stat/s median (min-max) |"
                " metadata transactions per stat |" % STALE_S, "|---|---|---|---|---|---|"]
        for i, (title, _) in enumerate(READERS):
            l = lags[i]
            med = "%.1f ms" % (1000 * statistics.median(l)) if l else "-"
            mx = "%.1f ms" % (1000 * max(l)) if l else "-"
            rows.append("| %s | %s | %s | %d of %d | %.0f (%.0f-%.0f) | %.2f |" % (
                title, med, mx, stale[i], a.trials, statistics.median(cost[i]), min(cost[i]), max(cost[i]),
                statistics.median(calls[i]) / a.files))
        cmd = "sudo bench/meta_watch.py " + " ".join(sys.argv[1:])
        section = "\n".join([
            BEGIN, "## %s's watch: long kernel caches that still see other clients' changes" % (
                {"etcd": "etcd", "redis": "Redis", "sqlite": "SQLite", "postgres": "PostgreSQL"}[a.engine]), "",
            "`%s` (%s, %d cores; %s). One mount chmods a file another has just"
            " stat'ed, %d times per reader (readers interleaved); then %d passes of stat over %d listed files per"
            " reader after one that fills the caches. The watch drops the kernel's cached attributes and names as the engine pushes other clients'"
            " commits, or as the change log shows them (fuse/remote_invalidation.h)." % (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(), where,
                                                        a.trials, a.passes, a.files), ""] + rows + ["", END])
        write_section(os.path.join(REPO, "docs", "benchmarks.md"), BEGIN, END, section)
        print(section)
    finally:
        if vol:
            vol.cleanup()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
