#!/usr/bin/env python3
"""Cache-group benchmark: members as separate hosts (network namespaces) on one machine.

    bench/group.py                 full run (512 MiB data set, up to 4 members, 3 rounds)
    QUICK=1 bench/group.py         128 MiB, 1 round

Starts Redis and Ceph (bluestore OSD, radosgw) on the address of a bridge every namespace
reaches, formats a volume in S3, writes a data set through a mount outside the group, then:

  (a) store traffic: 3 members read the whole data set at once, cold, with and without
      --cache-group; object-store GETs and bytes summed over the members (tierfs.stats);
  (b) scaling: 1..MEMBERS members in a group read the data set at once, cold and again
      warm (page cache dropped, so the members' caches and the group serve it); aggregate
      MiB/s = members x data set / wall time;
  (c) a dead owner: 3 members; `warmup --cache-group` puts every block in its owner's
      cache, then a fresh member reads every block once with pread, timing each, with all owners
      alive, after one owner is killed (SIGKILL), and after one is stopped (SIGSTOP: a hung
      owner), each time with fresh caches on member 1.

Rounds of (a) and (b) interleave. Writes the section between <!-- bench:group:begin -->
and <!-- bench:group:end --> of docs/benchmarks.md and raw results to
bench-results/group-<timestamp>/. Needs root (namespaces, mounts, drop_caches).
Environment: QUICK ROUNDS MEMBERS FILES FILE_MIB TIERFS BENCH_DOC BENCH_OUT.
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from doc_section import write_section  # noqa: E402 (bench/, the script's own directory)
from netns import Network  # noqa: E402

QUICK = os.environ.get("QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS") or (1 if QUICK else 3))
MEMBERS = int(os.environ.get("MEMBERS") or 4)
FILES = int(os.environ.get("FILES") or 8)
FILE_MIB = int(os.environ.get("FILE_MIB") or (16 if QUICK else 64))
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
OUT = os.path.join(os.environ.get("BENCH_OUT") or os.path.join(REPO, "bench-results"),
                   time.strftime("group-%Y%m%d-%H%M%S"))
BEGIN, END = "<!-- bench:group:begin -->", "<!-- bench:group:end -->"
MiB = 1 << 20


def log(*a):
    print("[group.py %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def sh(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s %s" % (" ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r


class Bench:
    def __init__(self):
        self.net = Network(MEMBERS + 1)  # the last namespace reads in (c)
        os.environ["TIERFS_TEST_EXTRA_ADDR"] = self.net.host_addr
        os.environ["TIERFS_TEST_PORT_OFFSET"] = "400"
        os.environ["TIERFS_CEPH_BLUESTORE"] = "1"
        import servers  # reads the environment above
        self.servers_mod = servers
        self.work = tempfile.mkdtemp(prefix="tierfs-group-bench-")
        self.cache_tmpfs = os.path.join(self.work, "caches")
        os.makedirs(self.cache_tmpfs)
        sh("mount", "-t", "tmpfs", "-o", "size=8g", "tierfs-group-bench", self.cache_tmpfs)
        self.redis = servers.Redis(os.path.join(self.work, "srv")).start()
        self.ceph = servers.Ceph(os.path.join(self.work, "srv")).start()
        host = self.net.host_addr
        self.meta = "redis://%s:%d/3" % (host, self.redis.port)
        self.s3 = "http://%s:%d/groupbench" % (host, self.ceph.rgw_port)
        self.env = dict(os.environ, TIERFS_ACCESS_KEY=servers.S3_ACCESS_KEY, TIERFS_SECRET_KEY=servers.S3_SECRET_KEY)
        self.mounts = {}  # mountpoint -> pid
        self.results = []

    def close(self):
        for mnt in list(self.mounts):
            self.umount(mnt, kill=True)
        try:
            self.ceph.stop()
            self.redis.stop()
        finally:
            sh("umount", "-l", self.cache_tmpfs, check=False)
            self.net.close()
            shutil.rmtree(self.work, ignore_errors=True)

    # ---- mounts ----------------------------------------------------------------------------

    def mount(self, i, name, *opts, cache_size="4G"):
        """Member i (namespace i) mounts on WORK/name with its own cache folder."""
        mnt = os.path.join(self.work, name)
        os.makedirs(mnt, exist_ok=True)
        cache = os.path.join(self.cache_tmpfs, name)
        r = sh(*(self.net.prefix(i) + [TIERFS, "mount", "-d", self.meta, mnt, "--cache-dir", cache,
                                        "--cache-size", cache_size, "--log", mnt + ".log"] + list(opts)), env=self.env)
        pid = int(sh("pgrep", "-f", "tierfs mount -d %s %s " % (self.meta, mnt)).stdout.split()[0])
        self.mounts[mnt] = pid
        return mnt

    def umount(self, mnt, kill=False):
        pid = self.mounts.pop(mnt)
        if kill:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            sh("fusermount3", "-uz", mnt, check=False)
        else:
            sh("fusermount3", "-u", mnt)
        for _ in range(600):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.1)
        shutil.rmtree(os.path.join(self.cache_tmpfs, os.path.basename(mnt)), ignore_errors=True)
        # Keep the member's log with the results (the work folder goes at the end).
        logs = os.path.join(OUT, "logs")
        os.makedirs(logs, exist_ok=True)
        self.unmounts = getattr(self, "unmounts", 0) + 1
        if os.path.exists(mnt + ".log"):
            shutil.move(mnt + ".log", os.path.join(logs, "%03d-%s.log" % (self.unmounts, os.path.basename(mnt))))

    def stats(self, mnt):
        return json.loads(os.getxattr(mnt, "tierfs.stats"))

    def wait_ring(self, mnts, n):
        for _ in range(300):
            if all(len(self.stats(m)["group"]["ring"]) == n for m in mnts):
                return
            time.sleep(0.1)
        raise RuntimeError("members do not see %d serving members" % n)

    def drop(self):
        sh("sync")
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        sh("ceph", "-c", self.ceph.conf, "tell", "osd.0", "cache", "drop", check=False, timeout=60)

    # ---- workloads -------------------------------------------------------------------------

    def write_data(self):
        # A 5 s session timeout: members read the group every second.
        sh(TIERFS, "format", self.meta, "groupbench", "--storage", "s3", "--bucket", self.s3,
           "--session-timeout", "5", env=self.env)
        w = self.mount(MEMBERS, "writer", cache_size="0")
        self.files = []
        for k in range(FILES):
            name = "data-%d" % k
            with open(os.path.join(w, name), "wb") as f:
                for _ in range(FILE_MIB):
                    f.write(os.urandom(MiB))
            self.files.append(name)
        self.umount(w)
        self.data_bytes = FILES * FILE_MIB * MiB

    def read_all(self, mnts):
        """Every member reads every file at once (cat); returns wall seconds."""
        t0 = time.monotonic()
        procs = [subprocess.Popen(["cat"] + [os.path.join(m, f) for f in self.files], stdout=subprocess.DEVNULL)
                 for m in mnts]
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError("a read failed")
        return time.monotonic() - t0

    def members(self, n, group, tag):
        opts = ["--cache-group", "g"] if group else []
        mnts = [self.mount(i, "%s-m%d" % (tag, i), *opts) for i in range(n)]
        if group:
            self.wait_ring(mnts, n)
        return mnts

    def record(self, **kw):
        self.results.append(kw)
        log(json.dumps(kw))

    def traffic(self, r):
        for group in ((False, True) if r % 2 else (True, False)):
            mnts = self.members(3, group, "t%d" % r)
            self.drop()
            secs = self.read_all(mnts)
            st = [self.stats(m)["store"] for m in mnts]
            self.record(kind="traffic", round=r, group=group, gets=sum(s["gets"] for s in st),
                        bytes=sum(s["bytes_downloaded"] for s in st), secs=secs,
                        mibs=3 * self.data_bytes / MiB / secs)
            for m in mnts:
                self.umount(m)

    def scaling(self, r):
        order = list(range(1, MEMBERS + 1))
        if r % 2 == 0:
            order.reverse()
        for n in order:
            mnts = self.members(n, True, "s%d-%d" % (r, n))
            self.drop()
            cold = self.read_all(mnts)
            st = [self.stats(m) for m in mnts]
            gets = sum(x["store"]["gets"] for x in st)
            hedged = sum(x["group"]["hedged"] for x in st)
            failed = sum(x["group"]["peer_failures"] for x in st)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            warm = self.read_all(mnts)
            self.record(kind="scaling", round=r, members=n, gets=gets, hedged=hedged, failed=failed,
                        cold_mibs=n * self.data_bytes / MiB / cold, warm_mibs=n * self.data_bytes / MiB / warm)
            for m in mnts:
                self.umount(m)

    def warm_group(self, mnt):
        """Every block into its owner's cache (tierfs warmup --cache-group from one member)."""
        sh(TIERFS, "warmup", "--cache-group", *[os.path.join(mnt, f) for f in self.files])

    def dead_owner(self):
        mnts = self.members(3, True, "d")
        self.warm_group(mnts[0])
        reader_ns = MEMBERS
        path_of = lambda m: [os.path.join(m, f) for f in self.files]  # noqa: E731
        for case in ("alive", "killed", "stopped"):
            if case == "killed":
                victim = mnts[2]
                os.kill(self.mounts[victim], signal.SIGKILL)
            if case == "stopped":
                # A new member 2 owns what the killed one did; then it hangs.
                mnts[2] = self.mount(2, "d-m2b", "--cache-group", "g")
                self.wait_ring(mnts[:2] + [mnts[2]], 3)
                self.warm_group(mnts[0])
                os.kill(self.mounts[mnts[2]], signal.SIGSTOP)
            reader = self.mount(reader_ns, "d-reader-" + case, "--cache-group", "g", "--no-sharing")
            time.sleep(1.5)  # its first ring read
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            lat = []
            for p in path_of(reader):
                fd = os.open(p, os.O_RDONLY)
                try:
                    for off in range(0, FILE_MIB * MiB, 4 * MiB):
                        t0 = time.monotonic()
                        os.pread(fd, 4 * MiB, off)
                        lat.append((time.monotonic() - t0) * 1000)
                finally:
                    os.close(fd)
            st = self.stats(reader)
            lat.sort()
            self.record(kind="dead_owner", case=case, blocks=len(lat), p50_ms=lat[len(lat) // 2],
                        p90_ms=lat[int(len(lat) * 0.9)], max_ms=lat[-1], sum_s=sum(lat) / 1000,
                        store_gets=st["store"]["gets"], from_peers=st["group"]["peer_hits"],
                        unreachable=st["group"]["unreachable"], skipped_down=st["group"]["skipped_down"])
            self.umount(reader)
        for m in mnts:
            self.umount(m, kill=True)

    # ---- report ----------------------------------------------------------------------------

    def report(self, cmdline):
        def med(xs):
            return statistics.median(xs) if xs else float("nan")

        def cell(xs, fmt="%.0f"):
            if not xs:
                return ""
            return (fmt + " (" + fmt + "–" + fmt + ")") % (med(xs), min(xs), max(xs))
        blocks = FILES * ((FILE_MIB + 3) // 4)
        s = [BEGIN, "## Cache group: members on one machine, data in S3 (radosgw)", "",
             "Generated by `bench/group.py` (see the script's header); do not edit by hand, rerun the script.", "",
             "- Command: `%s`" % cmdline,
             "- Date: %s; %d cores; Linux %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
                                              os.uname().release),
             "- Members are network namespaces joined by veth pairs to a bridge, each with its own cache "
             "folder on one tmpfs; Redis and radosgw listen on the bridge; bluestore OSD over a file. "
             "All members, the store and the metadata server share this machine's cores, so the "
             "throughput here is bounded by CPU, not by a network.",
             "- Data set: %d files of %d MiB (%d blocks of 4 MiB); rounds: %d, interleaved; cells are "
             "median (min–max). Before every cold read: `drop_caches` and the OSD's caches dropped." % (
                 FILES, FILE_MIB, blocks, ROUNDS), ""]
        t = [x for x in self.results if x["kind"] == "traffic"]
        s += ["### (a) Store traffic: 3 members read the whole data set at once, cold", "",
              "| | store GETs | MiB from the store | aggregate MiB/s |", "|---|---:|---:|---:|"]
        for g, name in ((False, "no group (each member its own caches)"), (True, "one cache group")):
            xs = [x for x in t if x["group"] == g]
            s.append("| %s | %s | %s | %s |" % (name, cell([x["gets"] for x in xs]),
                                                cell([x["bytes"] / MiB for x in xs]), cell([x["mibs"] for x in xs])))
        s += ["", "### (b) Scaling: n members of one group read the data set at once", "",
              "| members | store GETs | asks hedged (store asked too) | asks failed | cold, aggregate MiB/s | "
              "warm (members' caches), aggregate MiB/s |",
              "|---:|---:|---:|---:|---:|---:|"]
        sc = [x for x in self.results if x["kind"] == "scaling"]
        for n in range(1, MEMBERS + 1):
            xs = [x for x in sc if x["members"] == n]
            s.append("| %d | %s | %s | %s | %s | %s |" % (
                n, cell([x["gets"] for x in xs]), cell([x.get("hedged", 0) for x in xs]),
                cell([x.get("failed", 0) for x in xs]), cell([x["cold_mibs"] for x in xs]),
                cell([x["warm_mibs"] for x in xs])))
        d = [x for x in self.results if x["kind"] == "dead_owner"]
        s += ["", "### (c) A read when an owner is dead or hung", "",
              "A fresh `--no-sharing` member reads every 4 MiB block once (pread), after `tierfs warmup "
              "--cache-group` put each block in its owner's cache. One run of each case. A killed "
              "owner refuses the first connection and is then skipped for 10 s; a hung owner "
              "(SIGSTOP) makes a read wait for the 1 s hedge before the store is asked, until it "
              "misses its heartbeats and leaves every member's ring (2.5 heartbeats: 2.5 s with "
              "this volume's 5 s session timeout).", "",
              "| owner of a third of the blocks | p50 ms | p90 ms | max ms | total s | from peers | "
              "from the store | failed asks | skipped (owner marked down) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        names = {"alive": "alive", "killed": "killed (SIGKILL)", "stopped": "hung (SIGSTOP)"}
        for x in d:
            s.append("| %s | %.1f | %.1f | %.0f | %.2f | %d | %d | %d | %d |" % (
                names[x["case"]], x["p50_ms"], x["p90_ms"], x["max_ms"], x["sum_s"], x["from_peers"],
                x["store_gets"], x["unreachable"], x["skipped_down"]))
        s += ["", END]
        write_section(DOC, BEGIN, END, "\n".join(s))


def main():
    if os.geteuid() != 0:
        sys.exit("group.py: must run as root")
    os.makedirs(OUT, exist_ok=True)
    # A SIGTERM (timeout, kill) still runs the cleanup below: servers, mounts, namespaces.
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    cmdline = " ".join(["bench/group.py"] + sys.argv[1:])
    if QUICK:
        cmdline = "QUICK=1 " + cmdline
    b = Bench()
    try:
        log("writing %d x %d MiB" % (FILES, FILE_MIB))
        b.write_data()
        for r in range(1, ROUNDS + 1):
            b.traffic(r)
            b.scaling(r)
        b.dead_owner()
    finally:
        json.dump(b.results, open(os.path.join(OUT, "results.json"), "w"), indent=1)
        b.close()
    b.report(cmdline)
    log("updated", DOC, "; results in", OUT)


if __name__ == "__main__":
    main()
