#!/usr/bin/env python3
"""Helpers of bench/cache.sh: make the data sets, run and time the reads, and write the
section of docs/benchmarks.md from the results.

    cache.py mkfiles DIR COUNT BYTES          COUNT files DIR/fNNNNN of random bytes
    cache.py randread DIR COUNT [--threads T] [--seed S] [--json FILE]
                                              read DIR/f00000..COUNT-1 once each, in a random
                                              order, T threads, 1 MiB reads; prints files/s
    cache.py pyimport PYTHON LIBDIR MODULE    time `PYTHON -c "import MODULE"` with
                                              PYTHONPATH=LIBDIR; prints seconds; fails unless
                                              MODULE came from LIBDIR
    cache.py torchsave FILE MIB               a state dict of float32 tensors, about MIB MiB
    cache.py torchload FILE                   prints the seconds torch.load(FILE) takes
                                              (import torch is not timed)
    cache.py fio-mibs FIO.json                read bandwidth of a fio JSON result in MiB/s
    cache.py objbench-rate OUT big|small mibs|ops|cpu
                                              a GET row of `tierfs objbench` output
    cache.py report --results DIR --doc DOC   write the section (see report())

randread, mkfiles, pyimport and the parsers use the standard library only; torchsave and
torchload need PyTorch in the interpreter that runs them.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

BEGIN = "<!-- bench:cache:begin -->"
END = "<!-- bench:cache:end -->"
MIB = 1 << 20


def cmd_mkfiles(a):
    os.makedirs(a.dir, exist_ok=True)
    for i in range(a.count):
        with open(os.path.join(a.dir, "f%05d" % i), "wb") as f:
            f.write(os.urandom(a.bytes))


def cmd_randread(a):
    names = [os.path.join(a.dir, "f%05d" % i) for i in range(a.count)]
    random.Random(a.seed).shuffle(names)
    lock = threading.Lock()
    state = {"next": 0, "bytes": 0, "errors": []}

    def worker():
        buf = bytearray(MIB)
        view = memoryview(buf)
        got = 0
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(names):
                break
            try:
                fd = os.open(names[i], os.O_RDONLY)
                try:
                    while True:
                        n = os.readv(fd, [view])
                        if n == 0:
                            break
                        got += n
                finally:
                    os.close(fd)
            except OSError as e:
                with lock:
                    state["errors"].append("%s: %s" % (names[i], e))
        with lock:
            state["bytes"] += got

    threads = [threading.Thread(target=worker) for _ in range(a.threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    if state["errors"]:
        sys.exit("randread: %d read(s) failed, first: %s" % (len(state["errors"]), state["errors"][0]))
    res = {"files": len(names), "bytes": state["bytes"], "seconds": secs,
           "files_per_s": len(names) / secs, "mib_per_s": state["bytes"] / MIB / secs}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
    print("%.1f" % res["files_per_s"])


def cmd_pyimport(a):
    env = dict(os.environ, PYTHONPATH=a.libdir, PYTHONDONTWRITEBYTECODE="1")
    code = "import %s, sys; sys.stdout.write(%s.__file__)" % (a.module, a.module)
    t0 = time.perf_counter()
    r = subprocess.run([a.python, "-c", code], env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("pyimport: import %s failed: %s" % (a.module, r.stderr.strip()[-500:]))
    where = os.path.realpath(r.stdout.strip())
    if not where.startswith(os.path.realpath(a.libdir) + os.sep):
        sys.exit("pyimport: %s was imported from %s, not from %s" % (a.module, where, a.libdir))
    print("%.4f" % secs)


def cmd_torchsave(a):
    import torch
    torch.manual_seed(0)
    per = 32 * MIB // 4  # 32 MiB tensors, as a model's layers
    n = max(1, a.mib // 32)
    state = {"layer%03d.weight" % i: torch.randn(per, dtype=torch.float32).reshape(-1, 4096) for i in range(n)}
    torch.save(state, a.file)


def cmd_torchload(a):
    import torch
    t0 = time.perf_counter()
    state = torch.load(a.file, map_location="cpu")
    secs = time.perf_counter() - t0
    if not state:
        sys.exit("torchload: empty state dict")
    print("%.4f" % secs)


def cmd_fio_mibs(a):
    with open(a.file) as f:
        txt = f.read()
    job = json.loads(txt[txt.index("{"):])["jobs"][0]
    if job.get("error") or job["read"]["io_bytes"] <= 0:
        sys.exit("fio-mibs: the job failed or read nothing")
    print("%.1f" % (job["read"]["bw_bytes"] / MIB))


def cmd_objbench_rate(a):
    rows = []
    with open(a.file) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) in (7, 8) and cells[0].startswith("get "):
                rows.append(cells)
    row = rows[0 if a.which == "big" else 1] if len(rows) >= 2 else None
    if row is None or row[6] != "ok" or (a.unit == "cpu" and len(row) < 8):
        sys.exit("objbench-rate: no successful '%s' GET row in %s" % (a.which, a.file))
    print({"mibs": row[2], "ops": row[3], "cpu": row[-1]}[a.unit])


# ---- report ------------------------------------------------------------------------------

LIMITS = ("get-s3", "get-rados", "tmpfs", "passthrough")
STORE_TARGETS = ("tierfs-s3", "tierfs-rados", "s3fs", "rclone")
TIERFS_TARGETS = ("tierfs-s3", "tierfs-rados")
LABELS = {
    "get-s3": "raw GET, radosgw (S3)",
    "get-rados": "raw GET, RADOS",
    "tmpfs": "tmpfs",
    "passthrough": "passthrough_ll over tmpfs",
    "tierfs-s3": "tierfs-s3",
    "tierfs-rados": "tierfs-rados",
    "s3fs": "s3fs",
    "rclone": "rclone (full VFS cache)",
}


class Results:
    def __init__(self, path):
        self.cells, self.rss, self.cpu = {}, {}, {}
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("kind") == "rss":
                    key = (r["target"], r["stage"])
                    self.rss[key] = max(self.rss.get(key, 0), r["kib"])
                elif r.get("kind") == "cpu":
                    self.cpu.setdefault((r["workload"], r["target"], r["phase"]), []).append((r["client"], r["store"]))
                else:
                    self.cells.setdefault((r["workload"], r["target"], r["phase"]), []).append(r["value"])

    def med(self, w, t, p):
        xs = self.cells.get((w, t, p))
        return statistics.median(xs) if xs else None

    def cell(self, w, t, p, fmt):
        xs = self.cells.get((w, t, p))
        if not xs:
            return "failed"
        return "%s (%s–%s)" % (fmt % statistics.median(xs), fmt % min(xs), fmt % max(xs))


def table(res, w, targets, phases, fmt, limit_phase=None):
    out = ["| target | " + " | ".join(h for _, h in phases) + " |",
           "|---|" + "---:|" * len(phases)]
    for t in targets:
        row = []
        for p, _ in phases:
            if t.startswith("get-") and p != limit_phase:
                row.append("")
            else:
                row.append(res.cell(w, t, p, fmt))
        out.append("| %s | %s |" % (LABELS.get(t, t), " | ".join(row)))
    return "\n".join(out)


def ratio(num, den):
    return "%.2f" % (num / den) if num is not None and den else "n/a"


def cpu_table(res, rows, seq_mib, raw_mib):
    """CPU seconds per GiB of the cold sequential read: the reading process and the store."""
    out = ["CPU seconds per GiB read cold (median over the rounds): the client (the FUSE process, "
           "or objbench for the raw GET rows) and the store (radosgw + ceph-osd; for the raw rows "
           "also objbench's deletes after its GETs). Every process shares the machine's %s cores, "
           "so a read cannot run faster than cores / (client + store) GiB/s." % os.cpu_count(), "",
           "| target | client | store | client + store |", "|---|---:|---:|---:|"]
    for t in rows:
        xs = res.cpu.get(("seq", t, "cold"))
        if not xs or t == "tmpfs":
            continue
        gib = (raw_mib if t.startswith("get-") else seq_mib) / 1024
        c = statistics.median(x[0] for x in xs) / gib
        st = statistics.median(x[1] for x in xs) / gib
        out.append("| %s | %.2f | %.2f | %.2f |" % (LABELS.get(t, t), c, st, c + st))
    return out + [""] if len(out) > 4 else []


def report(a):
    res = Results(os.path.join(a.results, "results.jsonl"))
    with open(os.path.join(a.results, "meta.json")) as f:
        meta = json.load(f)
    targets = meta["targets"]
    workloads = meta["workloads"]
    k = meta["knobs"]
    rows = [t for t in ("get-s3", "get-rados", "tmpfs", "passthrough") + STORE_TARGETS if t in targets]
    s = [BEGIN, "## Disk cache: reads through a mount, cold, warm and after a remount", "",
         "Generated by `bench/cache.sh` (see `bench/README.md`); do not edit by hand, rerun the script.", "",
         "- Command: `%s`" % meta["cmdline"],
         "- Date: %s" % meta["date"],
         "- Machine: %s, %s cores, %s GiB RAM, %s; load average at the start %s" % (
             meta["cpu"], meta["cores"], meta["ram_gib"], meta["kernel"], meta["load"]),
         "- Rounds: %s, interleaved (each round runs every target once, in a rotated order); every "
         "cell is the median and (min–max) over the rounds" % k["ROUNDS"],
         "- Store: %s; data on a bluestore OSD over a file on the local disk. Before every "
         "measured phase: `sync`, `echo 3 > /proc/sys/vm/drop_caches`, and the OSD's caches are "
         "dropped (`ceph tell osd.0 cache drop`), so only client-side caches are warm; the raw GET rows "
         "drop them between objbench's PUTs and its GETs (`--before-get`)" % meta["ceph"],
         "- TierFS: %s; metadata on a throwaway Redis; mount options: `%s`; %s" % (
             meta["tierfs"], meta["tierfs_opts"] or "(defaults)",
             "`{cache}` is the target's folder on a tmpfs standing in for a GPU node's NVMe, emptied "
             "before each round's first mount" if "{cache}" in meta["tierfs_opts"] else
             "no cache folder given (TierFS's disk cache, if this build has one, is not on the tmpfs "
             "and not emptied by the script)"),
         "- Peers on the same radosgw: %s (`%s`, no disk cache); %s (`%s`, cache folder on the "
         "same tmpfs), reading one bucket that is filled through an s3fs mount" % (
             meta["s3fs"], meta["s3fs_opts"], meta["rclone"], meta["rclone_opts"]),
         "- Limits: raw GET = `tierfs objbench` on the same store (objects written, then read "
         "back at once); tmpfs = the data set read where it was made; passthrough = libfuse3's "
         "passthrough_ll example over that tmpfs (restarted for \"remount\")",
         ""]
    if "seq" in workloads:
        s += ["### (a) One %s MiB file read sequentially, 1 MiB reads (fio, MiB/s)" % k["SEQ_SIZE"], "",
              "Raw GET: %s objects of 4 MiB, %s threads (TierFS's block size and download "
              "threads)." % (k["OBJBENCH_BIG_COUNT"], k["OBJBENCH_THREADS"]), "",
              table(res, "seq", rows, [("cold", "cold"), ("warm", "warm, same mount"),
                                       ("remount", "warm after remount")], "%.0f", "cold"), ""]
        s += cpu_table(res, rows, int(k["SEQ_SIZE"]), int(k["OBJBENCH_BIG_COUNT"]) * 4)
    if "small" in workloads:
        s += ["### (b) %s files of %s KiB, random order, %s threads, three epochs (files/s)" % (
                  k["SMALL_FILES"], k["SMALL_KIB"], k["SMALL_THREADS"]), "",
              "Epoch 3 runs after a remount. Raw GET: %s objects of %s KiB, %s threads." % (
                  k["OBJBENCH_SMALL_COUNT"], k["SMALL_KIB"], k["SMALL_THREADS"]), "",
              table(res, "small", rows, [("epoch1", "epoch 1 (cold)"), ("epoch2", "epoch 2, same mount"),
                                         ("epoch3", "epoch 3, after remount")], "%.0f", "epoch1"), ""]
    nonraw = [t for t in rows if not t.startswith("get-")]
    if "numpy" in workloads:
        s += ["### (c) `python3 -c 'import numpy'` with numpy in the volume (seconds, lower is better)", "",
              "%s, numpy %s copied into the volume with unchecked-hash .pyc files (nothing is "
              "compiled or written while importing); PYTHONPATH points at the copy. Python's own "
              "files and numpy's system libraries are read once after each cache drop (by "
              "importing the system numpy), so the time is the volume's." % (meta["python"], meta["numpy"]), "",
              table(res, "numpy", nonraw, [("cold", "cold"), ("remount", "after remount")], "%.2f"), ""]
    if "torch" in workloads:
        s += ["### (d) `torch.load` of a %s MiB checkpoint (seconds, lower is better)" % k["TORCH_MIB"], "",
              "PyTorch %s, state dict of 32 MiB float32 tensors, `map_location=\"cpu\"`; only the "
              "load is timed." % meta["torch"], "",
              table(res, "torch", nonraw, [("cold", "cold"), ("warm", "warm, same mount"),
                                           ("hot", "again, page cache kept"),
                                           ("remount", "warm after remount")], "%.2f"), "",
              "\"warm\" runs after the kernel's page cache was dropped, so the volume's own caches "
              "serve it through FUSE; \"again\" loads once more without that drop, as a node that "
              "loads the same model twice does.", ""]
    cols = [t for t in STORE_TARGETS if t in targets]
    if cols:
        m = res.med
        raw = {"tierfs-s3": "get-s3", "tierfs-rados": "get-rados"}
        peers = [x for x in (m("seq", "s3fs", "cold"), m("seq", "rclone", "cold")) if x is not None]
        best_peer = max(peers) if peers else None
        lines = [
            ("seq", "cold sequential / raw GET rate of its store",
             lambda t: ratio(m("seq", t, "cold"), m("seq", raw[t], "cold")) if t in raw else ""),
            ("seq", "cold sequential / better of s3fs and rclone (cold)",
             lambda t: ratio(m("seq", t, "cold"), best_peer) if t in TIERFS_TARGETS else ""),
            ("seq", "sequential warm after remount / passthrough after remount",
             lambda t: ratio(m("seq", t, "remount"), m("seq", "passthrough", "remount"))),
            ("small", "small files epoch 3 / epoch 2",
             lambda t: ratio(m("small", t, "epoch3"), m("small", t, "epoch2"))),
            ("small", "small files epoch 3 / passthrough epoch 3",
             lambda t: ratio(m("small", t, "epoch3"), m("small", "passthrough", "epoch3"))),
            ("numpy", "import numpy after remount: tmpfs time / this time",
             lambda t: ratio(m("numpy", "tmpfs", "remount"), m("numpy", t, "remount"))),
            ("torch", "torch.load warm: tmpfs time / this time",
             lambda t: ratio(m("torch", "tmpfs", "warm"), m("torch", t, "warm"))),
            ("torch", "torch.load again, page cache kept: tmpfs time / this time",
             lambda t: ratio(m("torch", "tmpfs", "hot"), m("torch", t, "hot"))),
            ("torch", "torch.load after remount: tmpfs time / this time",
             lambda t: ratio(m("torch", "tmpfs", "remount"), m("torch", t, "remount"))),
        ]
        s += ["### Ratios (of medians; above 1 = faster than the reference)", "",
              "| ratio | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        for w, name, fn in lines:
            if w not in workloads:
                continue
            s.append("| %s | %s |" % (name, " | ".join(fn(t) for t in cols)))
        s.append("")
    fuse = [t for t in ("passthrough",) + STORE_TARGETS if t in targets]
    stages = [w for w in ("seq", "small", "numpy", "torch") if w in workloads]
    if fuse:
        s += ["### Client peak memory (VmHWM of the FUSE process, MiB; highest over its mounts)", "",
              "Pages of the cache folder's tmpfs are not counted. \"writing\" is the mount that "
              "copies the data sets in (`cp -r`), for TierFS and for s3fs, which fills the peers' bucket.", "",
              "| target | " + " | ".join(stages) + " | writing | all |", "|---|" + "---:|" * (len(stages) + 2)]
        mib = lambda v: "%.0f" % (v / 1024) if v else "n/a"
        for t in fuse:
            cells = [mib(res.rss.get((t, w))) for w in stages]
            cells.append(mib(res.rss.get((t, "write"))) if t in TIERFS_TARGETS + ("s3fs",) else "")
            known = [v for (tt, _), v in res.rss.items() if tt == t]
            s.append("| %s | %s | %s |" % (LABELS[t], " | ".join(cells), mib(max(known) if known else None)))
        s.append("")
    if meta.get("problems"):
        s += ["Problems in this run: " + "; ".join(meta["problems"]), ""]
    s.append(END)
    section = "\n".join(s)
    with open(os.path.join(a.results, "summary.md"), "w") as f:
        f.write(section + "\n")
    try:
        with open(a.doc) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# TierFS benchmarks\n"
    pat = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    text = pat.sub(lambda _: section, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section + "\n"
    with open(a.doc + ".tmp", "w") as f:
        f.write(text)
    os.replace(a.doc + ".tmp", a.doc)
    print(section)
    missing = sum(1 for line in s if line.startswith("|") and "failed" in line.split("|", 2)[2])
    return 1 if missing else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("mkfiles")
    q.add_argument("dir")
    q.add_argument("count", type=int)
    q.add_argument("bytes", type=int)
    q = sub.add_parser("randread")
    q.add_argument("dir")
    q.add_argument("count", type=int)
    q.add_argument("--threads", type=int, default=4)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--json")
    q = sub.add_parser("pyimport")
    q.add_argument("python")
    q.add_argument("libdir")
    q.add_argument("module")
    q = sub.add_parser("torchsave")
    q.add_argument("file")
    q.add_argument("mib", type=int)
    q = sub.add_parser("torchload")
    q.add_argument("file")
    q = sub.add_parser("fio-mibs")
    q.add_argument("file")
    q = sub.add_parser("objbench-rate")
    q.add_argument("file")
    q.add_argument("which", choices=["big", "small"])
    q.add_argument("unit", choices=["mibs", "ops", "cpu"])
    q = sub.add_parser("report")
    q.add_argument("--results", required=True, help="folder with results.jsonl and meta.json")
    q.add_argument("--doc", required=True, help="markdown file whose cache section is replaced")
    a = p.parse_args()
    fn = {"mkfiles": cmd_mkfiles, "randread": cmd_randread, "pyimport": cmd_pyimport,
          "torchsave": cmd_torchsave, "torchload": cmd_torchload, "fio-mibs": cmd_fio_mibs,
          "objbench-rate": cmd_objbench_rate, "report": report}[a.cmd]
    return fn(a) or 0


if __name__ == "__main__":
    sys.exit(main())
