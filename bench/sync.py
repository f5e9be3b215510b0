#!/usr/bin/env python3
"""tierfs sync against rclone sync and aws s3 sync, side by side in one run, on the same
radosgw (tests/servers.py: Ceph on a bluestore OSD over a sparse file) from the same local
tmpfs tree; and the memory of a listing as the directory grows.

    bench/sync.py [--files N] [--big N] [--big-mib M] [--repeat R] [--listing N1,N2]

Measures, interleaving the tools within each repetition (order rotated):
  - small: N files of 100 KiB, the first copy into an empty prefix, then an incremental
    round after 1% of the files changed (wall seconds, CPU seconds of the tool);
  - big: N files of M MiB, the first copy;
  - listing: a TierFS volume directory of N1, then N2 entries, synced to an up-to-date local
    copy (nothing to copy: listing and comparing only): seconds and peak RSS of tierfs sync;
    and the two copies that made them (a local directory into the volume, the volume out
    to a local directory), once each: whether copying N files holds memory per file.
Writes the tables to docs/benchmarks.md ("sync" section) with the command line.
Defaults are the issue's scale (100,000 files, 20 x 1 GiB, 100,000 and 1,000,000 entries).
"""
import argparse
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
os.environ.setdefault("TIERFS_TEST_PORT_OFFSET", "800")
os.environ["TIERFS_CEPH_BLUESTORE"] = "1"
import servers  # noqa: E402
from doc_section import write_section  # noqa: E402

TIERFS = os.environ.get("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
BEGIN, END = "<!-- BEGIN sync (bench/sync.py) -->", "<!-- END sync (bench/sync.py) -->"


def log(*a):
    print("[sync.py %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def timed(cmd, env=None):
    """Runs cmd; returns (wall s, CPU s of the process and its children, peak RSS KiB).
    The peak RSS comes from /usr/bin/time, not from wait4: Linux starts a forked child's
    high-water mark at its parent's RSS, so wait4 would report this Python process's
    memory for any tool smaller than it (an earlier version of this table did)."""
    with tempfile.NamedTemporaryFile(prefix="tierfs-bench-rss-") as rss_file:
        t0 = time.monotonic()
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file.name] + cmd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), err[-2000:]))
        rss = int(open(rss_file.name).read().split()[-1])
    return wall, ru.ru_utime + ru.ru_stime, rss


class Bench:
    def __init__(self, a):
        self.a = a
        self.root = tempfile.mkdtemp(prefix="tierfs-bench-sync-")
        self.srv_dir = os.path.join(self.root, "srv")
        self.src = os.path.join(self.root, "tmpfs")
        os.makedirs(self.src)
        subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=%dg" % a.tmpfs_gib, "tmpfs", self.src])
        self.rows = {}
        self.raw = {}  # table name -> [(store PUT MiB/s, bytes copied)] (raw_put)

    def start(self):
        subprocess.check_call([sys.executable, os.path.join(REPO, "tests", "servers.py"), "up", "ceph", "--dir",
                               self.srv_dir], stdout=subprocess.DEVNULL)
        env = servers.env(self.srv_dir)
        self.ep = env["TIERFS_TEST_S3_ENDPOINT"]
        self.ak, self.sk = env["TIERFS_TEST_S3_ACCESS_KEY"], env["TIERFS_TEST_S3_SECRET_KEY"]
        self.bucket = "syncbench"
        self.env = dict(os.environ)
        self.env.update({
            "AWS_ACCESS_KEY_ID": self.ak, "AWS_SECRET_ACCESS_KEY": self.sk, "AWS_DEFAULT_REGION": "us-east-1",
            "RCLONE_CONFIG_RGW_TYPE": "s3", "RCLONE_CONFIG_RGW_PROVIDER": "Ceph",
            "RCLONE_CONFIG_RGW_ACCESS_KEY_ID": self.ak, "RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY": self.sk,
            "RCLONE_CONFIG_RGW_ENDPOINT": self.ep, "TIERFS_DST_ACCESS_KEY": self.ak, "TIERFS_DST_SECRET_KEY": self.sk,
        })
        self.env.pop("AWS_CA_BUNDLE", None)
        conf = os.path.join(self.root, "aws.conf")
        with open(conf, "w") as f:  # the same 16 transfers in flight for every tool
            f.write("[default]\ns3 =\n  max_concurrent_requests = 16\n")
        self.env["AWS_CONFIG_FILE"] = conf
        subprocess.check_call(["/usr/bin/aws", "--endpoint-url", self.ep, "s3", "mb", "s3://" + self.bucket],
                              env=self.env, stdout=subprocess.DEVNULL)

    def close(self):
        subprocess.call([sys.executable, os.path.join(REPO, "tests", "servers.py"), "down", "all", "--dir",
                         self.srv_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.call(["umount", "-l", self.src])
        shutil.rmtree(self.root, ignore_errors=True)

    def tool_cmd(self, tool, src, prefix):
        if tool == "tierfs":
            return [TIERFS, "sync", src, "%s/%s/%s/" % (self.ep, self.bucket, prefix), "--threads", "16", "--quiet"]
        if tool == "rclone":
            return ["rclone", "sync", src, "rgw:%s/%s" % (self.bucket, prefix), "--transfers", "16", "--checkers", "16"]
        return ["/usr/bin/aws", "--endpoint-url", self.ep, "s3", "sync", src, "s3://%s/%s" % (self.bucket, prefix),
                "--only-show-errors"]

    def make_files(self, d, n, size):
        os.makedirs(d, exist_ok=True)
        rng = random.Random(n)
        block = rng.randbytes(min(size, 16 << 20))
        for i in range(n):
            sub = os.path.join(d, "d%03d" % (i % 100))
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, "f%07d" % i), "wb") as f:
                left = size
                while left > 0:  # 16 MiB pieces, each file rotated differently
                    piece = (block[i % 97:] + block[:i % 97])[:left]
                    f.write(piece)
                    left -= len(piece)

    def raw_put(self, name, nbytes):
        """The store's own PUT rate in the same repetition: `tierfs objbench` putting 16 MiB
        objects, 16 in flight (the parts tierfs sync sends), 4 GiB; noted under the table
        with the seconds the table's bytes would take at that rate."""
        cmd = [TIERFS, "objbench", "%s/%s" % (self.ep, self.bucket), "--skip-functional", "--big-size", "16M",
               "--big-count", "256", "--small-count", "16", "--threads", "16"]
        out = subprocess.run(cmd, env=dict(self.env, TIERFS_ACCESS_KEY=self.ak, TIERFS_SECRET_KEY=self.sk),
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0] in ("put 16M", "put 16.0 MiB"):
                rate = float(cells[2])
                log(name, "store raw PUT %.1f MiB/s" % rate)
                self.raw.setdefault(name, []).append((rate, nbytes))
                return
        raise RuntimeError("no 'put 16M' row in objbench's output:\n" + out)

    def record(self, table, tool, **vals):
        self.rows.setdefault(table, {}).setdefault(tool, []).append(vals)

    def drop(self, prefix):
        """Removes what a run wrote (not timed), so that the OSD's file holds one run at a time."""
        subprocess.call(["rclone", "purge", "rgw:%s/%s" % (self.bucket, prefix), "--checkers", "32"], env=self.env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # radosgw frees the deleted objects' space only when its garbage collector runs
        # (after a minute or more): without this, three copies of 20 GiB filled the disk.
        subprocess.call(["radosgw-admin", "-c", os.path.join(self.srv_dir, "ceph", "ceph.conf"), "gc", "process",
                         "--include-all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def change_some(self, src, seed):
        """Rewrites 64 bytes of 1% of the files under src (seeded) and moves their mtimes."""
        files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs)
        for p in random.Random(seed).sample(files, max(1, len(files) // 100)):
            with open(p, "r+b") as f:
                f.write(os.urandom(64))
            t = time.time() + 5
            os.utime(p, (t, t))

    def run_copy(self, name, src, r, incremental):
        """Each tool in turn (order rotated by r): its first copy, then, with `incremental`,
        a round after 1% of the files changed (a different 1% for each, the same amount),
        then its copy is dropped: the OSD holds one tool's copy at a time (three copies of
        the 10 GiB small-file tree filled a file sized for one, and radosgw stalled)."""
        tools = ["tierfs", "rclone", "aws"]
        tools = tools[r % 3:] + tools[:r % 3]
        for k, tool in enumerate(tools):
            free = shutil.disk_usage(self.root).free
            if free < 5 << 30:  # the OSD's file grows when radosgw's garbage is not yet collected
                raise RuntimeError("%.1f GiB left on the disk: stopping before it fills" % (free / 2**30))
            prefix = "%s-%s-%d" % (name.replace(" ", ""), tool, r)
            wall, cpu, rss = timed(self.tool_cmd(tool, src, prefix), env=self.env)
            log(name, tool, "first copy %.1f s, %.1f CPU s, peak RSS %.0f MiB" % (wall, cpu, rss / 1024))
            self.record(name + " first copy", tool, wall=wall, cpu=cpu, rss=rss)
            if incremental:
                self.change_some(src, r * 3 + k)
                wall, cpu, rss = timed(self.tool_cmd(tool, src, prefix), env=self.env)
                log(name, tool, "incremental %.1f s, %.1f CPU s, peak RSS %.0f MiB" % (wall, cpu, rss / 1024))
                self.record(name + " incremental (1% changed)", tool, wall=wall, cpu=cpu, rss=rss)
            self.drop(prefix)
        if not incremental:
            self.raw_put(name, sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs))

    def listing(self, n):
        d = os.path.join(self.root, "list%d" % n)
        os.makedirs(d)
        url = "sqlite3://" + os.path.join(d, "meta.db")
        subprocess.check_call([TIERFS, "format", url, "list%d" % n, "--storage", "file", "--bucket",
                               os.path.join(d, "bucket"), "--trash-days", "0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        flat = os.path.join(self.src, "flat%d" % n)
        os.makedirs(flat)
        for i in range(n):
            open(os.path.join(flat, "e%08d" % i), "wb").close()
        wall, cpu, rss = timed([TIERFS, "sync", flat, url + ":/big", "--quiet", "--threads", "16"])
        log("copy in", n, "%.1f s, peak RSS %d MiB" % (wall, rss // 1024))
        self.record("one directory copied (empty files, once)", "%d entries, directory to volume" % n, wall=wall,
                    cpu=cpu, rss=rss)
        local = os.path.join(self.src, "copy%d" % n)
        wall, cpu, rss = timed([TIERFS, "sync", url + ":/big", local, "--quiet", "--threads", "16"])
        log("copy out", n, "%.1f s, peak RSS %d MiB" % (wall, rss // 1024))
        self.record("one directory copied (empty files, once)", "%d entries, volume to directory" % n, wall=wall,
                    cpu=cpu, rss=rss)
        shutil.rmtree(flat)
        for r in range(self.a.repeat):
            wall, cpu, rss = timed([TIERFS, "sync", url + ":/big", local, "--quiet"])
            log("listing", n, "%.1f s, peak RSS %d MiB" % (wall, rss // 1024))
            self.record("listing one directory, nothing to copy", "%d entries" % n, wall=wall, cpu=cpu, rss=rss)
        shutil.rmtree(local)

    def report(self, cmdline):
        """Each table in its own marked part of the "sync" section, so that a run of some
        parts (--big 0, --files 0, --listing "") replaces only those."""
        doc = os.path.join(REPO, "docs", "benchmarks.md")
        header = [BEGIN, "## sync: tierfs sync, rclone sync and aws s3 sync on one radosgw", "",
                  "Each table names the command that produced it. Each cell: median of the interleaved runs "
                  "[min-max]; CPU seconds are the tool's own (user + system), not the server's. 16 transfers in "
                  "flight for every tool (`--threads 16`, `--transfers 16`, `max_concurrent_requests = 16`). "
                  "Source: a tmpfs (the big files: the local disk with --big-on-disk); destination: radosgw over "
                  "a bluestore OSD on a sparse file, on the same 2 cores.", "", END]
        text = open(doc).read()
        if BEGIN not in text:
            write_section(doc, BEGIN, END, "\n".join(header))
        for table, tools in self.rows.items():
            b, e = "<!-- BEGIN sync: %s -->" % table, "<!-- END sync: %s -->" % table
            sec = [b, "### " + table, "", "`%s` (%s), %d runs." % (cmdline, time.strftime("%Y-%m-%d"), len(
                next(iter(tools.values())))), "", "| | seconds | CPU s | peak RSS MiB |", "|---|---|---|---|"]
            for tool, runs in tools.items():
                def cell(k, scale=1.0, fmt="%.1f"):
                    xs = [r[k] * scale for r in runs]
                    return (fmt + " [" + fmt + "-" + fmt + "]") % (statistics.median(xs), min(xs), max(xs))
                sec.append("| %s | %s | %s | %s |" % (tool, cell("wall"), cell("cpu"), cell("rss", 1 / 1024, "%.0f")))
            sec += table_notes(tools)
            raw = self.raw.get(table.replace(" first copy", ""), [])
            if raw:
                rates = [x for x, _ in raw]
                secs = [n / (x * 2**20) for x, n in raw]
                sec += ["", "Store raw rate in the same repetitions: `tierfs objbench` PUTs of 16 MiB objects, 16 in "
                        "flight, %.0f MiB/s [%.0f-%.0f]: %.1f s for this table's bytes [%.1f-%.1f]." % (
                            statistics.median(rates), min(rates), max(rates), statistics.median(secs), min(secs),
                            max(secs))]
            sec.append(e)
            text = open(doc).read()
            if b in text:
                write_section(doc, b, e, "\n".join(sec))
            else:
                with open(doc + ".tmp", "w") as f:
                    f.write(text.replace(END, "\n".join(sec) + "\n\n" + END, 1))
                os.replace(doc + ".tmp", doc)


def table_notes(tools):
    """Lines under a table, computed from its runs: tierfs against the faster peer, or how
    the peak RSS moved from the fewest entries to the most (the issue's "flat" goal)."""
    med = {t: {k: statistics.median(r[k] for r in runs) for k in ("wall", "rss")} for t, runs in tools.items()}
    peers = [t for t in ("rclone", "aws") if t in med]
    if "tierfs" in med and peers:
        best = min(peers, key=lambda t: med[t]["wall"])
        return ["", "tierfs: %.2fx as fast as the faster peer (%s), median against median." % (
            med[best]["wall"] / med["tierfs"]["wall"], best)]
    by_kind = {}
    for t in med:  # "100000 entries[, what]": compare the same kind across sizes
        n, _, kind = t.partition(" entries")
        by_kind.setdefault(kind, []).append((int(n), med[t]["rss"]))
    out = []
    for kind, xs in by_kind.items():
        if len(xs) > 1:
            (n0, r0), (n1, r1) = min(xs), max(xs)
            out.append("- peak RSS%s: %d entries %.0f MiB, %d entries %.0f MiB (%+.1f%%)." % (
                kind.replace(",", ""), n0, r0 / 1024, n1, r1 / 1024, (r1 / r0 - 1) * 100))
    return [""] + out if out else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100000, help="0: skip the small files")
    ap.add_argument("--big", type=int, default=20)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--listing", default="100000,1000000")
    ap.add_argument("--tmpfs-gib", type=int, default=12)
    ap.add_argument("--big-on-disk", action="store_true", help="the big files on the local disk, not the tmpfs")
    a = ap.parse_args()
    b = Bench(a)
    try:
        # Bluestore writes fresh extents until its device is full and only then reuses what
        # radosgw freed, so its sparse file is sized to one part's copies plus room: a 64 GiB
        # file beside a 20 GiB source filled the disk.
        part = max(a.files * (100 << 10), a.big * (a.big_mib << 20))
        os.environ.setdefault("TIERFS_CEPH_OSD_BYTES", str(max(8 << 30, int(part * 1.6))))
        b.start()
        cmdline = "bench/sync.py " + shlex.join(sys.argv[1:])
        if a.files:
            small = os.path.join(b.src, "small")
            b.make_files(small, a.files, 100 << 10)
            for r in range(a.repeat):
                b.run_copy("%d x 100 KiB" % a.files, small, r, incremental=True)
                b.report(cmdline)  # after each repetition, so that a later failure keeps what was measured
            shutil.rmtree(small)
        if a.big:
            # From the local disk: the 20 GiB do not fit in memory beside the OSD.
            big = os.path.join(b.root, "big") if a.big_on_disk else os.path.join(b.src, "big")
            b.make_files(big, a.big, a.big_mib << 20)
            for r in range(a.repeat):
                b.run_copy("%d x %d MiB" % (a.big, a.big_mib), big, r, incremental=False)
                b.report(cmdline)
            shutil.rmtree(big)
        for n in [int(x) for x in a.listing.split(",") if x]:
            b.listing(n)
            b.report(cmdline)
    finally:
        b.close()


if __name__ == "__main__":
    main()
