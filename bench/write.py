#!/usr/bin/env python3
"""Write-path benchmark: checkpoints and small files written through a mount into S3.

    bench/write.py                 full run (1 GiB checkpoint, 2 GiB fio, 3 rounds)
    QUICK=1 bench/write.py         256 MiB / 512 MiB / 500 and 2000 files, 1 round

Starts Redis and Ceph (bluestore OSD over a file, radosgw) on loopback and compares, side by
side in interleaved rounds:

  tmpfs            the memory limit: the same writes to a tmpfs
  disk             the machine's own disk (the file system under BENCH_WORK): "the local disk"
  passthrough      libfuse3's passthrough_ll over the tmpfs: the cost of FUSE itself
  tierfs-s3        TierFS, blocks uploaded before close returns
  tierfs-s3-wb     TierFS with --writeback, staging on a tmpfs (standing in for NVMe)
  tierfs-s3-wbd    the same with --upload-delay UPLOAD_DELAY (default 10 s): uploads start after
                   the burst of writes instead of competing with it
  s3fs             s3fs-fuse (uploads at close)
  rclone           rclone mount --vfs-cache-mode writes (cache on the same tmpfs; uploads
                   after close, in the background)

Workloads (WORKLOADS, default "torch fio small4k small100k rewrite"):
  torch      torch.save of a TORCH_MIB MiB state dict, timed to the end of the save (close)
  fio        one FIO_MIB MiB file written sequentially in 1 MiB writes, with fsync at the end
  small4k    SMALL4K_FILES files of 4 KiB created by 4 threads (files/s)
  small100k  SMALL100K_FILES files of 100 KiB created by 4 threads (files/s)
  rewrite    TierFS only (tierfs-s3, with --compact-grace 0): a REWRITE_MIB MiB file rewritten
             REWRITE_PASSES times over in 1 MiB pieces at random offsets; the bucket's size
             (radosgw's count) when the writes end, with background compaction running, and
             after `tierfs compact` and the deletion of what it replaced

For each write: the rate to the end of the last close (or fsync), and for the targets that
upload in the background, the time until the store holds everything ("landed"); PUTs and
bytes radosgw received (its own counters). Writes the section between
<!-- bench:write:begin --> and <!-- bench:write:end --> of docs/benchmarks.md and raw
results to bench-results/write-<timestamp>/. Needs root (mounts, drop_caches).
Environment: QUICK ROUNDS TARGETS WORKLOADS UPLOAD_DELAY REWRITE_MIB REWRITE_PASSES TORCH_MIB FIO_MIB SMALL4K_FILES SMALL100K_FILES
TIERFS BENCH_DOC BENCH_SECTION BENCH_OUT BENCH_WORK PYTHON.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from doc_section import write_section  # noqa: E402 (bench/, the script's own directory)

QUICK = os.environ.get("QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS") or (1 if QUICK else 3))
TARGETS = (os.environ.get("TARGETS") or "tmpfs disk passthrough tierfs-s3 tierfs-s3-wb tierfs-s3-wbd s3fs rclone").split()
UPLOAD_DELAY = os.environ.get("UPLOAD_DELAY") or "10"
WORKLOADS = (os.environ.get("WORKLOADS") or "torch fio small4k small100k rewrite").split()
REWRITE_MIB = int(os.environ.get("REWRITE_MIB") or (128 if QUICK else 1024))
REWRITE_PASSES = int(os.environ.get("REWRITE_PASSES") or (5 if QUICK else 20))
TORCH_MIB = int(os.environ.get("TORCH_MIB") or (256 if QUICK else 1024))
FIO_MIB = int(os.environ.get("FIO_MIB") or (512 if QUICK else 2048))
SMALL4K_FILES = int(os.environ.get("SMALL4K_FILES") or (2000 if QUICK else 10000))
SMALL100K_FILES = int(os.environ.get("SMALL100K_FILES") or (500 if QUICK else 3000))
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
PYTHON = os.environ.get("PYTHON") or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
OUT = os.path.join(os.environ.get("BENCH_OUT") or os.path.join(REPO, "bench-results"),
                   time.strftime("write-%Y%m%d-%H%M%S"))
# A run of some workloads only (WORKLOADS) can keep its own section (BENCH_SECTION) next to
# the full run's.
SECTION = os.environ.get("BENCH_SECTION") or "write"
BEGIN, END = "<!-- bench:%s:begin -->" % SECTION, "<!-- bench:%s:end -->" % SECTION
MiB = 1 << 20
LABELS = {"tmpfs": "tmpfs", "disk": "local disk (ext4)", "passthrough": "passthrough_ll over tmpfs",
          "tierfs-s3": "tierfs-s3", "tierfs-s3-wb": "tierfs-s3 --writeback",
          "tierfs-s3-wbd": "tierfs-s3 --writeback --upload-delay " + UPLOAD_DELAY,
          "s3fs": "s3fs", "rclone": "rclone (--vfs-cache-mode writes)"}

TORCH_SAVE = r"""
import sys, time, torch
torch.manual_seed(0)
n = max(1, int(sys.argv[2]) // 32)
state = {"layer%03d.weight" % i: torch.randn(32 * 1024 * 1024 // 4).reshape(-1, 4096) for i in range(n)}
t0 = time.perf_counter()
torch.save(state, sys.argv[1])
print("%.4f" % (time.perf_counter() - t0))
"""

REWRITE = r"""
import os, random, sys, time
path, mib, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MiB = 1 << 20
bufs = [os.urandom(MiB) for _ in range(16)]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(mib):
    os.write(fd, bufs[i % 16])
rng = random.Random(1)
t0 = time.perf_counter()
for i in range(mib * passes):
    os.pwrite(fd, bufs[i % 16], rng.randrange(mib) * MiB)
os.fsync(fd)
os.close(fd)
print("%.4f" % (time.perf_counter() - t0))
"""

SMALL = r"""
import os, sys, threading, time
root, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = os.urandom(size)
os.makedirs(root, exist_ok=True)
def work(k):
    for i in range(k, count, 4):
        with open(os.path.join(root, "f%06d" % i), "wb") as f:
            f.write(data)
t0 = time.perf_counter()
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("%.4f" % (time.perf_counter() - t0))
"""


def log(*a):
    print("[write.py %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def sh(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s %s" % (" ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r


class Bench:
    def __init__(self):
        os.environ["TIERFS_TEST_PORT_OFFSET"] = "450"
        os.environ["TIERFS_CEPH_BLUESTORE"] = "1"
        import servers  # reads the environment above
        self.servers = servers
        base = os.environ.get("BENCH_WORK") or os.path.join(REPO, "build", "bench")
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="write-", dir=base)
        self.passthrough = None
        if "passthrough" in TARGETS:
            self.passthrough = sh(os.path.join(REPO, "bench", "build-passthrough.sh")).stdout.strip()
        self.fast = os.path.join(self.work, "fast")  # tmpfs: the local limit, caches, staging
        os.makedirs(self.fast)
        big = max(TORCH_MIB, FIO_MIB)
        sh("mount", "-t", "tmpfs", "-o", "size=%dm" % (3 * big + 4096), "tierfs-write-bench", self.fast)
        self.redis = servers.Redis(os.path.join(self.work, "srv")).start()
        self.ceph = servers.Ceph(os.path.join(self.work, "srv")).start()
        self.s3 = self.ceph.endpoint()
        self.env = dict(os.environ, TIERFS_ACCESS_KEY=servers.S3_ACCESS_KEY, TIERFS_SECRET_KEY=servers.S3_SECRET_KEY)
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        self.pid = None
        self.results = []
        self.volume = 0
        with open(os.path.join(self.work, "passwd"), "w") as f:
            f.write("%s:%s\n" % (servers.S3_ACCESS_KEY, servers.S3_SECRET_KEY))
        os.chmod(os.path.join(self.work, "passwd"), 0o600)
        with open(os.path.join(self.work, "rclone.conf"), "w") as f:
            f.write("[ceph]\ntype = s3\nprovider = Ceph\naccess_key_id = %s\nsecret_access_key = %s\nendpoint = %s\n"
                    % (servers.S3_ACCESS_KEY, servers.S3_SECRET_KEY, self.s3))

    def close(self):
        try:
            self.unmount()
        finally:
            try:
                self.ceph.stop()
                self.redis.stop()
            finally:
                sh("umount", "-l", self.fast, check=False)
                shutil.rmtree(self.work, ignore_errors=True)

    # ---- targets -------------------------------------------------------------------------

    def mount(self, target):
        """Mounts a fresh, empty file system of the target; returns the directory to write."""
        self.target = target
        self.pid = None
        if target in ("tmpfs", "disk"):
            d = os.path.join(self.fast if target == "tmpfs" else self.work, "plain-target")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            return d
        if target == "passthrough":
            src = os.path.join(self.fast, "passthrough-src")
            shutil.rmtree(src, ignore_errors=True)
            os.makedirs(src)
            self.pt = subprocess.Popen([self.passthrough, "-f", "-o", "source=" + src, self.mnt],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.pid = self.pt.pid
        cache = os.path.join(self.fast, "cache-" + target)
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache)
        # Every run writes into a bucket of its own, emptied afterwards (purge), so the
        # store holds one run's data at a time.
        self.volume += 1
        self.bucket = "wbench%d" % self.volume
        if target.startswith("tierfs"):
            meta = "%s/%d" % (self.redis.url(), self.volume % 15 + 1)
            sh(TIERFS, "format", meta, "wbench", "--force", "--storage", "s3", "--bucket",
               "%s/%s" % (self.s3, self.bucket), env=self.env)
            opts = ["--cache-dir", cache] + (["--writeback"] if "-wb" in target else []) + (
                ["--upload-delay", UPLOAD_DELAY] if target.endswith("-wbd") else []) + ["--compact-grace", "0"]
            sh(TIERFS, "mount", "-d", meta, self.mnt, "--log", os.path.join(self.work, target + ".log"), *opts,
               env=self.env)
            self.pid = int(sh("pgrep", "-n", "-f", "tierfs mount -d %s %s" % (meta, self.mnt)).stdout.split()[0])
        else:  # s3fs and rclone do not create buckets
            sh(TIERFS, "objbench", "%s/%s" % (self.s3, self.bucket), "--skip-bench", env=self.env)
        if target == "s3fs":
            sh("s3fs", self.bucket, self.mnt, "-o", "url=" + self.s3, "-o", "use_path_request_style", "-o",
               "passwd_file=" + os.path.join(self.work, "passwd"), "-o", "tmpdir=" + cache, "-o",
               "multipart_size=16", "-o", "parallel_count=8")
            self.pid = int(sh("pgrep", "-n", "-f", "s3fs .*" + self.mnt).stdout.split()[0])
        elif target == "rclone":
            env = dict(os.environ)
            env.pop("AWS_CA_BUNDLE", None)
            # The daemon keeps the descriptors it inherits: no pipes, or the call never returns.
            subprocess.run(["rclone", "mount", "ceph:" + self.bucket, self.mnt, "--config", os.path.join(self.work, "rclone.conf"),
                            "--vfs-cache-mode", "writes", "--cache-dir", cache, "--daemon", "--daemon-wait", "60s",
                            "--log-file", os.path.join(self.work, "rclone.log")], env=env, check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.pid = int(sh("pgrep", "-n", "-f", "rclone mount ceph:%s %s" % (self.bucket, self.mnt)).stdout.split()[0])
        for _ in range(600):
            if os.path.ismount(self.mnt):
                break
            time.sleep(0.1)
        d = os.path.join(self.mnt, "run%d" % time.time_ns())
        os.makedirs(d)
        return d

    def landed(self, target, put_b0, mib):
        """Seconds until everything written is in the store (0 for targets that upload
        before close returns), measured from now."""
        t0 = time.perf_counter()
        done = None
        if target.startswith("tierfs-s3-wb"):
            done = lambda: json.loads(os.getxattr(self.mnt, "tierfs.stats"))["writeback"]["staged_blocks"] == 0  # noqa
        elif target == "rclone":
            # rclone uploads in the background after close: until radosgw took every byte.
            done = lambda: self.rgw()["put_b"] - put_b0 >= mib * MiB  # noqa: E731
        while done and not done():
            if time.perf_counter() - t0 > 600:
                raise RuntimeError("%s: the written data did not reach the store within 600 s" % target)
            time.sleep(0.05)
        return time.perf_counter() - t0

    def ticks(self):
        """CPU clock ticks so far of the client process and of the store (radosgw + OSD)."""
        def of(pid):
            try:
                with open("/proc/%d/stat" % pid) as f:
                    v = f.read().rsplit(")", 1)[1].split()
                return int(v[11]) + int(v[12])
            except (OSError, TypeError):
                return 0
        store = [int(p) for p in sh("pgrep", "-f", "(radosgw|ceph-osd) -c " + self.ceph.conf, check=False).stdout.split()]
        return of(self.pid) if self.pid else 0, sum(of(p) for p in store)

    def unmount(self):
        if not os.path.ismount(self.mnt):
            return
        if getattr(self, "target", "").startswith("tierfs"):
            sh(TIERFS, "umount", self.mnt, check=False)
        elif getattr(self, "target", "") == "passthrough":
            sh("fusermount3", "-u", self.mnt, check=False)
            self.pt.wait(60)
        else:
            sh("fusermount3", "-u", self.mnt, check=False)
        for _ in range(1200):
            if not os.path.ismount(self.mnt) and not sh("pgrep", "-f", "rclone mount ceph:.* " + self.mnt,
                                                         check=False).stdout:
                break
            time.sleep(0.1)

    def rgw(self):
        return self.ceph.rgw_counters()

    # ---- workloads -----------------------------------------------------------------------

    def drop(self):
        sh("sync")
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")

    def bucket_mib(self):
        out = sh("radosgw-admin", "-c", self.ceph.conf, "bucket", "stats", "--bucket=" + self.bucket).stdout
        return json.loads(out).get("usage", {}).get("rgw.main", {}).get("size_actual", 0) / MiB

    def run_one(self, w, target, r):
        if w == "rewrite" and target != "tierfs-s3":
            return
        d = self.mount(target)
        self.drop()
        c0 = self.rgw()
        k0 = self.ticks()
        if w == "torch":
            secs = float(sh(PYTHON, "-c", TORCH_SAVE, os.path.join(d, "ckpt.pt"), str(TORCH_MIB)).stdout.strip())
            mib = TORCH_MIB
            value = mib / secs
        elif w == "fio":
            out = sh("fio", "--name=seqwrite", "--filename=" + os.path.join(d, "data.bin"), "--rw=write", "--bs=1M",
                     "--size=%dM" % FIO_MIB, "--ioengine=psync", "--end_fsync=1", "--output-format=json").stdout
            job = json.loads(out[out.index("{"):])["jobs"][0]
            secs = job["job_runtime"] / 1000.0
            mib = FIO_MIB
            value = mib / secs
        elif w == "rewrite":
            path = os.path.join(d, "ckpt")
            secs = float(sh(PYTHON, "-c", REWRITE, path, str(REWRITE_MIB), str(REWRITE_PASSES)).stdout.strip())
            mib = REWRITE_MIB * REWRITE_PASSES
            value = mib / secs
            extra = {"store_mib_after_writes": self.bucket_mib()}
            t1 = time.perf_counter()
            compact = json.loads(sh(TIERFS, "compact", path, "--json").stdout)
            # The replaced slices go with the client's cleaner (grace 0): until the bucket
            # stops shrinking.
            last, same = None, 0
            while same < 5 and time.perf_counter() - t1 < 600:
                now = self.bucket_mib()
                same = same + 1 if now == last else 0
                last = now
                time.sleep(1)
            extra.update(store_mib_after_compact=last, compact_secs=time.perf_counter() - t1, live_mib=REWRITE_MIB,
                         compact=compact)
        else:
            count, size = (SMALL4K_FILES, 4096) if w == "small4k" else (SMALL100K_FILES, 100 << 10)
            secs = float(sh(PYTHON, "-c", SMALL, os.path.join(d, "files"), str(count), str(size)).stdout.strip())
            mib = count * size / MiB
            value = count / secs
        landed = secs + self.landed(target, c0["put_b"], mib)
        k1 = self.ticks()
        c1 = self.rgw()
        self.unmount()
        c2 = self.rgw()
        if target not in ("tmpfs", "disk", "passthrough"):
            sh("radosgw-admin", "-c", self.ceph.conf, "bucket", "rm", "--bucket=" + self.bucket, "--purge-objects",
               "--bypass-gc", check=False)
        rec = {"workload": w, "target": target, "round": r, "value": value, "secs": secs, "landed_secs": landed,
               **(extra if w == "rewrite" else {}),
               "mib": mib, "puts": c2["put"] - c0["put"], "put_mib": (c2["put_b"] - c0["put_b"]) / MiB,
               "puts_at_landed": c1["put"] - c0["put"],
               "client_cpu_per_gib": (k1[0] - k0[0]) / os.sysconf("SC_CLK_TCK") / (mib / 1024),
               "store_cpu_per_gib": (k1[1] - k0[1]) / os.sysconf("SC_CLK_TCK") / (mib / 1024)}
        self.results.append(rec)
        log(json.dumps(rec))


def cell(xs, fmt):
    if not xs:
        return "failed"
    return "%s (%s–%s)" % (fmt % statistics.median(xs), fmt % min(xs), fmt % max(xs))


def report(b, started):
    res = b.results
    get = lambda w, t, k: [x[k] for x in res if x["workload"] == w and x["target"] == t]  # noqa: E731
    env = "".join("%s=%s " % (k, os.environ[k].replace(" ", "\\ ") if " " not in os.environ[k] else repr(os.environ[k]))
                  for k in ("QUICK", "ROUNDS", "TARGETS", "WORKLOADS", "BENCH_SECTION") if os.environ.get(k))
    title = "## Write path: checkpoints and small files into S3 (radosgw)"
    if SECTION != "write":
        title += " (%s)" % SECTION
    s = [BEGIN, title, "",
         "Generated by `bench/write.py` (see the script's header); do not edit by hand, rerun the script.", "",
         "- Command: `%sbench/write.py`" % env,
         "- Date: %s; %d cores; %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
                                       os.uname().release),
         "- Store: Ceph radosgw over a bluestore OSD on a file on the local disk; metadata on Redis; "
         "every target writes into a fresh, empty file system (a new TierFS volume each time). TierFS caches and "
         "staging, rclone's cache and s3fs's temporary files are on a tmpfs standing in for a GPU node's NVMe; "
         "the page cache is dropped before each write. CPU seconds per GiB written: the client process "
         "(the FUSE process) and the store (radosgw + OSD), from write start until landed; every process shares "
         "the machine's cores.",
         "- Rounds: %d, interleaved; cells are median (min–max). \"landed\": until the store holds every "
         "byte (TierFS --writeback: its staging area is empty; rclone: its unmount, which waits for its "
         "uploads); for the others close already waited. PUTs and MiB are radosgw's own counters, "
         "unmount included." % ROUNDS, ""]
    specs = {"torch": ("`torch.save` of a %d MiB state dict (32 MiB tensors)" % TORCH_MIB, "MiB/s", "%.0f"),
             "fio": ("fio: one %d MiB file, 1 MiB sequential writes, fsync at the end" % FIO_MIB, "MiB/s", "%.0f"),
             "small4k": ("%d files of 4 KiB created by 4 threads" % SMALL4K_FILES, "files/s", "%.0f"),
             "small100k": ("%d files of 100 KiB created by 4 threads" % SMALL100K_FILES, "files/s", "%.0f")}
    for w in [w for w in WORKLOADS if w != "rewrite"]:
        title, unit, fmt = specs[w]
        s += ["### %s" % title, "",
              "| target | %s to the last close | seconds to the last close | seconds until landed | PUTs | MiB put "
              "| CPU s/GiB: client | CPU s/GiB: store |" % unit,
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
        local = ("tmpfs", "disk", "passthrough")
        for t in TARGETS:
            s.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                LABELS[t], cell(get(w, t, "value"), fmt), cell(get(w, t, "secs"), "%.2f"),
                cell(get(w, t, "landed_secs"), "%.2f"),
                cell(get(w, t, "puts"), "%.0f") if t not in local else "",
                cell(get(w, t, "put_mib"), "%.0f") if t not in local else "",
                cell(get(w, t, "client_cpu_per_gib"), "%.2f") if t not in ("tmpfs", "disk") else "",
                cell(get(w, t, "store_cpu_per_gib"), "%.2f") if t not in local else ""))
        s.append("")
    if "rewrite" in WORKLOADS and get("rewrite", "tierfs-s3", "value"):
        g = lambda k: get("rewrite", "tierfs-s3", k)  # noqa: E731
        s += ["### In-place rewrites: a %d MiB file rewritten %d times over in 1 MiB pieces at random offsets "
              "(tierfs-s3)" % (REWRITE_MIB, REWRITE_PASSES), "",
              "Background compaction runs during the writes; then `tierfs compact` on the file, and the "
              "client's cleaner deletes what it replaced (`--compact-grace 0`). Store sizes are radosgw's "
              "bucket statistics.", "",
              "| written MiB | MiB/s | store MiB when the writes end | store MiB after compaction | live MiB "
              "| after / live | `tierfs compact` s |", "|---:|---:|---:|---:|---:|---:|---:|",
              "| %d | %s | %s | %s | %d | %s | %s |" % (
                  REWRITE_MIB * REWRITE_PASSES, cell(g("value"), "%.0f"), cell(g("store_mib_after_writes"), "%.0f"),
                  cell(g("store_mib_after_compact"), "%.0f"), REWRITE_MIB,
                  cell([a / REWRITE_MIB for a in g("store_mib_after_compact")], "%.2f"),
                  cell(g("compact_secs"), "%.1f")), ""]
    m = lambda w, t: statistics.median(get(w, t, "value")) if get(w, t, "value") else None  # noqa: E731
    ratio = lambda a, b: "%.2f" % (a / b) if a and b else "n/a"  # noqa: E731
    s += ["### Ratios (of medians)", "", "| ratio | value |", "|---|---:|"]
    for w in ("torch", "fio"):
        if w in WORKLOADS:
            s.append("| %s: tierfs-s3 --writeback / local disk | %s |" % (w, ratio(m(w, "tierfs-s3-wb"), m(w, "disk"))))
            s.append("| %s: tierfs-s3 --writeback / passthrough_ll over tmpfs | %s |" % (
                w, ratio(m(w, "tierfs-s3-wb"), m(w, "passthrough"))))
            s.append("| %s: tierfs-s3 --writeback / tmpfs | %s |" % (w, ratio(m(w, "tierfs-s3-wb"), m(w, "tmpfs"))))
            s.append("| %s: tierfs-s3 --writeback / tierfs-s3 | %s |" % (w, ratio(m(w, "tierfs-s3-wb"),
                                                                            m(w, "tierfs-s3"))))
            s.append("| %s: %s / local disk | %s |" % (w, LABELS["tierfs-s3-wbd"], ratio(m(w, "tierfs-s3-wbd"),
                                                                                     m(w, "disk"))))
    for w in ("small4k", "small100k"):
        if w in WORKLOADS:
            for t in ("tierfs-s3", "tierfs-s3-wb", "tierfs-s3-wbd"):
                s.append("| %s: %s / s3fs | %s |" % (w, LABELS[t], ratio(m(w, t), m(w, "s3fs"))))
                s.append("| %s: %s / rclone | %s |" % (w, LABELS[t], ratio(m(w, t), m(w, "rclone"))))
    s += ["", END]
    section = "\n".join(s)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write(section + "\n")
    write_section(DOC, BEGIN, END, section)
    print(section)
    log("took %.0f min" % ((time.time() - started) / 60))


def main():
    if os.geteuid() != 0:
        sys.exit("write.py: must run as root")
    for tool in ["fio"] + (["s3fs"] if "s3fs" in TARGETS else []) + (["rclone"] if "rclone" in TARGETS else []):
        if not shutil.which(tool):
            sys.exit("write.py: %s not found (apt-get install %s)" % (tool, tool))
    started = time.time()
    b = Bench()
    try:
        for r in range(1, ROUNDS + 1):
            for w in WORKLOADS:
                order = TARGETS[r - 1:] + TARGETS[:r - 1]
                for t in order:
                    b.run_one(w, t, r)
    finally:
        b.close()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(b.results, f, indent=1)
    report(b, started)


if __name__ == "__main__":
    main()
