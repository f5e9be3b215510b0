#!/usr/bin/env python3
"""The S3 gateway side by side with radosgw and with a FUSE mount of the same volume.

    sudo bench/gateway.py                          # full run: 3 rounds, about 50 minutes (an estimate)
    sudo SMALL=1 ROUNDS=1 bench/gateway.py         # smoke run with tiny sizes, about 3 minutes
    sudo SKIP_RADOSGW=1 bench/gateway.py           # the gateway and the mount only (no Ceph)
    sudo SMALL=1 PARTS="list par64" bench/gateway.py   # only some of the measurements

Targets, in one run, interleaved round by round (the order rotates every round, so that load
from other work on the machine falls on all of them):

  gateway   `tierfs gateway META 127.0.0.1:PORT --cache-dir memory` (otherwise its defaults:
            64 threads, --buffer-size 300M, a memory block cache of 2% of RAM)
  radosgw   Ceph's own S3 (Ceph from Debian, tests/servers.py: one mon, one bluestore OSD over
            a sparse file under BENCH_WORK, radosgw with 64 threads; ports offset by
            TIERFS_TEST_PORT_OFFSET, default 700 here)
  mount     `tierfs mount META MNT --cache-dir memory --metrics 0` of the same volume the gateway
            serves (both processes open the same SQLite database): "GET" is `dd bs=1M` of the
            file to /dev/null, "PUT" is `dd bs=1M` of the source into the mount

The TierFS volume: SQLite metadata and a `file` bucket in BENCH_WORK, on the local disk, the
same disk the OSD's block file is on, so both stores write to the same medium (each block of
the `file` bucket is fsynced, as bluestore syncs its writes); `--trash-days 0`, so deletions
free space at once. TIERFS_BUCKET=tmpfs puts the database and the bucket on a tmpfs instead
(TMPFS_SIZE, default 12g). Not radosgw as TierFS's store: the gateway would then be a proxy in
front of the radosgw it is compared with, and every byte would cross two S3 servers on the
same 2 cores; with a local bucket the gateway's own cost shows.

Measurements (each one after `sync`, `echo 3 > /proc/sys/vm/drop_caches` and
`ceph tell osd.0 cache drop`; every server's CPU from /proc/PID/stat utime+stime before and
after; its peak RSS as VmHWM after `echo 5 > /proc/PID/clear_refs`):

 1. Debian's awscli 2.9 (/usr/bin/aws, not the one first on PATH) with AWS_CONFIG_FILE giving
    `multipart_threshold = multipart_chunksize = AWS_CHUNK` (16MB) and `max_concurrency =
    AWS_CONCURRENCY` (4; 16 streams x 4 = 64 connections, the gateway's and radosgw's 64
    threads): `aws s3 cp` of one ONE_MIB (1024) MiB object, PUT then GET to /dev/null
    (awscli writes special files in order, without a temporary file), then PAR_STREAMS (16)
    `aws s3 cp` processes at once, each with its own object of PAR_MIB (256) MiB (16 x 1 GiB
    would put 16 GiB per target and round on a disk shared with other work). Seconds from the
    start of the first process to the exit of the last, so awscli's start-up (about 1 s of
    Python per process on this machine; an `aws s3 ls` of an empty prefix is timed every
    round and given in the section) is in them. MiB/s, and CPU seconds per GiB of the server (gateway, radosgw, tierfs mount),
    of radosgw + ceph-osd, and of the clients (awscli or dd).
 2. `tierfs objbench --skip-functional` at http://127.0.0.1:PORT/BUCKET of the gateway and of
    radosgw: OBJBENCH_BIG_COUNT (32) objects of OBJBENCH_BIG_SIZE (64M) and
    OBJBENCH_SMALL_COUNT (1000) of 4K, OBJBENCH_THREADS (8) threads, caches dropped between
    its PUTs and GETs (--before-get); its throughput rows.
 3. SMALL_PUTS (10000) PUTs of 100 KiB by botocore (Debian's python3-botocore 1.29 run by
    /usr/bin/python3; newer botocore sends checksum trailers Ceph 16 refuses) in PUT_PROCS (4)
    processes x PUT_THREADS (8) threads, no retries; the clock runs from a barrier the
    processes pass once their clients are made. The mount writes the same number of files
    with the same processes and threads (open, write, close). objects/s.
 4. ListObjectsV2 of a prefix `lst/` holding LIST_KEYS (1000000) zero-byte keys, all at one
    level (`lst/k0000000`...), 1000 keys a page, with delimiter `/` and without (both return
    every key; the gateway takes different paths for them): total seconds, pages/s, keys/s,
    first-page latency, server CPU. Raw HTTP requests signed by botocore (a page's XML is
    counted, not parsed, so the client costs little). The TierFS keys are made as empty files
    through the mount by 4 processes; the first listing through the gateway (which gives
    them identity ETags and reads no data) is timed and reported on its own; then one HEAD of
    every key (PUT_PROCS x PUT_THREADS botocore threads) computes and stores its MD5 in the
    object xattr, which every object PUT through the gateway carries; the rounds list
    afterwards. radosgw gets RGW_LIST_KEYS (100000) zero-byte PUTs (botocore,
    as in 3): a million would take most of an hour; the table gives each listing's key count.
    The mount lists the same directory with `ls -f` and `ls -l`.
 5. The gateway's peak RSS (VmHWM) during (a) `aws s3 cp s3://BUCKET/big/src
    s3://BUCKET/big/dst`, a multipart copy (UploadPartCopy of COPY_CHUNK (16MB) ranges, then
    CompleteMultipartUpload) of a COPY_GIB (100) GiB source made as a sparse file through the
    mount (truncate; radosgw cannot hold such an object on this disk, so it is not measured).
    awscli's AWS_CONFIG_FILE for it gives `multipart_threshold = multipart_chunksize =
    COPY_CHUNK` and `max_concurrency = AWS_CONCURRENCY`. The gateway reads no byte of a
    copied range: the part shares the source's slices and its ETag is derived from the
    source's identity and the range. awscli's
    default `--copy-props default` asks GetObjectTagging, which the gateway answers with an
    empty tag set, and copies the metadata; AWS_COPY_PROPS, if set, passes another
    `--copy-props` (metadata-directive, none).
    (b) PAR64 (64) PUTs at once of PAR64_MIB (64) MiB each (botocore, 4 processes x 16
    threads), for the gateway and for radosgw.

PARTS (default "bulk objbench small list copy par64") picks the measurements: bulk = 1,
objbench = 2, small = 3, list = 4 (with making the keys, about 20 minutes of setup at full
size), copy = 5 (a), par64 = 5 (b); the document gets only their sections.

SMALL=1: ROUNDS=1 ONE_MIB=64 PAR_MIB=16 OBJBENCH_BIG_SIZE=8M OBJBENCH_BIG_COUNT=8
OBJBENCH_SMALL_COUNT=200 SMALL_PUTS=500 LIST_KEYS=10000 RGW_LIST_KEYS=5000 COPY_GIB=2
PAR64_MIB=4 (each only if not set).

Needs root (tmpfs and FUSE mounts, drop_caches, clear_refs), a built tierfs (copied into the
scratch folder at the start, so a rebuild during the run does not change it), /usr/bin/aws and
/usr/bin/python3 with botocore (Debian's awscli and python3-botocore), and for radosgw
`ceph-mon ceph-osd radosgw` as the tests. Space: BENCH_WORK (default build/bench) holds the
volume and the OSD's file: give it 30 GiB free for a full run (objects are deleted after each
measurement, but bluestore's file keeps its high-water mark and radosgw frees deleted objects'
data only after its 60 s garbage-collection delay; the 1M-key database is under 1 GiB). RAM:
a tmpfs of ONE_MIB + PAR_MIB + PAR64_MIB + 64 MiB (1.4 GiB) for the sources, Ceph about 2 GiB,
the gateway and the mount up to about 0.5 GiB each, 16 awscli processes about 1.5 GiB: about
6 GiB at the peak. Time on this 2-core machine, an estimate (not yet timed with the copy that
reads no data): about 20 minutes of setup (1M creates through the mount, the first listing, 1M HEADs,
100k PUTs to radosgw) and about 11 minutes a round, the 100 GiB copy a small part of it;
about 50 minutes for 3 rounds.

Writes the section between <!-- bench:gateway:begin --> and <!-- bench:gateway:end --> of
docs/benchmarks.md and raw results and logs to BENCH_OUT/gateway-<timestamp>/. Everything
started or mounted (gateway, mount, Ceph, tmpfs, workers) is stopped, unmounted and removed on
every exit, including errors and INT/TERM/HUP. Exit status 1 when a measurement failed.
Environment: SMALL ROUNDS SKIP_RADOSGW PARTS TIERFS TIERFS_BUCKET TMPFS_SIZE ONE_MIB PAR_STREAMS
PAR_MIB AWS_CHUNK AWS_CONCURRENCY AWS_COPY_PROPS OBJBENCH_BIG_SIZE OBJBENCH_BIG_COUNT
OBJBENCH_SMALL_COUNT OBJBENCH_THREADS SMALL_PUTS PUT_PROCS PUT_THREADS LIST_KEYS RGW_LIST_KEYS
COPY_GIB COPY_CHUNK PAR64 PAR64_MIB MEASURE_TIMEOUT GATEWAY_OPTS MOUNT_OPTS PYTHON BENCH_DOC
BENCH_WORK BENCH_OUT TIERFS_TEST_PORT_OFFSET TIERFS_CEPH_OSD_BYTES.

This file is the driver (the rounds, the measurements, the section); bench/gateway_servers.py
starts and stops the servers and mounts, bench/s3_load.py has the botocore workers and awscli.
"""

import atexit
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

# Sibling modules (the script's folder is on sys.path, wherever it is run from);
# gateway_servers first: it sets the environment tests/servers.py reads.
from gateway_servers import REPO, Servers, log, popen, reap, sh
import s3_load
from doc_section import write_section

SMALL = os.environ.get("SMALL") == "1"


def knob(name, full, small):
    v = os.environ.get(name)
    return type(full)(v) if v else (small if SMALL else full)


ROUNDS = knob("ROUNDS", 3, 1)
SKIP_RADOSGW = os.environ.get("SKIP_RADOSGW", "") not in ("", "0")
TIERFS_SRC = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
TIERFS_BUCKET = os.environ.get("TIERFS_BUCKET") or "disk"
TMPFS_SIZE = os.environ.get("TMPFS_SIZE") or "12g"
ONE_MIB = knob("ONE_MIB", 1024, 64)
PAR_STREAMS = knob("PAR_STREAMS", 16, 16)
PAR_MIB = knob("PAR_MIB", 256, 16)
AWS_CHUNK = os.environ.get("AWS_CHUNK") or "16MB"
AWS_CONCURRENCY = knob("AWS_CONCURRENCY", 4, 4)
AWS_COPY_PROPS = os.environ.get("AWS_COPY_PROPS") or ""
COPY_CHUNK = os.environ.get("COPY_CHUNK") or "16MB"
PARTS = (os.environ.get("PARTS") or "bulk objbench small list copy par64").split()
OBJBENCH_BIG_SIZE = knob("OBJBENCH_BIG_SIZE", "64M", "8M")
OBJBENCH_BIG_COUNT = knob("OBJBENCH_BIG_COUNT", 32, 8)
OBJBENCH_SMALL_COUNT = knob("OBJBENCH_SMALL_COUNT", 1000, 200)
OBJBENCH_THREADS = knob("OBJBENCH_THREADS", 8, 8)
SMALL_PUTS = knob("SMALL_PUTS", 10000, 500)
SMALL_KIB = 100
PUT_PROCS = knob("PUT_PROCS", 4, 4)
PUT_THREADS = knob("PUT_THREADS", 8, 8)
LIST_KEYS = knob("LIST_KEYS", 1000000, 10000)
RGW_LIST_KEYS = knob("RGW_LIST_KEYS", 100000, 5000)
COPY_GIB = knob("COPY_GIB", 100, 2)
PAR64 = knob("PAR64", 64, 64)
PAR64_MIB = knob("PAR64_MIB", 64, 4)
PAR64_PROCS = 4
MEASURE_TIMEOUT = knob("MEASURE_TIMEOUT", 1800, 600)
GATEWAY_OPTS = (os.environ.get("GATEWAY_OPTS") or "").split()
MOUNT_OPTS = (os.environ.get("MOUNT_OPTS") or "").split()
PYTHON = os.environ.get("PYTHON") or "/usr/bin/python3"
AWS = "/usr/bin/aws"
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
OUT = os.path.join(os.environ.get("BENCH_OUT") or os.path.join(REPO, "bench-results"),
                   time.strftime("gateway-%Y%m%d-%H%M%S"))
BEGIN, END = "<!-- bench:gateway:begin -->", "<!-- bench:gateway:end -->"
VOLUME = "gwbench"      # the gateway's bucket is named after the volume
RGW_BUCKET = "gwbench"
GW_AK, GW_SK = "GWBENCHACCESSKEY", "gwbench-secret-key-0123456789"
TARGETS = ["gateway"] + ([] if SKIP_RADOSGW else ["radosgw"]) + ["mount"]
LABELS = {"gateway": "TierFS gateway", "radosgw": "radosgw", "mount": "TierFS mount"}
COMMAND_KNOBS = ("SMALL", "ROUNDS", "SKIP_RADOSGW", "PARTS", "TIERFS_BUCKET", "ONE_MIB", "PAR_STREAMS", "PAR_MIB",
                 "AWS_CHUNK", "AWS_CONCURRENCY", "AWS_COPY_PROPS", "OBJBENCH_BIG_SIZE", "OBJBENCH_BIG_COUNT", "OBJBENCH_SMALL_COUNT",
                 "OBJBENCH_THREADS", "SMALL_PUTS", "PUT_PROCS", "PUT_THREADS", "LIST_KEYS", "RGW_LIST_KEYS",
                 "COPY_GIB", "COPY_CHUNK", "PAR64", "PAR64_MIB", "GATEWAY_OPTS", "MOUNT_OPTS")


class Bench(Servers):
    """The measurements, over the servers Servers starts and stops."""

    def __init__(self):
        super().__init__(OUT, TIERFS_SRC, VOLUME, (GW_AK, GW_SK),
                         {"one": ONE_MIB, "par": PAR_MIB, "par64": PAR64_MIB}, bucket_on=TIERFS_BUCKET,
                         tmpfs_size=TMPFS_SIZE, radosgw=not SKIP_RADOSGW, rgw_bucket=RGW_BUCKET,
                         gateway_opts=GATEWAY_OPTS, mount_opts=MOUNT_OPTS)
        self.results = []       # one dict per measurement
        self.failures = []

    def setup(self):
        self.start()
        if self.ceph is not None:
            self.worker("mkbucket", self.s3args("radosgw"))
        self.aws_conf = s3_load.write_aws_config(os.path.join(self.work, "aws.conf"), AWS_CHUNK, AWS_CONCURRENCY)
        self.aws_copy_conf = s3_load.write_aws_config(os.path.join(self.work, "aws-copy.conf"), COPY_CHUNK,
                                                      AWS_CONCURRENCY)

    # ---- helpers ---------------------------------------------------------------------------

    def aws(self, target, *args, conf=None):
        return s3_load.aws(AWS, self.s3args(target), conf or self.aws_conf, *args)

    def worker(self, mode, args, timeout=None):
        return s3_load.worker(PYTHON, mode, args, timeout or MEASURE_TIMEOUT)

    def workers(self, mode, args, procs, threads):
        return s3_load.workers(PYTHON, mode, args, procs, threads, MEASURE_TIMEOUT)

    def record(self, **kw):
        self.results.append(kw)
        with open(os.path.join(OUT, "results.jsonl"), "a") as f:
            f.write(json.dumps(kw) + "\n")

    def attempt(self, what, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            msg = " ".join(str(e).split())[:400] or repr(e)
            log("FAILED: %s: %s" % (what, msg))
            self.failures.append((what, msg))
            self.record(kind="failure", what=what, error=str(e)[:4000])

    # ---- (1) aws s3 cp ---------------------------------------------------------------------

    def copy_run(self, target, op, n, mib, r):
        """n transfers of mib MiB at once (aws s3 cp, or dd through the mount)."""
        if target == "mount":
            os.makedirs(os.path.join(self.mnt, "bulk"), exist_ok=True)
        src = os.path.join(self.src, "one" if n == 1 else "par")
        names = ["one"] if n == 1 else ["p%02d" % i for i in range(n)]
        cmds = []
        for name in names:
            if target == "mount":
                f = os.path.join(self.mnt, "bulk", "m-" + name)
                cmd = ["dd", "bs=1M", "status=none"] + (["if=" + src, "of=" + f] if op == "PUT" else
                                                         ["if=" + f, "of=/dev/null"])
                cmds.append(cmd)
            else:
                url = "s3://%s/bulk/%s" % (self.s3args(target)["bucket"], name)
                cmds.append((src, url) if op == "PUT" else (url, "/dev/null"))
        self.drop()

        def run():
            t0 = time.monotonic()
            ps = [popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
                  if target == "mount" else self.aws(target, "s3", "cp", "--no-progress", "--only-show-errors", *c)
                  for c in cmds]
            for p in ps:
                out, err = reap(p, MEASURE_TIMEOUT)
                if p.returncode != 0:
                    raise RuntimeError("%s failed (exit %d): %s" % (" ".join(p.args), p.returncode, (out + err)[-1500:]))
            return {"secs": time.monotonic() - t0}
        m = self.measure(target, run, sample_rss=True)
        gib = n * mib / 1024
        self.record(kind="bulk", op="%s %d" % (op, n), target=target, round=r, mib=n * mib, mibs=n * mib / m["secs"],
                    server_s_gib=m["server_cpu"] / gib, client_s_gib=m["client_cpu"] / gib,
                    store_s_gib=(m["server_cpu"] + m["osd_cpu"]) / gib if m["osd_cpu"] is not None else None,
                    **m)
        log("round %d %-8s %s x%d of %d MiB: %.2f s, %.0f MiB/s, server %.2f CPU s/GiB, peak RSS %.0f MiB" % (
            r, target, op, n, mib, m["secs"], n * mib / m["secs"], m["server_cpu"] / gib, m["hwm_mib"]))

    def delete_prefix(self, target, prefix):
        if target == "mount" or target == "gateway":
            # The same volume: faster through the mount, and not measured.
            shutil.rmtree(os.path.join(self.mnt, prefix), ignore_errors=True)
        else:
            self.worker("delete", dict(self.s3args(target), prefix=prefix + "/"))

    def bulk(self, target, r):
        for op, n, mib in (("PUT", 1, ONE_MIB), ("GET", 1, ONE_MIB), ("PUT", PAR_STREAMS, PAR_MIB),
                           ("GET", PAR_STREAMS, PAR_MIB)):
            self.attempt("round %d %s %s x%d" % (r, target, op, n), lambda: self.copy_run(target, op, n, mib, r))
        self.delete_prefix(target, "bulk")

    def aws_startup(self, target, r):
        """Seconds of one `aws s3 ls` of an empty prefix: awscli's start-up plus one request."""
        def run():
            t0 = time.monotonic()
            p = self.aws(target, "s3", "ls", "s3://%s/nothing-here/" % self.s3args(target)["bucket"])
            reap(p, 120)
            return {"secs": time.monotonic() - t0}
        self.record(kind="aws_startup", target=target, round=r, **run())

    # ---- (2) objbench ----------------------------------------------------------------------

    def objbench(self, target, r):
        a = self.s3args(target)
        drop = self.drop_command()
        env = dict(os.environ, TIERFS_ACCESS_KEY=a["ak"], TIERFS_SECRET_KEY=a["sk"])
        self.drop()

        def run():
            out = sh(self.tierfs, "objbench", "%s/%s" % (a["endpoint"], a["bucket"]), "--skip-functional",
                     "--big-size", OBJBENCH_BIG_SIZE, "--big-count", OBJBENCH_BIG_COUNT, "--small-count",
                     OBJBENCH_SMALL_COUNT, "-p", OBJBENCH_THREADS, "--before-get", drop, env=env,
                     timeout=MEASURE_TIMEOUT)
            rows = []
            for line in out.splitlines():
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 7 and re.match(r"(put|get|head|list|delete)\b", cells[0]):
                    rows.append({"op": cells[0], "count": int(cells[1]), "mibs": float(cells[2]),
                                 "ops": float(cells[3]), "avg_ms": float(cells[4]), "p99_ms": float(cells[5]),
                                 "result": cells[6]})
            with open(os.path.join(OUT, "objbench-%s-r%d.txt" % (target, r)), "w") as f:
                f.write(out)
            if not rows or any(x["result"] != "ok" for x in rows):
                raise RuntimeError("objbench on %s: rows %s" % (target, rows))
            return {"rows": rows}
        m = self.measure(target, run, sample_rss=True)
        self.record(kind="objbench", target=target, round=r, **m)
        log("round %d %-8s objbench: %s" % (r, target, ", ".join("%s %.0f MiB/s %.0f/s" % (x["op"], x["mibs"], x["ops"])
                                                                  for x in m["rows"])))

    # ---- (3) small PUTs --------------------------------------------------------------------

    def small_puts(self, target, r):
        prefix = "small/%s-r%d" % (target, r)
        args = {"count": SMALL_PUTS, "size": SMALL_KIB * 1024, "key": prefix + "/o%06d"}
        if target == "mount":
            os.makedirs(os.path.join(self.mnt, prefix))
            args.update(dir=self.mnt)
        else:
            args.update(self.s3args(target))
        self.drop()

        def run():
            secs, errors = self.workers("files" if target == "mount" else "put", args, PUT_PROCS, PUT_THREADS)
            return {"secs": secs, "errors": errors}
        try:
            m = self.measure(target, run, sample_rss=True)
        finally:
            self.delete_prefix(target, "small")
        self.record(kind="small", target=target, round=r, objs=SMALL_PUTS / m["secs"], **m)
        log("round %d %-8s %d PUTs of %d KiB: %.2f s, %.0f objects/s, %d errors" % (
            r, target, SMALL_PUTS, SMALL_KIB, m["secs"], SMALL_PUTS / m["secs"], m["errors"]))

    # ---- (4) listing -----------------------------------------------------------------------

    def make_keys(self):
        t0 = time.monotonic()
        d = os.path.join(self.mnt, "lst")
        os.makedirs(d)
        if not s3_load.make_empty_files(d, "k%07d", LIST_KEYS, 4):
            raise RuntimeError("creating %d files through the mount failed" % LIST_KEYS)
        secs = time.monotonic() - t0
        self.record(kind="make_keys", target="mount", keys=LIST_KEYS, secs=secs)
        log("%d empty files through the mount: %.1f s (%.0f/s)" % (LIST_KEYS, secs, LIST_KEYS / secs))
        # The first listing computes the ETag of every file made through the mount and stores it.
        self.drop()
        m = self.measure("gateway", lambda: self.worker("list", dict(self.s3args("gateway"), prefix="lst/",
                                                                      delimiter="")))
        if m["keys"] != LIST_KEYS:
            raise RuntimeError("the first listing of lst/ gave %d keys, not %d" % (m["keys"], LIST_KEYS))
        self.record(kind="first_list", target="gateway", **m)
        log("first listing through the gateway: %.1f s, %d pages" % (m["secs"], m["pages"]))
        # A HEAD of each key computes its MD5 and stores it with the file (the object xattr
        # that every object PUT through the gateway has): the rounds list keys that carry it.
        secs, errors = self.workers("head", dict(self.s3args("gateway"), count=LIST_KEYS, size=0,
                                                 key="lst/k%07d"), PUT_PROCS, PUT_THREADS)
        if errors:
            raise RuntimeError("%d of the %d HEADs through the gateway failed" % (errors, LIST_KEYS))
        self.record(kind="head_keys", target="gateway", keys=LIST_KEYS, secs=secs)
        log("%d HEADs through the gateway: %.1f s (%.0f/s)" % (LIST_KEYS, secs, LIST_KEYS / secs))
        if self.ceph is not None:
            t0 = time.monotonic()
            secs, errors = self.workers("put", dict(self.s3args("radosgw"), count=RGW_LIST_KEYS, size=0,
                                                    key="lst/k%07d"), PUT_PROCS, PUT_THREADS)
            if errors:
                raise RuntimeError("%d of the %d zero-byte PUTs to radosgw failed" % (errors, RGW_LIST_KEYS))
            self.record(kind="make_keys", target="radosgw", keys=RGW_LIST_KEYS, secs=secs)
            log("%d zero-byte PUTs to radosgw: %.1f s (%.0f/s)" % (RGW_LIST_KEYS, secs, RGW_LIST_KEYS / secs))

    def listing(self, target, r):
        want = RGW_LIST_KEYS if target == "radosgw" else LIST_KEYS
        if target == "mount":
            for tool in (["ls", "-f"], ["ls", "-l"]):
                self.drop()

                def run():
                    t0 = time.monotonic()
                    with open(os.devnull, "w") as null:
                        p = popen(tool + [os.path.join(self.mnt, "lst")], stdout=null, stderr=subprocess.PIPE,
                                  text=True)
                        reap(p, MEASURE_TIMEOUT)
                    if p.returncode != 0:
                        raise RuntimeError("%s failed" % " ".join(tool))
                    return {"secs": time.monotonic() - t0}
                m = self.measure(target, run)
                self.record(kind="list", target=target, round=r, how=" ".join(tool), keys=want, **m)
                log("round %d %-8s %s: %.2f s" % (r, target, " ".join(tool), m["secs"]))
            return
        for delim in ("/", ""):
            self.drop()
            m = self.measure(target, lambda: self.worker("list", dict(self.s3args(target), prefix="lst/",
                                                                       delimiter=delim)))
            if m["keys"] != want:
                raise RuntimeError("listing lst/ on %s gave %d keys, not %d" % (target, m["keys"], want))
            self.record(kind="list", target=target, round=r, how="delimiter /" if delim else "no delimiter", **m)
            log("round %d %-8s list %s: %.2f s, %d pages, first page %.1f ms" % (
                r, target, "with delimiter" if delim else "without delimiter", m["secs"], m["pages"],
                m["first"] * 1000))

    # ---- (5) peak RSS ----------------------------------------------------------------------

    def make_sparse(self):
        d = os.path.join(self.mnt, "big")
        os.makedirs(d)
        with open(os.path.join(d, "src"), "wb") as f:
            f.truncate(COPY_GIB << 30)

    def big_copy(self, r):
        self.drop()

        def run():
            t0 = time.monotonic()
            props = ["--copy-props", AWS_COPY_PROPS] if AWS_COPY_PROPS else []
            p = self.aws("gateway", "s3", "cp", "--no-progress", "--only-show-errors", *props,
                         "s3://%s/big/src" % VOLUME, "s3://%s/big/dst" % VOLUME, conf=self.aws_copy_conf)
            out, err = reap(p, MEASURE_TIMEOUT)
            if p.returncode != 0:
                raise RuntimeError("aws s3 cp (multipart copy) failed (exit %d): %s" % (p.returncode, (out + err)[-1500:]))
            return {"secs": time.monotonic() - t0}
        try:
            m = self.measure("gateway", run, sample_rss=True)
            size = os.stat(os.path.join(self.mnt, "big", "dst")).st_size
            if size != COPY_GIB << 30:
                raise RuntimeError("the copy is %d bytes, not %d" % (size, COPY_GIB << 30))
        finally:
            if os.path.exists(os.path.join(self.mnt, "big", "dst")):
                os.unlink(os.path.join(self.mnt, "big", "dst"))
        self.record(kind="rss", case="copy", target="gateway", round=r, **m)
        log("round %d gateway multipart copy of %d GiB: %.1f s, %.1f CPU s, peak RSS %.0f MiB (before %.0f)" % (
            r, COPY_GIB, m["secs"], m["server_cpu"], m["hwm_mib"], m["rss0_mib"]))

    def par64(self, target, r):
        args = dict(self.s3args(target), count=PAR64, src=os.path.join(self.src, "par64"), key="par64/o%03d")
        self.drop()

        def run():
            secs, errors = self.workers("put", args, PAR64_PROCS, PAR64 // PAR64_PROCS)
            if errors:
                raise RuntimeError("%d of %d PUTs failed" % (errors, PAR64))
            return {"secs": secs, "errors": errors}
        try:
            m = self.measure(target, run, sample_rss=True)
        finally:
            self.delete_prefix(target, "par64")
        self.record(kind="rss", case="par64", target=target, round=r, mibs=PAR64 * PAR64_MIB / m["secs"], **m)
        log("round %d %-8s %d PUTs at once of %d MiB: %.1f s, peak RSS %.0f MiB (before %.0f)" % (
            r, target, PAR64, PAR64_MIB, m["secs"], m["hwm_mib"], m["rss0_mib"]))

    # ---- the run -----------------------------------------------------------------------------

    def run(self):
        self.setup()
        if "list" in PARTS:
            self.attempt("making the listing keys", self.make_keys)
        if "copy" in PARTS:
            self.attempt("making the sparse source", self.make_sparse)
        for r in range(1, ROUNDS + 1):
            order = TARGETS[(r - 1) % len(TARGETS):] + TARGETS[:(r - 1) % len(TARGETS)]
            s3_order = [t for t in order if t != "mount"]
            log("round %d of %d: %s" % (r, ROUNDS, " ".join(order)))
            for t in s3_order if "bulk" in PARTS else []:
                self.attempt("round %d %s aws start-up" % (r, t), lambda: self.aws_startup(t, r))
            for t in order if "bulk" in PARTS else []:
                self.bulk(t, r)
            for t in s3_order if "objbench" in PARTS else []:
                self.attempt("round %d %s objbench" % (r, t), lambda: self.objbench(t, r))
            for t in order if "small" in PARTS else []:
                self.attempt("round %d %s small PUTs" % (r, t), lambda: self.small_puts(t, r))
            for t in order if "list" in PARTS else []:
                self.attempt("round %d %s listing" % (r, t), lambda: self.listing(t, r))
            if "copy" in PARTS:
                self.attempt("round %d gateway multipart copy" % r, lambda: self.big_copy(r))
            for t in s3_order if "par64" in PARTS else []:
                self.attempt("round %d %s %d parallel PUTs" % (r, t, PAR64), lambda: self.par64(t, r))


# ---- the report ------------------------------------------------------------------------------

def cell(xs, fmt="%.0f"):
    xs = [x for x in xs if x is not None and x == x]
    if not xs:
        return "—"
    if len(xs) == 1:
        return fmt % xs[0]
    return ("%s (%s–%s)" % (fmt, fmt, fmt)) % (statistics.median(xs), min(xs), max(xs))


def report(b, started):
    res = b.results

    def pick(**kw):
        return [x for x in res if all(x.get(k) == v for k, v in kw.items())]

    env = " ".join("%s=%s" % (k, os.environ[k] if " " not in os.environ[k] else "'%s'" % os.environ[k])
                   for k in COMMAND_KNOBS if k in os.environ)
    osd_mib = int(os.environ["TIERFS_CEPH_OSD_BYTES"]) >> 20
    ceph = "—" if SKIP_RADOSGW else sh("ceph", "--version").split("(")[0].strip()
    startup = {t: cell([x["secs"] for x in pick(kind="aws_startup", target=t)], "%.2f") for t in TARGETS if t != "mount"}
    s = [BEGIN, "## S3 gateway: TierFS's gateway next to radosgw and a FUSE mount of the same volume", "",
         "Generated by `bench/gateway.py` (see the script's header); do not edit by hand, rerun the script.", "",
         "- Command: `sudo %sbench/gateway.py`" % (env + " " if env else ""),
         "- Date: %s; %d cores (shared machine); kernel %s; %s; %s; awscli %s" % (
             time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)), os.cpu_count(), os.uname().release,
             b.version, ceph, sh(AWS, "--version").split()[0].split("/")[1]),
         "- TierFS volume: SQLite metadata and a `file` bucket on %s (`--trash-days 0`); the gateway "
         "(`tierfs gateway META 127.0.0.1:PORT --cache-dir memory%s`) and the mount (`tierfs mount META MNT "
         "--cache-dir memory --metrics 0%s`) open the same volume at once." % (
             "the local disk (BENCH_WORK), the disk the OSD's file is on" if TIERFS_BUCKET == "disk" else "a tmpfs",
             " " + " ".join(GATEWAY_OPTS) if GATEWAY_OPTS else "", " " + " ".join(MOUNT_OPTS) if MOUNT_OPTS else ""),
         "- radosgw: %s" % ("not run (SKIP_RADOSGW)" if SKIP_RADOSGW else
                            "one mon, one bluestore OSD over a sparse file of %d GiB on the same disk, radosgw "
                            "with 64 threads (tests/servers.py)" % (osd_mib >> 10)),
         "- Before every measurement: `sync`, `echo 3 > /proc/sys/vm/drop_caches`, `ceph tell osd.0 cache drop`. "
         "CPU: utime+stime of the server process (gateway, radosgw, the mount's tierfs process), of radosgw "
         "+ ceph-osd, and of the clients this script ran. Peak RSS: VmHWM of the server process after "
         "resetting it (`clear_refs` 5) at the start of the measurement.",
         "- Rounds: %d, targets interleaved (order rotated every round); cells are median (min–max)." % ROUNDS, ""]
    # (1)
    mark = len(s)
    s += ["### (1) `aws s3 cp`: one %d MiB object, and %d streams of %d MiB at once" % (ONE_MIB, PAR_STREAMS, PAR_MIB),
          "",
          "Debian's awscli (`/usr/bin/aws`) with `AWS_CONFIG_FILE`: `multipart_threshold = multipart_chunksize = %s`, "
          "`max_concurrency = %d` (%d streams x %d = %d connections, the gateway's and radosgw's thread count); "
          "GET to /dev/null. %d streams are %d processes, each with its own object (%d x %d MiB rather than x 1 "
          "GiB: the disk is shared). Seconds from the first process's start to the last one's exit: awscli's "
          "start-up is included (one `aws s3 ls` of an empty prefix takes %s). The mount: `dd bs=1M` "
          "into and out of the mount, the same counts and sizes." % (
              AWS_CHUNK, AWS_CONCURRENCY, PAR_STREAMS, AWS_CONCURRENCY, PAR_STREAMS * AWS_CONCURRENCY, PAR_STREAMS,
              PAR_STREAMS, PAR_STREAMS, PAR_MIB, ", ".join("%s s on %s" % (v, LABELS[k]) for k, v in startup.items())),
          "",
          "| operation | target | MiB/s | seconds | server CPU s/GiB | radosgw + OSD CPU s/GiB | client CPU s/GiB | "
          "server peak RSS MiB |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for op in ("PUT 1", "GET 1", "PUT %d" % PAR_STREAMS, "GET %d" % PAR_STREAMS):
        for t in TARGETS:
            xs = pick(kind="bulk", op=op, target=t)
            name = "%s, %s" % (op.split()[0], "1 stream" if op.endswith(" 1") else "%d streams" % PAR_STREAMS)
            if not xs:
                s.append("| %s | %s | failed | | | | | |" % (name, LABELS[t]))
                continue
            s.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, LABELS[t], cell([x["mibs"] for x in xs]), cell([x["secs"] for x in xs], "%.2f"),
                cell([x["server_s_gib"] for x in xs], "%.2f"), cell([x["store_s_gib"] for x in xs], "%.2f"),
                cell([x["client_s_gib"] for x in xs], "%.2f"), cell([x["hwm_mib"] for x in xs])))
    s.append("")
    if not any(x in PARTS for x in ("bulk",)):
        del s[mark:]
    # (2)
    mark = len(s)
    s3t = [t for t in TARGETS if t != "mount"]
    s += ["### (2) `tierfs objbench`: %d objects of %s and %d of 4K, %d threads" % (
        OBJBENCH_BIG_COUNT, OBJBENCH_BIG_SIZE, OBJBENCH_SMALL_COUNT, OBJBENCH_THREADS), "",
          "`tierfs objbench http://127.0.0.1:PORT/BUCKET --skip-functional --big-size %s --big-count %d "
          "--small-count %d -p %d --before-get '<drop caches>'`; its throughput rows (the GETs read cold "
          "objects)." % (OBJBENCH_BIG_SIZE, OBJBENCH_BIG_COUNT, OBJBENCH_SMALL_COUNT, OBJBENCH_THREADS), "",
          "| operation | " + " | ".join("%s MiB/s | %s ops/s | %s p99 ms" % (LABELS[t], LABELS[t], LABELS[t])
                                       for t in s3t) + " |",
          "|---|" + "---:|---:|---:|" * len(s3t)]
    runs = {t: [x["rows"] for x in pick(kind="objbench", target=t)] for t in s3t}
    nrows = max([len(rs[0]) for rs in runs.values() if rs] or [0])
    for i in range(nrows):
        op = next(rs[0][i]["op"] for rs in runs.values() if rs and len(rs[0]) > i)
        row = []
        for t in s3t:
            xs = [rs[i] for rs in runs[t] if len(rs) > i]
            row += [cell([x["mibs"] for x in xs], "%.1f"), cell([x["ops"] for x in xs]),
                    cell([x["p99_ms"] for x in xs], "%.1f")]
        s.append("| %s | %s |" % (op, " | ".join(row)))
    s.append("")
    if not any(x in PARTS for x in ("objbench",)):
        del s[mark:]
    # (3)
    mark = len(s)
    s += ["### (3) %d PUTs of %d KiB, %d processes x %d threads" % (SMALL_PUTS, SMALL_KIB, PUT_PROCS, PUT_THREADS), "",
          "botocore `put_object` (Debian's python3-botocore, no retries) from a barrier to the last response; the "
          "mount: the same processes and threads writing files (open, write, close).", "",
          "| target | objects/s | seconds | server CPU ms/object | radosgw + OSD CPU ms/object | client CPU ms/object "
          "| server peak RSS MiB | errors |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in TARGETS:
        xs = pick(kind="small", target=t)
        if not xs:
            s.append("| %s | failed | | | | | | |" % LABELS[t])
            continue
        s.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            LABELS[t], cell([x["objs"] for x in xs]), cell([x["secs"] for x in xs], "%.2f"),
            cell([x["server_cpu"] * 1000 / SMALL_PUTS for x in xs], "%.2f"),
            cell([(x["server_cpu"] + x["osd_cpu"]) * 1000 / SMALL_PUTS if x["osd_cpu"] is not None else None
                  for x in xs], "%.2f"),
            cell([x["client_cpu"] * 1000 / SMALL_PUTS for x in xs], "%.2f"), cell([x["hwm_mib"] for x in xs]),
            cell([x["errors"] for x in xs])))
    s.append("")
    if not any(x in PARTS for x in ("small",)):
        del s[mark:]
    # (4)
    mark = len(s)
    mk = {x["target"]: x for x in pick(kind="make_keys")}
    first = pick(kind="first_list")
    s += ["### (4) Listing a prefix of %d keys (%s on radosgw)" % (LIST_KEYS, "%d" % RGW_LIST_KEYS if not SKIP_RADOSGW
                                                                  else "not run"), "",
          "ListObjectsV2 of `lst/`, whose keys are all at one level (`lst/k0000000`, ...), 1000 keys a page, "
          "paged with continuation tokens by one client (raw HTTP requests signed by botocore; each page's XML is "
          "counted, not parsed). With delimiter `/` and without, both list every key. **radosgw holds %s keys, not "
          "%d** (each a zero-byte PUT; a million would take most of an hour): compare keys/s and the per-page "
          "figures. The mount lists the same directory with `ls -f` and `ls -l`." % (
              "%d" % RGW_LIST_KEYS if not SKIP_RADOSGW else "no", LIST_KEYS), ""]
    if "mount" in mk:
        s.append("- TierFS keys: %d empty files made through the mount by 4 processes in %.1f s (%.0f/s)." % (
            LIST_KEYS, mk["mount"]["secs"], LIST_KEYS / mk["mount"]["secs"]))
    if first:
        f = first[0]
        s.append("- The first listing through the gateway (no delimiter) of the files made through the mount, none of "
                 "which the gateway has seen: %.1f s (%.0f keys/s, first page %.0f ms), %.1f gateway CPU s. "
                 "The rounds below list afterwards." % (f["secs"], f["keys"] / f["secs"], f["first"] * 1000,
                                                        f["server_cpu"]))
    heads = pick(kind="head_keys")
    if heads:
        s.append("- Then one HEAD of every key through the gateway (botocore, %d x %d threads): %.1f s (%.0f/s). "
                 "Each computed the file's MD5 and stored it in the file's object xattr, as every object PUT through "
                 "the gateway has one, so the rounds below read and decode an xattr per key." % (
                     PUT_PROCS, PUT_THREADS, heads[0]["secs"], LIST_KEYS / heads[0]["secs"]))
    if "radosgw" in mk:
        s.append("- radosgw keys: %d zero-byte PUTs (botocore, %d x %d threads) in %.1f s (%.0f/s)." % (
            RGW_LIST_KEYS, PUT_PROCS, PUT_THREADS, mk["radosgw"]["secs"], RGW_LIST_KEYS / mk["radosgw"]["secs"]))
    s += ["", "| target | keys | listing | seconds | pages | pages/s | keys/s | first page ms | server CPU s | "
              "server CPU µs/key |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in TARGETS:
        hows = ("ls -f", "ls -l") if t == "mount" else ("delimiter /", "no delimiter")
        for how in hows:
            xs = pick(kind="list", target=t, how=how)
            keys = RGW_LIST_KEYS if t == "radosgw" else LIST_KEYS
            label = ("`%s`" % how) if t == "mount" else how
            if not xs:
                s.append("| %s | %d | %s | failed | | | | | | |" % (LABELS[t], keys, label))
                continue
            paged = t != "mount"
            s.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                LABELS[t], keys, label, cell([x["secs"] for x in xs], "%.2f"),
                cell([x["pages"] for x in xs]) if paged else "—",
                cell([x["pages"] / x["secs"] for x in xs], "%.1f") if paged else "—",
                cell([keys / x["secs"] for x in xs]),
                cell([x["first"] * 1000 for x in xs], "%.1f") if paged else "—",
                cell([x["server_cpu"] for x in xs], "%.2f"),
                cell([x["server_cpu"] * 1e6 / keys for x in xs], "%.1f")))
    s.append("")
    if not any(x in PARTS for x in ("list",)):
        del s[mark:]
    # (5)
    mark = len(s)
    s += ["### (5) The gateway's peak RSS", "",
          "(a) `aws s3 cp %ss3://BUCKET/big/src s3://BUCKET/big/dst`: a multipart copy (UploadPartCopy of %s "
          "ranges, awscli's `multipart_chunksize`, then CompleteMultipartUpload) of a %d GiB object made as a "
          "sparse file through the mount (`truncate`); the gateway only (radosgw cannot hold such an object on "
          "this disk). The gateway reads no byte of a copied range: the part shares the source's slices and "
          "its ETag is derived from the source's identity and the range. (b) %d PUTs at once "
          "of %d MiB each (botocore `put_object`, %d processes x %d threads)." % (
              "--copy-props %s " % AWS_COPY_PROPS if AWS_COPY_PROPS else "", COPY_CHUNK, COPY_GIB, PAR64, PAR64_MIB,
              PAR64_PROCS, PAR64 // PAR64_PROCS), "",
          "| case | target | seconds | MiB/s | peak RSS (VmHWM) MiB | RSS before MiB | server CPU s |",
          "|---|---|---:|---:|---:|---:|---:|"]
    for case, t, name in [("copy", "gateway", "multipart copy of %d GiB (sparse)" % COPY_GIB)] * ("copy" in PARTS) + [
            ("par64", t, "%d PUTs of %d MiB at once" % (PAR64, PAR64_MIB)) for t in s3t if "par64" in PARTS]:
        xs = pick(kind="rss", case=case, target=t)
        if not xs:
            s.append("| %s | %s | failed | | | | |" % (name, LABELS[t]))
            continue
        mib = COPY_GIB * 1024 if case == "copy" else PAR64 * PAR64_MIB
        s.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, LABELS[t], cell([x["secs"] for x in xs], "%.1f"), cell([mib / x["secs"] for x in xs]),
            cell([x["hwm_mib"] for x in xs]), cell([x["rss0_mib"] for x in xs]),
            cell([x["server_cpu"] for x in xs], "%.1f")))
    s.append("")
    if not any(x in PARTS for x in ("copy", "par64")):
        del s[mark:]
    if b.failures:
        s += ["Failed measurements (details in the results folder):", ""]
        s += ["- %s: %s" % (w, m.replace("|", "\\|")) for w, m in b.failures]
        s.append("")
    s.append(END)
    section = "\n".join(s)
    write_section(DOC, BEGIN, END, section)
    print(section)


def main():
    if os.geteuid() != 0:
        sys.exit("gateway.py: needs root (tmpfs and FUSE mounts, drop_caches, clear_refs)")
    if not os.path.exists(AWS):
        sys.exit("gateway.py: Debian's awscli (/usr/bin/aws) is not installed")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: sys.exit(128 + n))
    started = time.time()
    b = Bench()
    atexit.register(b.close)
    log("results and logs in %s; scratch in %s" % (OUT, b.work))
    try:
        b.run()
    finally:
        b.close()
    report(b, started)
    log("updated %s; results in %s" % (DOC, OUT))
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
