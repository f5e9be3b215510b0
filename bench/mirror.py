#!/usr/bin/env python3
"""Mirror volumes across a slow link: metadata lag, block copying, and what the change log
costs the primary.

    sudo bench/mirror.py [--canaries N] [--burst N] [--gib G] [--rate 400mbit] [--delay-ms 30]
                         [--creates N] [--rounds R] [--parts lag,burst,writes,blocks,cost]
                         [--engines sqlite,redis,postgresql] [--write-ops N] [--store-on-disk]

Region A is the root network namespace (Redis, PostgreSQL and Ceph with radosgw from
tests/servers.py, the primary's mount); region B is a network namespace behind a veth pair
(tests/regions.py) where the replicator runs and the mirror's engine (SQLite) and store (a
directory on tmpfs) live. The replicator reaches the primary's Redis through a forward that
holds every chunk --delay-ms each way (this kernel has no netem), and radosgw over the
veth, shaped to --rate with tbf.

  lag     a canary writes a file on the primary every 100 ms; the time until its entry is in
          the mirror's engine (polled every 5 ms in one read transaction), median and p99,
          with the replicator's default --interval (0.2 s)
  burst   --burst creates on the primary as fast as one writer goes; the mirror's lag when
          the burst ends (until it holds the primary's last commit)
  writes  a mount of the mirror in region B writing through the primary (`mount --primary`)
          against the primary's own mount: creates/s, a 1 KiB file written and read back at
          once, a stat once the mirror caught up
  blocks  --gib GiB written to a primary on radosgw; `tierfs mirror --once` with a store of
          the mirror's own copies it across the link: MB/s against the link's rate measured
          the same way (one TCP stream of zeros... and 16 of them, A to B)
  cost    creates per second on the primary with and without a change log, on SQLite,
          Redis and PostgreSQL (local servers, no link), rounds interleaved

Writes docs/benchmarks.md ("Mirror volumes").
"""
import argparse
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
from doc_section import write_section  # noqa: E402
from regions import RegionLink  # noqa: E402

TIERFS = os.environ.get("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
BEGIN, END = "<!-- BEGIN mirror (bench/mirror.py) -->", "<!-- END mirror (bench/mirror.py) -->"
# The cost part has a section of its own: it is run alone, more often than the long parts.
COST_BEGIN, COST_END = ("<!-- BEGIN mirror-cost (bench/mirror.py --parts cost) -->",
                        "<!-- END mirror-cost (bench/mirror.py --parts cost) -->")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def sh(*cmd, check=True, env=None):
    r = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s %s" % (" ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Bench:
    def __init__(self, a):
        self.a = a
        self.mounts, self.procs, self.rows, self.cost_rows = [], [], [], []
        self.redis = self.pg = self.ceph = None
        self.link = RegionLink(delay_ms=a.delay_ms, rate=a.rate)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        a = self.a
        os.environ["TIERFS_TEST_EXTRA_ADDR"] = self.link.net.host_addr
        os.environ["TIERFS_TEST_PORT_OFFSET"] = "500"
        os.environ["TIERFS_CEPH_BLUESTORE"] = "1"
        import servers  # reads the environment above
        self.srv = servers
        self.work = self.tmpfs = None
        self.work = tempfile.mkdtemp(prefix="tierfs-mirror-bench-")
        os.chmod(self.work, 0o755)  # PostgreSQL's files are its own user's
        self.tmpfs = os.path.join(self.work, "b")
        os.makedirs(self.tmpfs)
        if not a.store_on_disk:
            sh("mount", "-t", "tmpfs", "-o", "size=%dg" % (a.gib + 2), "tierfs-mirror-bench", self.tmpfs)
        self.redis = servers.Redis(os.path.join(self.work, "srv")).start()
        self.pg = servers.Postgres(os.path.join(self.work, "srv")).start() if "cost" in a.parts else None
        self.ceph = servers.Ceph(os.path.join(self.work, "srv"), bluestore=True).start() if "blocks" in a.parts \
            else None
        self.env = dict(os.environ, TIERFS_ACCESS_KEY=servers.S3_ACCESS_KEY, TIERFS_SECRET_KEY=servers.S3_SECRET_KEY)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for m in self.mounts:
            sh(TIERFS, "umount", m, check=False)
            sh("umount", "-l", m, check=False)
        for s in (self.ceph, self.pg, self.redis):
            if s:
                try:
                    s.stop()
                except Exception as e:  # noqa: BLE001
                    log("stopping a server:", e)
        if getattr(self, "tmpfs", None):
            if not self.a.store_on_disk:
                sh("umount", "-l", self.tmpfs, check=False)
        self.link.close()
        if getattr(self, "work", None):
            shutil.rmtree(self.work, ignore_errors=True)

    # ---- volumes ----------------------------------------------------------------------------

    def volume(self, name, meta, *storage, changelog=True):
        args = [TIERFS, "format", meta, name, "--force"] + list(storage or
                                                              ["--storage", "file", "--bucket",
                                                               os.path.join(self.work, name + "-bucket")])
        if changelog:
            args += ["--changelog-hours", "1"]
        sh(*args, env=self.env)
        mnt = os.path.join(self.work, name + "-mnt")
        os.makedirs(mnt, exist_ok=True)
        sh(TIERFS, "mount", "-d", meta, mnt, "--cache-dir", os.path.join(self.work, name + "-cache"),
           "--log", mnt + ".log", env=self.env)
        self.mounts.append(mnt)
        return mnt

    def umount(self, mnt):
        sh(TIERFS, "umount", mnt)
        self.mounts.remove(mnt)

    def remote(self, url):
        """The primary's Redis URL as region B reaches it: through the slow forward."""
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        return url.replace(host_port, self.link.forward(int(host_port.rsplit(":", 1)[1])))

    def replicator(self, primary, mirror_db, *extra):
        logf = open(mirror_db + ".replicator.log", "w")
        p = subprocess.Popen(self.link.prefix + [TIERFS, "mirror", self.remote(primary), "sqlite3://" + mirror_db]
                             + list(extra), stdout=logf, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(p)
        return p

    def engine_size(self, url, reclaimed=False):
        """SQLite: bytes of the database file (after the unmount's checkpoint), or with
        reclaimed the bytes of its pages in use (the file keeps freed pages for reuse);
        PostgreSQL: pg_database_size (reclaimed: after VACUUM FULL); Redis: the number of
        keys (its memory is per server, not per DB)."""
        if url.startswith("sqlite3://"):
            path = url[len("sqlite3://"):]
            if reclaimed:
                db = sqlite3.connect(path)
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                (pages,), (free,), (size,) = (db.execute("PRAGMA %s" % p).fetchone()
                                              for p in ("page_count", "freelist_count", "page_size"))
                db.close()
                return (pages - free) * size
            return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        if url.startswith("redis://"):
            return int(sh("redis-cli", "-u", url, "DBSIZE").stdout.strip())
        db = url.rsplit("/", 1)[1]
        env = dict(os.environ, PGPASSWORD="tierfs-test-pw")
        psql = ["psql", "-h", "127.0.0.1", "-p", str(self.pg.port), "-U", "postgres", "-tA"]
        if reclaimed:
            sh(*(psql + ["-d", db, "-c", "VACUUM FULL"]), env=env)
        out = sh(*(psql + ["-c", "SELECT pg_database_size('%s')" % db]), env=env).stdout
        return int(out.strip())

    # ---- parts --------------------------------------------------------------------------------

    def dir_ino(self, db, name):
        c = sqlite3.connect(db)
        try:
            for (k, v) in c.execute("SELECT k, v FROM kv WHERE k = ?", (b"A" + (1).to_bytes(8, "big") + b"D" +
                                                                        name.encode(),)):
                return int.from_bytes(v[:8], "big")
        finally:
            c.close()

    def lag_and_burst(self):
        primary = self.redis.url() + "/1"
        sh("redis-cli", "-u", primary, "FLUSHDB")
        mnt = self.volume("prim", primary)
        for d in ("canary", "burst"):
            os.mkdir(os.path.join(mnt, d))
        mdb = os.path.join(self.work, "mirror.db")
        sh(*(self.link.prefix + [TIERFS, "mirror", self.remote(primary), "sqlite3://" + mdb, "--once"]), env=self.env)
        canary_ino, burst_ino = self.dir_ino(mdb, "canary"), self.dir_ino(mdb, "burst")
        r = self.replicator(primary, mdb)
        db = sqlite3.connect(mdb, isolation_level=None, check_same_thread=False)

        def present(parent, name):
            return db.execute("SELECT 1 FROM kv WHERE k = ?", (b"A" + parent.to_bytes(8, "big") + b"D" +
                                                                  name.encode(),)).fetchone() is not None

        if "lag" in self.a.parts:
            lags = []
            for i in range(self.a.canaries):
                t0 = time.monotonic()
                name = "c%05d" % i
                with open(os.path.join(mnt, "canary", name), "wb") as f:
                    f.write(b"x")
                written = time.monotonic()
                while not present(canary_ino, name):
                    time.sleep(0.005)
                    if time.monotonic() - written > 60:
                        raise RuntimeError("canary %s not on the mirror after 60 s" % name)
                lags.append(time.monotonic() - written)
                time.sleep(max(0, 0.1 - (time.monotonic() - t0)))
            log("canary lag: median %.3f s, p99 %.3f s, max %.3f s" % (statistics.median(lags), pct(lags, 99),
                                                                        max(lags)))
            self.rows.append(("metadata lag, a file every 100 ms (%d canaries)" % len(lags),
                              "median %.3f s, p90 %.3f s, p99 %.3f s, max %.3f s" %
                              (statistics.median(lags), pct(lags, 90), pct(lags, 99), max(lags)), "p99 < 1 s"))
        if "burst" in self.a.parts:
            t0 = time.monotonic()
            base = os.path.join(mnt, "burst")
            for i in range(self.a.burst):
                os.close(os.open(os.path.join(base, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
            ended = time.monotonic()
            rate = self.a.burst / (ended - t0)
            last = "f%06d" % (self.a.burst - 1)
            while not present(burst_ino, last):
                time.sleep(0.005)
            caught = time.monotonic() - ended
            log("burst: %d creates at %.0f/s; the mirror held the last %.2f s after it" % (self.a.burst, rate, caught))
            self.rows.append(("burst of %d creates (%.0f creates/s on the primary)" % (self.a.burst, rate),
                              "mirror holds the last create %.2f s after the burst ended" % caught, ""))
        db.close()
        if "writes" in self.a.parts:
            self.writes(primary, mnt, mdb)
        r.terminate()
        r.wait()
        self.umount(mnt)

    def writes(self, primary, pmnt, mdb):
        """A mount of the mirror in region B writing through the primary (--primary, across
        the slow link) against the primary's own mount: creates, a small file written and
        read back at once, and a stat once the mirror caught up."""
        wmnt = os.path.join(self.work, "mirror-writer")
        os.makedirs(wmnt, exist_ok=True)
        sh(*(self.link.prefix + [TIERFS, "mount", "-d", "sqlite3://" + mdb, wmnt, "--primary", self.remote(primary),
                                  "--cache-dir", wmnt + ".cache", "--log", wmnt + ".log"]), env=self.env)
        self.mounts.append(wmnt)
        res = {}
        for where, root in (("primary", pmnt), ("mirror", wmnt)):
            d = os.path.join(root, "w-" + where)
            os.mkdir(d)
            n = self.a.write_ops
            t0 = time.monotonic()
            for i in range(n):
                os.close(os.open(os.path.join(d, "e%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
            res[where, "creates"] = n / (time.monotonic() - t0)
            wr, rd = [], []
            for i in range(n // 4):
                p = os.path.join(d, "s%05d" % i)
                t0 = time.monotonic()
                with open(p, "wb") as f:
                    f.write(b"y" * 1024)
                t1 = time.monotonic()
                with open(p, "rb") as f:
                    assert f.read() == b"y" * 1024
                t2 = time.monotonic()
                wr.append(t1 - t0)
                rd.append(t2 - t1)
            res[where, "write"], res[where, "read"] = statistics.median(wr), statistics.median(rd)
            time.sleep(3)  # the mirror catches up; the kernel's entries (1 s) expire
            st = []
            for i in range(0, n, max(1, n // 50)):
                t0 = time.monotonic()
                os.stat(os.path.join(d, "e%05d" % i))
                st.append(time.monotonic() - t0)
            res[where, "stat"] = statistics.median(st)
        log("writes: %r" % res)
        self.rows.append(("creates/s: primary's mount / mirror's mount writing through it (--primary, %d ms away)" %
                          self.a.delay_ms, "%.0f / %.1f" % (res["primary", "creates"], res["mirror", "creates"]), ""))
        self.rows.append(("1 KiB file written and closed, then read back at once (median): primary's mount / "
                          "mirror's", "%.1f ms + %.1f ms / %.1f ms + %.1f ms" %
                          (1e3 * res["primary", "write"], 1e3 * res["primary", "read"], 1e3 * res["mirror", "write"],
                           1e3 * res["mirror", "read"]), "reads its own writes"))
        self.rows.append(("stat once the mirror caught up (median; the kernel's entry expired): primary's mount / "
                          "mirror's",
                          "%.2f ms / %.2f ms" % (1e3 * res["primary", "stat"], 1e3 * res["mirror", "stat"]),
                          "reads stay local"))
        self.umount(wmnt)

    def link_rate(self, streams):
        """MB/s of `streams` TCP streams of zeros from A to B for 5 s (the link as measured)."""
        srv = socket.socket()
        srv.bind((self.link.net.host_addr, 0))
        srv.listen(64)
        port = srv.getsockname()[1]
        stop = time.monotonic() + 5

        def serve():
            for _ in range(streams):
                c, _ = srv.accept()
                threading.Thread(target=pump, args=(c,), daemon=True).start()

        def pump(c):
            buf = bytes(1 << 16)
            try:
                while time.monotonic() < stop:
                    c.sendall(buf)
            except OSError:
                pass
            c.close()

        threading.Thread(target=serve, daemon=True).start()
        code = ("import socket,threading,time\n"
                "n=[0]\nl=threading.Lock()\n"
                "def rd():\n s=socket.create_connection((%r,%d))\n while True:\n  b=s.recv(1<<20)\n"
                "  if not b: break\n  with l: n[0]+=len(b)\n"
                "ts=[threading.Thread(target=rd) for _ in range(%d)]\nt=time.monotonic()\n"
                "[x.start() for x in ts]\n[x.join() for x in ts]\nprint(n[0]/(time.monotonic()-t)/1e6)\n"
                % (self.link.net.host_addr, port, streams))
        out = sh(*(self.link.prefix + [sys.executable, "-c", code])).stdout
        srv.close()
        return float(out.strip())

    def blocks(self):
        primary = self.redis.url() + "/2"
        sh("redis-cli", "-u", primary, "FLUSHDB")
        s3 = "http://%s:%d/mirbench" % (self.link.net.host_addr, self.ceph.rgw_port)
        mnt = self.volume("prims3", primary, "--storage", "s3", "--bucket", s3)
        mdb = os.path.join(self.work, "mirror-blocks.db")
        bucket = os.path.join(self.tmpfs, "mirror-bucket")
        sh(*(self.link.prefix + [TIERFS, "mirror", self.remote(primary), "sqlite3://" + mdb, "--once", "--storage",
                                 "file", "--bucket", bucket]), env=self.env)
        files = max(1, self.a.gib * 4)
        chunk = os.urandom(1 << 20)
        for i in range(files):
            with open(os.path.join(mnt, "d%03d" % i), "wb") as f:
                for _ in range(256):
                    f.write(chunk)
        sh("sync")
        total = files * (256 << 20)
        t0 = time.monotonic()
        cpu0 = os.times()
        out = sh(*(self.link.prefix + [TIERFS, "mirror", self.remote(primary), "sqlite3://" + mdb, "--once",
                                       "--json"]), env=self.env).stdout
        wall = time.monotonic() - t0
        cpu1 = os.times()
        res = json.loads(out.strip().splitlines()[-1])
        if res["bytes"] < total:
            raise RuntimeError("copied %d bytes, expected %d" % (res["bytes"], total))
        cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
        one, many = self.link_rate(1), self.link_rate(16)
        rate = res["bytes"] / wall / 1e6
        log("blocks: %.1f MB/s (%d objects in %.1f s); link %.1f MB/s (1 stream), %.1f MB/s (16)" %
            (rate, res["objects"], wall, one, many))
        self.rows.append(("%d GiB of new data, copied into the mirror's own store" % (total >> 30),
                          "%.1f MB/s (%d objects in %.1f s, %.2f CPU s/GiB); the link: %.1f MB/s with 16 streams, "
                          "%.1f MB/s with 1 (%.0f%% of 16)" % (rate, res["objects"], wall, cpu / (total / 2**30),
                                                               many, one, 100 * rate / many),
                          "within 80% of the link"))
        self.umount(mnt)

    def cost(self):
        """Creates/s with and without the change log, paired: each round formats and mounts
        both volumes at once and alternates blocks of creates between them (the first block
        of a round on the other volume each time), so both see the same moments of the
        machine; a round's cost is its two totals' ratio."""
        engines = [("SQLite", lambda n: "sqlite3://" + os.path.join(self.work, n + ".db")),
                   ("Redis", lambda n: self.redis.url() + "/%d" % (3 + len(n) % 5)),
                   ("PostgreSQL", lambda n: self.pg.url("mb_" + n.replace("-", "_")))]
        block = 500
        for ename, url_of in engines:
            if ename.lower() not in self.a.engines:
                continue
            results = {True: [], False: []}
            costs = []
            # The engine's size after the round's creates: with the log's records single (as
            # written), packed into blocks (`changelog --compact`, what each client's background
            # work does a minute later), and without a log; each once the space freed is
            # reclaimed (SQLite: its pages in use; PostgreSQL: after VACUUM FULL).
            sizes = {True: [], False: [], "single": []}
            for rnd in range(self.a.rounds):
                urls, mnts, secs = {}, {}, {True: 0.0, False: 0.0}
                for logged in (True, False):
                    name = "cost-%s-%s" % (ename.lower(), "log" if logged else "nolog")
                    url = urls[logged] = url_of(name)
                    if url.startswith("redis"):
                        sh("redis-cli", "-u", url, "FLUSHDB")
                    if url.startswith("postgres"):
                        db = url.rsplit("/", 1)[1]
                        env = dict(os.environ, PGPASSWORD="tierfs-test-pw")
                        psql = ["psql", "-h", "127.0.0.1", "-p", str(self.pg.port), "-U", "postgres", "-q", "-c"]
                        sh(*(psql + ["DROP DATABASE IF EXISTS %s" % db]), env=env)
                        sh(*(psql + ["CREATE DATABASE %s" % db]), env=env)
                    mnts[logged] = self.volume(name, url, changelog=logged)
                    os.mkdir(os.path.join(mnts[logged], "r"))
                for b in range(max(1, self.a.creates // block)):
                    for logged in ((True, False) if (rnd + b) % 2 == 0 else (False, True)):
                        d = os.path.join(mnts[logged], "r")
                        t0 = time.monotonic()
                        for i in range(b * block, (b + 1) * block):
                            os.close(os.open(os.path.join(d, "f%06d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
                        secs[logged] += time.monotonic() - t0
                n = max(1, self.a.creates // block) * block
                for logged in (True, False):
                    results[logged].append(n / secs[logged])
                    self.umount(mnts[logged])
                costs.append(100 * (secs[False] / secs[True] - 1))
                log("%s round %d: %.0f creates/s with the log, %.0f without: %+.1f%%" %
                    (ename, rnd, results[True][-1], results[False][-1], costs[-1]))
                sizes["single"].append(self.engine_size(urls[True], reclaimed=True))
                sh(TIERFS, "changelog", urls[True], "--compact", "0", env=self.env)
                for logged in (True, False):
                    sizes[logged].append(self.engine_size(urls[logged], reclaimed=True))
            on, off = statistics.median(results[True]), statistics.median(results[False])
            size_on, size_off = statistics.median(sizes[True]), statistics.median(sizes[False])
            size_single = statistics.median(sizes["single"])
            self.cost_rows.append(("%s after %d creates, change log as written / packed into blocks / off" %
                                   ({"SQLite": "database size", "Redis": "keys", "PostgreSQL": "database size"}[ename],
                                    self.a.creates),
                                   "%s / %s / %s: %.2fx as written, %.2fx packed" %
                                   (fmt_size(size_single, ename), fmt_size(size_on, ename), fmt_size(size_off, ename),
                                    size_single / max(size_off, 1), size_on / max(size_off, 1)), "less than 2x"))
            self.cost_rows.append(("creates/s on %s, change log on / off (median of %d paired rounds)" %
                                   (ename, len(costs)),
                                   "%.0f / %.0f; cost per round: median %+.1f%% (%+.1f%% to %+.1f%%)" %
                                   (on, off, statistics.median(costs), min(costs), max(costs)), "cost < 10%"))


def fmt_size(v, engine):
    return "%d keys" % v if engine == "Redis" else "%.1f MiB" % (v / 2**20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--canaries", type=int, default=300)
    ap.add_argument("--burst", type=int, default=100000)
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--rate", default="400mbit")
    ap.add_argument("--delay-ms", type=int, default=30)
    ap.add_argument("--creates", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default="lag,burst,writes,blocks,cost")
    ap.add_argument("--write-ops", type=int, default=200, help="creates for the writes part (a quarter as many "
                    "small files written and read back)")
    ap.add_argument("--store-on-disk", action="store_true", help="the mirror's store on disk, not tmpfs (--gib "
                    "larger than memory allows)")
    ap.add_argument("--engines", default="sqlite,redis,postgresql", help="the engines the cost part measures")
    a = ap.parse_args()
    a.parts = set(a.parts.split(","))
    a.engines = set(a.engines.lower().split(","))
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces, tmpfs, mounts)")
    b = Bench(a)
    try:
        if a.parts & {"lag", "burst", "writes"}:
            b.lag_and_burst()
        if "blocks" in a.parts:
            b.blocks()
        if "cost" in a.parts:
            b.cost()
    finally:
        b.close()
    cmd = "sudo bench/mirror.py " + " ".join(sys.argv[1:])
    doc = os.path.join(REPO, "docs", "benchmarks.md")
    if b.rows:
        lines = [BEGIN, "## Mirror volumes: lag across a slow link, block copying", "",
                 "`%s` (%s, %d cores). Region B is a network namespace behind a veth pair shaped to %s with tbf;"
                 " the replicator there reaches the primary's Redis through a forward that holds every chunk"
                 " %d ms each way (no netem in this kernel), radosgw directly over the shaped veth. The mirror's"
                 " engine is SQLite in region B; the replicator runs with its defaults (--interval 0.2,"
                 " --batch 1000, --threads 16)." % (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(), a.rate,
                                                      a.delay_ms), "",
                 "| measure | result | goal |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % r for r in b.rows]
        lines.append(END)
        write_section(doc, BEGIN, END, "\n".join(lines))
        print("\n".join(lines))
    if b.cost_rows:
        lines = [COST_BEGIN, "## The change log's cost on the primary", "",
                 "`%s` (%s, %d cores). Each round formats two volumes on the engine, one with"
                 " `--changelog-hours 1` and one without, mounts both, and alternates blocks of 500 creates"
                 " of empty files (open O_CREAT, close; one thread) between them; a round's cost is the"
                 " ratio of its two totals." % (cmd, time.strftime("%Y-%m-%d"), os.cpu_count()), "",
                 "| measure | result | goal |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % r for r in b.cost_rows]
        lines.append(COST_END)
        write_section(doc, COST_BEGIN, COST_END, "\n".join(lines))
        print("\n".join(lines))


if __name__ == "__main__":
    main()
