#!/usr/bin/env python3
"""Listing large directories: `ls -f` and `ls -l` of directories of SIZES empty files through
TierFS, through libfuse3's passthrough examples over tmpfs (the cost of FUSE itself), and on
the tmpfs directly (the machine's limit); optionally through an older tierfs (PREV_TIERFS).

    sudo bench/readdir.py
    sudo SIZES="10000 100000" ROUNDS=5 bench/readdir.py
    sudo PREV_TIERFS=/path/to/old/tierfs PREV_COMMIT=abc1234 bench/readdir.py

One tmpfs holds the passthrough's source tree and the TierFS volume (SQLite database and
`file` bucket); each size is a directory of that many empty files, made once per target
(TierFS's through its mount). Every measurement starts after `sync` and
`echo 3 > /proc/sys/vm/drop_caches`, so the kernel has forgotten the FUSE entries and
attributes of the previous listing, and runs the command with its output to /dev/null.
Rounds interleave the targets (the order rotates every round) so that load from other work
on the machine falls on all of them; each cell is the median and (min–max) over the rounds,
and the time per entry is the median divided by the size: flat across sizes means a listing
costs O(entries). For TierFS the script also reads tierfs_readdir_entries_total from the
mount's tierfs.stats around each listing: the entries taken from the directory snapshot per
entry listed (1 plus one per READDIR reply; an O(N^2) listing shows as hundreds).

passthrough_ll is built by bench/build-passthrough.sh and started as in bench/run.sh:
`passthrough_ll -f -o source=DIR MNT` with its defaults (1 s timeouts, readdirplus), with
the hard RLIMIT_NOFILE: it keeps an open descriptor per inode the kernel knows, so it cannot
list a directory of more entries than that limit (20000 on the machine the committed numbers
come from; such cells say so). The high-level, path-based example `passthrough` (passthrough.c,
built the same way, started as `passthrough -f MNT` with its defaults: no caching, plain
readdir) keeps none and lists every size. TierFS is mounted with `--cache-dir memory
--metrics 0` and otherwise its defaults (1 s attribute and entry caches, readdirplus).

Writes the section between <!-- bench:readdir:begin --> and <!-- bench:readdir:end --> of
docs/benchmarks.md (SECTION=NAME: of bench:NAME). Needs root. Environment: SIZES ROUNDS TIERFS
PREV_TIERFS PREV_COMMIT LIST_TIMEOUT (seconds a listing may take, default 1800; longer ones show
as "> N s") TIMEOUTS (per target, default "passthrough=300") SECTION BENCH_DOC BENCH_WORK
BENCH_BUILD.
"""

import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from doc_section import write_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SIZES = [int(x) for x in (os.environ.get("SIZES") or "10000 100000 1000000").split()]
ROUNDS = int(os.environ.get("ROUNDS") or 3)
TIERFS = os.environ.get("TIERFS") or os.path.join(REPO, "build", "src", "cmd", "tierfs")
PREV = os.environ.get("PREV_TIERFS")
LIST_TIMEOUT = int(os.environ.get("LIST_TIMEOUT") or 1800)
# Per-target limits, "target=seconds ...": the high-level passthrough answers every lstat
# with a lookup of the whole path and takes over half an hour for `ls -l` of 1M entries.
TIMEOUTS = dict((kv.split("=")[0], int(kv.split("=")[1]))
                for kv in (os.environ.get("TIMEOUTS") or "passthrough=300").split())
DOC = os.environ.get("BENCH_DOC") or os.path.join(REPO, "docs", "benchmarks.md")
# SECTION names the document's section (another one for a run with PREV_TIERFS on fewer sizes).
SECTION = os.environ.get("SECTION") or "readdir"
BEGIN, END = "<!-- bench:%s:begin -->" % SECTION, "<!-- bench:%s:end -->" % SECTION
TOOLS = {"ls -f": ["ls", "-f"], "ls -l": ["ls", "-l"]}
TARGETS = ["tmpfs", "passthrough_ll", "passthrough", "tierfs"] + (["prev"] if PREV else [])
LABELS = {"tmpfs": "tmpfs", "passthrough_ll": "passthrough_ll", "passthrough": "passthrough (high-level)",
          "tierfs": "TierFS",
          "prev": "TierFS %s" % (os.environ.get("PREV_COMMIT") or "PREV_TIERFS")}


def log(*a):
    print("[readdir.py]", *a, flush=True)


def sh(*cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def wait_mounted(path, proc=None, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.ismount(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def make_files(d, n, procs=1):
    """n empty files in d, named f0000000...; in `procs` processes (creates through a mount)."""
    os.makedirs(d, exist_ok=True)
    pids = []
    for p in range(procs):
        pid = os.fork()
        if pid == 0:
            try:
                for i in range(p, n, procs):
                    os.close(os.open(os.path.join(d, "f%07d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
                os._exit(0)
            except BaseException as e:  # noqa: BLE001 - reported through the exit status
                sys.stderr.write("creating files in %s: %r\n" % (d, e))
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("creating files in %s failed" % d)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def readdir_taken(mnt):
    m = json.loads(os.getxattr(mnt, "tierfs.stats")).get("metrics", {})
    return m.get('tierfs_readdir_entries_total{step="snapshot"}', 0)  # absent until the first listing


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        sys.exit("readdir.py: needs root (tmpfs and FUSE mounts, drop_caches)")
    passthrough_ll = sh(os.path.join(HERE, "build-passthrough.sh"), "passthrough_ll").strip()
    passthrough = sh(os.path.join(HERE, "build-passthrough.sh"), "passthrough").strip()
    work = tempfile.mkdtemp(prefix="tierfs-readdir-", dir=os.environ.get("BENCH_WORK"))
    fs = os.path.join(work, "fs")
    src, ll_mnt, hl_mnt, t_mnt, p_mnt = (os.path.join(work, x)
                                         for x in ("fs/src", "mnt-ll", "mnt-hl", "mnt-tierfs", "mnt-prev"))
    db = os.path.join(work, "fs", "meta.db")
    url = "sqlite3://" + db
    mounted, procs = [], []
    results = {}   # (tool, target, size) -> [seconds]
    taken = {}     # (tool, target, size) -> [entries taken per entry listed]
    failures = {}  # (tool, target, size) -> the last error line of a failed listing
    timed_out = {}  # (tool, target, size) -> the limit a listing went past
    try:
        os.makedirs(fs)
        sh("mount", "-t", "tmpfs", "-o", "size=80%", "tmpfs", fs)
        mounted.append(fs)
        for d in (src, ll_mnt, hl_mnt, t_mnt, p_mnt):
            os.makedirs(d, exist_ok=True)
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        for binary, args, mnt in ((passthrough_ll, ["-o", "source=" + src], ll_mnt), (passthrough, [], hl_mnt)):
            name = os.path.basename(binary)
            p = subprocess.Popen([binary, "-f"] + args + [mnt], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, name + ".log"), "w"),
                                 preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)))
            procs.append(p)
            if not wait_mounted(mnt, p):
                raise RuntimeError("%s did not mount (see %s/%s.log)" % (name, work, name))
            mounted.append(mnt)
        sh(TIERFS, "format", url, "readdir", "--storage", "file", "--bucket", os.path.join(fs, "bucket"),
           "--trash-days", "0")
        sh(TIERFS, "mount", url, t_mnt, "-d", "--cache-dir", "memory", "--metrics", "0",
           "--log", os.path.join(work, "tierfs.log"))
        mounted.append(t_mnt)
        if PREV:
            sh(PREV, "mount", url, p_mnt, "-d", "--cache-dir", "memory", "--metrics", "0",
               "--log", os.path.join(work, "prev.log"))
            mounted.append(p_mnt)
        # The high-level example shows the whole root file system.
        where = {"tmpfs": src, "passthrough_ll": ll_mnt, "passthrough": hl_mnt + src, "tierfs": t_mnt, "prev": p_mnt}
        for n in SIZES:
            t0 = time.monotonic()
            make_files(os.path.join(src, "d%d" % n), n)
            t1 = time.monotonic()
            make_files(os.path.join(t_mnt, "d%d" % n), n, procs=4)
            log("%d files: %.1f s on tmpfs, %.1f s through TierFS" % (n, t1 - t0, time.monotonic() - t1))
        for r in range(ROUNDS):
            order = TARGETS[r % len(TARGETS):] + TARGETS[:r % len(TARGETS)]
            for n in SIZES:
                for target in order:
                    d = os.path.join(where[target], "d%d" % n)
                    for tool, cmd in TOOLS.items():
                        drop_caches()
                        before = readdir_taken(t_mnt) if target == "tierfs" else None
                        t0 = time.monotonic()
                        try:
                            with open(os.devnull, "w") as null:
                                p = subprocess.run(cmd + [d], stdout=null, stderr=subprocess.PIPE, text=True,
                                                   timeout=TIMEOUTS.get(target, LIST_TIMEOUT))
                            secs = time.monotonic() - t0
                            if p.returncode != 0:
                                # passthrough_ll past RLIMIT_NOFILE: kept as a failed cell
                                failures[(tool, target, n)] = p.stderr.strip().splitlines()[-1][:120]
                                log("%s %s failed: %s" % (" ".join(cmd), d, failures[(tool, target, n)]))
                                secs = float("nan")
                        except subprocess.TimeoutExpired:
                            secs = float("inf")
                            timed_out[(tool, target, n)] = TIMEOUTS.get(target, LIST_TIMEOUT)
                        results.setdefault((tool, target, n), []).append(secs)
                        if target == "tierfs":
                            after = readdir_taken(t_mnt)
                            taken.setdefault((tool, target, n), []).append((after - before) / n)
                        log("round %d %-11s %-6s %8d entries: %8.3f s  (%.2f us/entry)" % (
                            r + 1, target, tool, n, secs, secs / n * 1e6))
    finally:
        for m in reversed(mounted):
            if m == fs:
                continue
            if m in (t_mnt, p_mnt):
                subprocess.run([TIERFS, "umount", m], capture_output=True, timeout=120)
            if os.path.ismount(m):
                subprocess.run(["fusermount3", "-uz", m], capture_output=True)
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if os.path.ismount(fs):
            subprocess.run(["umount", fs], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    def med(xs):
        return statistics.median(xs)

    def cell(key):
        xs = results[key]
        if key in failures:
            return "fails (%s)" % failures[key]
        if med(xs) == float("inf"):
            return "> %d s (stopped)" % timed_out[key]
        return "%.3f (%.3f–%.3f) s, %.2f µs/entry" % (med(xs), min(xs), max(xs), med(xs) / key[2] * 1e6)

    def ratio(tool, ref, n):
        a, b = med(results[(tool, "tierfs", n)]), med(results[(tool, ref, n)])
        if (tool, ref, n) in failures or float("inf") in (a, b):
            return "—"
        return "%.2fx" % (a / b)

    env = " ".join("%s=%s" % (k, "/path/to/tierfs-" + os.environ.get("PREV_COMMIT", "old")
                              if k == "PREV_TIERFS" else os.environ[k])
                   for k in ("SIZES", "ROUNDS", "LIST_TIMEOUT", "TIMEOUTS", "PREV_TIERFS", "PREV_COMMIT", "SECTION")
                   if k in os.environ)
    lines = [BEGIN, "## Listing large directories" + (" (%s)" % SECTION if SECTION != "readdir" else ""), "",
             "Generated by `bench/readdir.py` (see the script's header); do not edit by hand, rerun the script.",
             "", "- Command: `sudo %sbench/readdir.py`" % (env + " " if env else ""),
             "- Date: %s; %d cores (shared machine); kernel %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                                  os.cpu_count(), os.uname().release),
             "- Directories of empty files on one tmpfs (passthrough_ll's source, TierFS's SQLite database "
             "and bucket); kernel caches dropped before every listing; output to /dev/null.",
             "- Rounds: %d, targets interleaved (order rotated every round); seconds as median (min–max), "
             "and the median per entry." % ROUNDS, ""]
    for tool in TOOLS:
        lines += ["### `%s`" % tool, "",
                  "| entries | " + " | ".join(LABELS[t] for t in TARGETS) +
                  " | TierFS / passthrough_ll | TierFS / passthrough |",
                  "|---:|" + "---:|" * len(TARGETS) + "---:|---:|"]
        for n in SIZES:
            row = ["%d" % n] + [cell((tool, t, n)) for t in TARGETS]
            row += [ratio(tool, "passthrough_ll", n), ratio(tool, "passthrough", n)]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["Entries TierFS took from its directory snapshot per entry listed "
              "(`tierfs_readdir_entries_total{step=\"snapshot\"}`, median over the rounds):", "",
              "| entries | " + " | ".join("`%s`" % t for t in TOOLS) + " |", "|---:|" + "---:|" * len(TOOLS)]
    for n in SIZES:
        lines.append("| %d | " % n + " | ".join("%.3f" % med(taken[(t, "tierfs", n)]) for t in TOOLS) + " |")
    lines += ["", END]
    section = "\n".join(lines)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
