#!/usr/bin/env python3
"""Metadata engines side by side, and an etcd leader's loss as an application sees it.

    sudo bench/engines.py [--ops 1000] [--kills 10]

1. Metadata operations per engine, in process (bench/meta_bench: create, lookup, getattr,
   slice commit, rename, unlink), with 1 and 16 client threads: SQLite, Redis (append-only
   file, fsync every second), PostgreSQL (fsync off, as the test server), a three-member
   etcd cluster over gRPC and over its JSON gateway (the client's two APIs, measured
   against each other as the etcd engine's choice).
   Redis under Sentinel (a master, a replica, three Sentinels), without and with
   `?wait-replicas=1`.
2. A mount creating files in a loop while the leader is SIGKILLed --kills times (etcd:
   the member restarted; Redis: the Sentinels promote the replica): from each kill to the
   next create that completes (writes succeed again), median and max.

Servers are throwaway ones on loopback (tests/servers.py, ports moved by 600). Writes the
"engines" section of docs/benchmarks.md."""
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


def kills(name, url, kill_leader, work, n):
    """A mount on url creating files in a loop while kill_leader() takes the engine's leader
    down n times (it returns the time of the kill, or None, and brings the member back as a
    follower). Returns, for each kill, the seconds until a create completed again."""
    subprocess.run([TIERFS, "format", url, "killbench", "--force", "--storage", "file", "--bucket",
                    os.path.join(work, name + "-kb")], check=True, capture_output=True)
    mnt = os.path.join(work, name + "-kmnt")
    os.makedirs(mnt)
    subprocess.run([TIERFS, "mount", "-d", url, mnt, "--log", mnt + ".log"], check=True)
    # The writer is a process of its own: kill_leader starts servers, and a program started
    # from a process holding a file of the mount open closes it at exec, a flush that waits
    # for the metadata engine, which may be waiting for that very server.
    script = ("import os, sys, time\\n"
              "i = 0\\n"
              "while True:\\n"
              "    try:\\n"
              "        os.close(os.open(os.path.join(sys.argv[1], 'f%d' % i), os.O_CREAT | os.O_WRONLY, 0o644))\\n"
              "        print(time.monotonic(), flush=True)\\n"
              "    except OSError:\\n"
              "        pass\\n"
              "    i += 1\\n")
    writer = subprocess.Popen([sys.executable, "-c", script, mnt], stdout=subprocess.PIPE, text=True)
    done = []

    def read():
        for line in writer.stdout:
            done.append(float(line))

    reader = threading.Thread(target=read)
    reader.start()
    back = []
    try:
        for _ in range(n):
            time.sleep(2)
            t0 = kill_leader()
            if t0 is None:
                continue
            deadline = t0 + 60
            while time.monotonic() < deadline and not any(x > t0 for x in done[-5:]):
                time.sleep(0.005)
            after = [x for x in done[-50:] if x > t0]
            back.append(after[0] - t0 if after else float("inf"))
            log("%s: leader killed, creates again after %.3f s" % (name, back[-1]))
    finally:
        writer.kill()
        writer.wait()
        reader.join()
        subprocess.run([TIERFS, "umount", mnt])
    return back


def kill_etcd_leader(etcd):
    def kill():
        i = etcd.leader()
        if i is None:
            return None
        t0 = time.monotonic()
        etcd.kill_member(i, signal.SIGKILL)
        time.sleep(1)
        etcd.start_member(i)
        return t0
    return kill


def kill_redis_master(ha):
    def kill():
        old = ha.master()
        if old is None:
            return None
        t0 = time.monotonic()
        ha.kill_node(old, signal.SIGKILL)
        new = ha.wait_master(not_node=old)
        ha.start_node(old, replica_of=new)
        return t0
    return kill


def summary(back):
    finite = [b for b in back if b != float("inf")]
    return "median %.2f s, max %.2f s%s" % (
        statistics.median(finite) if finite else float("nan"), max(back) if back else float("nan"),
        "" if len(finite) == len(back) else " (%d never within 60 s)" % (len(back) - len(finite)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=1000, help="operations of each kind per engine and thread count")
    ap.add_argument("--kills", type=int, default=10)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tierfs-engines-bench-")
    os.chmod(work, 0o755)
    srv = os.path.join(work, "srv")
    redis, pg, etcd = servers.Redis(srv), servers.Postgres(srv), servers.Etcd(srv)
    ha = RedisSentinel(srv, port=servers.REDIS_HA_PORT)
    try:
        for s in (redis, pg, etcd, ha):
            s.start()
        engines = [("SQLite", "sqlite3://" + os.path.join(work, "b.db")), ("Redis", redis.url() + "/5"),
                   ("Redis + replica, Sentinel", ha.url(db=5)),
                   ("Redis + replica, Sentinel, WAIT 1", ha.url(db=6, query="wait-replicas=1")),
                   ("PostgreSQL", pg.url("tierfs_bench")), ("etcd, 3 members (gRPC)", etcd.url("b1") + "?api=grpc"),
                   ("etcd, 3 members (JSON gateway)", etcd.url("b2") + "?api=json")]
        results = {}
        for threads in (1, 16):
            log("meta_bench, %d thread(s)" % threads)
            results[threads] = meta_bench([u for _, u in engines], a.ops, threads)
        back = {"etcd, 3 members": kills("etcd", etcd.url("killbench"), kill_etcd_leader(etcd), work, a.kills),
                "Redis under Sentinel, WAIT 1": kills("redis", ha.url(db=7, query="wait-replicas=1"),
                                                      kill_redis_master(ha), work, a.kills)}
    finally:
        for s in (ha, etcd, pg, redis):
            s.stop()
        subprocess.run(["rm", "-rf", work])
    cmd = "sudo bench/engines.py " + " ".join(sys.argv[1:])
    lines = [BEGIN, "## Metadata engines side by side, and a leader's loss", "",
             "`%s` (%s, %d cores). Operations per second of all client threads, in process"
             " (bench/meta_bench, no FUSE; %d operations of each kind per column), servers on loopback"
             " (tests/servers.py): Redis with its append-only file fsync'd every second; Redis under Sentinel"
             " (tests/redis_ha.py: a master and a replica fsyncing every write, three Sentinels; WAIT 1:"
             " `?wait-replicas=1`, each commit acknowledged once the replica holds it); PostgreSQL with fsync"
             " off; etcd 3.4 with three members on this machine (each fsyncs its log)." %
             (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(), a.ops), "",
             "| operation, threads | " + " | ".join(n for n, _ in engines) + " |",
             "|---|" + "---:|" * len(engines)]
    for op in ("create", "lookup", "getattr", "slice commit", "rename", "unlink"):
        for threads in (1, 16):
            lines.append("| %s, %d | %s |" % (op, threads, " | ".join("%d/s" % v for v in results[threads][op])))
    lines += ["", "Leader SIGKILLed %d times under a mount creating files in a loop (etcd: the member restarted a"
              " second later; Redis: the Sentinels promote the replica, the old master restarted as its replica),"
              " from the kill to the next create that completed:" % a.kills, ""]
    for name, b in back.items():
        lines.append("- %s: %s" % (name, summary(b)))
    lines.append(END)
    write_section(os.path.join(REPO, "docs", "benchmarks.md"), BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
