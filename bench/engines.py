#!/usr/bin/env python3
"""Metadata engines side by side, and a leader's loss (etcd, PostgreSQL under Patroni) as an
application sees it.

    sudo bench/engines.py [--ops 1000] [--kills 10]

1. Metadata operations per engine, in process (bench/meta_bench: create, lookup, getattr,
   slice commit, rename, unlink), with 1 and 16 client threads: SQLite, Redis (append-only
   file, fsync every second), PostgreSQL (fsync off, as the test server), PostgreSQL with
   a synchronous standby under Patroni (fsync on, synchronous_commit on: what a commit
   costs when it survives the primary's loss), a three-member etcd cluster over gRPC and
   over its JSON gateway (the client's two APIs, measured against each other as the etcd
   engine's choice), Redis under Sentinel (a master and a replica fsyncing every write,
   three Sentinels) without and with `?wait-replicas=1`.
2. A mount on the etcd cluster, then on Redis under Sentinel (WAIT 1), then on the Patroni cluster, creating files in a loop
   while the leader (primary) is SIGKILLed --kills times: from each kill to the completion
   of the first create begun after it (writes succeed again), median and max. A killed etcd member is started
   again at once; a killed PostgreSQL member once writes are back, and the next kill waits
   until it has rejoined as the synchronous standby.

Servers are throwaway ones on loopback (tests/servers.py and tests/servers_patroni.py,
ports moved by 600). Writes the "engines" section of docs/benchmarks.md."""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("TIERFS_TEST_PORT_OFFSET", "600")
import servers  # noqa: E402  (reads the offset above)
import servers_patroni  # noqa: E402
from redis_ha import RedisSentinel  # noqa: E402
from doc_section import write_section  # noqa: E402

TIERFS = os.environ.get("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
META_BENCH = os.path.join(REPO, "build", "bench", "meta_bench")
BEGIN, END = "<!-- BEGIN engines (bench/engines.py) -->", "<!-- END engines (bench/engines.py) -->"


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def meta_bench(urls, ops, threads):
    out = subprocess.run([META_BENCH, "-n", str(ops // threads), "-t", str(threads)] + urls, check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(urls) + 1 and re.search(r"/s$", cells[1]):
            rows[cells[0]] = [int(re.search(r"(\d+)/s$", c).group(1)) for c in cells[1:]]
    return rows


def kills(name, url, work, n, leader, kill, revive, wait_s):
    """From each SIGKILL of the leader to the next create that completes on a mount of url.
    leader() -> index or None; kill(i) (may return the time.monotonic() of the signal);
    revive(i) starts i again."""
    subprocess.run([TIERFS, "format", url, name, "--force", "--storage", "file", "--bucket",
                    os.path.join(work, name + "-b")], check=True, capture_output=True)
    mnt = os.path.join(work, name + "-mnt")
    os.makedirs(mnt)
    subprocess.run([TIERFS, "mount", "-d", url, mnt, "--log", mnt + ".log"], check=True)
    done = []
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                os.close(os.open(os.path.join(mnt, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
                done.append((started, time.monotonic()))
            except OSError:
                pass
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    back = []
    try:
        for _ in range(n):
            time.sleep(2)
            i = leader()
            if i is None:
                continue
            t0 = time.monotonic()
            t0 = kill(i) or t0  # when the signal went out, if kill() says
            deadline = time.monotonic() + wait_s
            # The first create begun after the kill: one begun before may complete after it
            # without needing the server (its commit was answered before the kill).
            while time.monotonic() < deadline and not any(b >= t0 for b, _ in done[-5:]):
                time.sleep(0.005)
            after = [e for b, e in done[-50:] if b >= t0]
            back.append(after[0] - t0 if after else float("inf"))
            log("%s: leader %d killed: creates again after %.3f s" % (name, i, back[-1]))
            revive(i)
    finally:
        stop.set()
        t.join()
        subprocess.run([TIERFS, "umount", mnt])
    return back


def summary(back, wait_s):
    finite = [b for b in back if b != float("inf")]
    return "median %.2f s, max %.2f s%s" % (
        statistics.median(finite) if finite else float("nan"), max(back) if back else float("nan"),
        "" if len(finite) == len(back) else " (%d never within %d s)" % (len(back) - len(finite), wait_s))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=1000, help="operations of each kind per engine and thread count")
    ap.add_argument("--kills", type=int, default=10)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tierfs-engines-bench-")
    os.chmod(work, 0o755)
    srv = os.path.join(work, "srv")
    redis, pg, etcd = servers.Redis(srv), servers.Postgres(srv), servers.Etcd(srv)
    patroni = servers_patroni.Patroni(srv, members=2)
    ha = RedisSentinel(srv, port=servers.REDIS_HA_PORT)
    try:
        for s in (redis, pg, etcd, patroni, ha):
            s.start()
        patroni.create_database("tierfs_bench")
        engines = [("SQLite", "sqlite3://" + os.path.join(work, "b.db")), ("Redis", redis.url() + "/5"),
                   ("Redis + replica, Sentinel", ha.url(db=5)),
                   ("Redis + replica, Sentinel, WAIT 1", ha.url(db=6, query="wait-replicas=1")),
                   ("PostgreSQL", pg.url("tierfs_bench")),
                   ("PostgreSQL + sync standby (Patroni)", patroni.url("tierfs_bench")),
                   ("etcd, 3 members (gRPC)", etcd.url("b1") + "?api=grpc"),
                   ("etcd, 3 members (JSON gateway)", etcd.url("b2") + "?api=json")]
        results = {}
        for threads in (1, 16):
            log("meta_bench, %d thread(s)" % threads)
            results[threads] = meta_bench([u for _, u in engines], a.ops, threads)
        back = kills("etcdkill", etcd.url("killbench"), work, a.kills, etcd.leader,
                     lambda i: etcd.kill_member(i, signal.SIGKILL), etcd.start_member, 30)


        def kill_redis(i):
            # The one replica is promoted and the old master comes back as its replica here:
            # with WAIT 1 writes need a replica, so they cannot resume before it is back.
            t0 = time.monotonic()
            ha.kill_node(i, signal.SIGKILL)
            ha.start_node(i, replica_of=ha.wait_master(not_node=i))
            return t0
        redis_back = kills("rediskill", ha.url(db=7, query="wait-replicas=1"), work, a.kills, ha.master, kill_redis,
                           lambda i: None, 60)

        def revive_pg(i):
            # Restarted before another member holds the leader key (ttl), it would simply
            # take its place again after crash recovery: not the failover measured here.
            patroni.wait_primary(other_than=i, timeout=60)
            patroni.start_member(i)
            patroni.wait_ready(120)  # the next kill finds a synchronous standby to promote
        pg_back = kills("pgkill", patroni.url("tierfs_bench") + "?timeout=60s", work, a.kills, patroni.primary,
                        lambda i: patroni.kill_member(i, signal.SIGKILL), revive_pg, 60)
    finally:
        for s in (ha, patroni, etcd, pg, redis):
            s.stop()
        subprocess.run(["rm", "-rf", work])
    cmd = "sudo bench/engines.py " + " ".join(sys.argv[1:])
    lines = [BEGIN, "## Metadata engines side by side, and a leader's loss", "",
             "`%s` (%s, %d cores). Operations per second of all client threads, in process"
             " (bench/meta_bench, no FUSE; %d operations of each kind per column), servers on loopback"
             " (tests/servers.py): Redis with its append-only file fsync'd every second, PostgreSQL with fsync"
             " off, PostgreSQL 15 under Patroni with fsync on and a synchronous standby on this machine (a commit"
             " waits for the standby's flush), Redis 7 under three Sentinels with a master and a replica fsyncing every"
             " write (tests/redis_ha.py; WAIT 1: `?wait-replicas=1`, a commit is acknowledged once the replica holds"
             " it), etcd 3.4 with three members on this machine (each fsyncs its log)." %
             (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(), a.ops), "",
             "| operation, threads | " + " | ".join(n for n, _ in engines) + " |",
             "|---|" + "---:|" * len(engines)]
    for op in ("create", "lookup", "getattr", "slice commit", "rename", "unlink"):
        for threads in (1, 16):
            lines.append("| %s, %d | %s |" % (op, threads, " | ".join("%d/s" % v for v in results[threads][op])))
    lines += ["", "etcd leader SIGKILLed %d times under a mount creating files in a loop (each restarted after):"
              " the first create begun after a kill completed after %s." % (len(back), summary(back, 30)), "",
              "Redis master (under three Sentinels, down-after-milliseconds 1000, `?wait-replicas=1`) SIGKILLed %d"
              " times under a mount creating files in a loop (the Sentinels promote the replica; the old master is"
              " restarted as its replica at once, since WAIT 1 needs one): the first create begun after a kill"
              " completed after %s." % (len(redis_back), summary(redis_back, 60)), "",
              "PostgreSQL primary under Patroni (two members; ttl 5 s, loop_wait 1 s, retry_timeout 2 s) SIGKILLed"
              " %d times, postgres and patroni together, under a mount creating files in a loop (the META-URL names"
              " both servers; the killed member restarted once the other had taken over, the next kill after it had"
              " rejoined as the synchronous standby): the first create begun after a kill completed after %s." %
              (len(pg_back), summary(pg_back, 60)),
              END]
    write_section(os.path.join(REPO, "docs", "benchmarks.md"), BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
