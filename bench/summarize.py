#!/usr/bin/env python3
"""Turn one bench/run.sh result folder into the core section of docs/benchmarks.md.

usage: summarize.py --results RUN_DIR --kit BENCH_KIT --doc DOC.md --cmdline "..."
                    [--tags tmpfs,passthrough,tierfs-disk,tierfs-tmpfs] [--buffer-size 300M]
                    [--knobs "K=V ..."] [--extra "line"]...

RUN_DIR holds one bench-<TAG>/ folder per target (written by the bench-kit's run-bench.sh),
plus, written by run.sh, bench-<TAG>/status.txt (one line: ok / failed: why) and, for TierFS
targets, bench-<TAG>/rss.json ({"pid", "vmhwm_kib", "client_alive_at_end"}).

The section between <!-- bench:core:begin --> and <!-- bench:core:end --> in DOC.md is
replaced (the file and markers are created if absent); everything else in DOC.md is kept.
The section is also written to RUN_DIR/summary.md and printed.

Exit status: 0, or 3 when a ratio is below its floor or the client memory is above its limit
(run.sh turns that into a failure only with STRICT=1).
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys

BEGIN = "<!-- bench:core:begin -->"
END = "<!-- bench:core:end -->"
FLOOR = 0.5
MIB = 2**20
BASE_TAG = "passthrough"
TIERFS_TMPFS_TAG = "tierfs-tmpfs"
TIERFS_TAGS = ("tierfs-disk", "tierfs-tmpfs")

TARGET_DESCRIPTIONS = {
    "tmpfs": "a fresh tmpfs (the physical limit of this machine)",
    "passthrough": "libfuse3's low-level passthrough example (passthrough_ll) over a fresh "
                   "tmpfs: the cost of FUSE itself",
    "tierfs-disk": "TierFS, SQLite metadata and file-bucket object store on the repository's "
                   "local disk",
    "tierfs-tmpfs": "TierFS, SQLite metadata and file-bucket object store on a fresh tmpfs",
}


def load_json(path):
    """Loads a JSON file; fio may print warnings before the object, so skip to the first '{'."""
    try:
        with open(path) as f:
            txt = f.read()
        return json.loads(txt[txt.index("{"):])
    except (OSError, ValueError):
        return None


def fio_bw(result_dir, jobname, rw):
    """Bandwidth in bytes/s of fio job `jobname` (direction rw) in any fio-*.json, or None."""
    for path in sorted(glob.glob(os.path.join(result_dir, "fio-*.json"))):
        data = load_json(path)
        if not data:
            continue
        for job in data.get("jobs", []):
            if job.get("jobname") != jobname:
                continue
            r = job.get(rw) or {}
            if r.get("io_bytes", 0) > 0 and not job.get("error"):
                return float(r["bw_bytes"])
    return None


def smallfiles_rate(result_dir, phase, name="smallfiles"):
    """files/s of a smallfiles.py phase (create/read/delete), or None."""
    data = load_json(os.path.join(result_dir, name + ".json"))
    if not data:
        return None
    ph = data.get("phases", {}).get(phase)
    return float(ph["files_per_s"]) if ph else None


# (label, unit, extractor returning a raw value, scale for display)
RATIO_METRICS = [
    ("sequential write 1 MiB, 1 job", "MiB/s",
     lambda d: fio_bw(d, "seqwrite-1job-bs1M", "write"), MIB),
    ("sequential read 1 MiB, 1 job", "MiB/s",
     lambda d: fio_bw(d, "seqread-1job-bs1M", "read"), MIB),
    ("small files 64 KiB create", "files/s",
     lambda d: smallfiles_rate(d, "create"), 1),
    ("small files 64 KiB read", "files/s",
     lambda d: smallfiles_rate(d, "read"), 1),
]


def parse_size(text):
    """'300M' / '300MiB' / '1G' / '512k' -> bytes; a bare number is taken as MiB."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKmMgGtT]?)(i?[bB])?\s*", text or "")
    if not m:
        return None
    num, unit = float(m.group(1)), m.group(2).upper()
    mult = {"": MIB, "K": 2**10, "M": MIB, "G": 2**30, "T": 2**40}[unit]
    return int(num * mult)


def fmt_num(v, scale=1):
    if v is None:
        return "n/a"
    v = v / scale
    return "%.1f" % v if v < 100 else "%.0f" % v


def machine_lines():
    lines = []
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = "%.1f GiB" % (int(line.split()[1]) * 1024 / 2**30)
                    break
    except OSError:
        pass
    lines.append("- Machine: %d CPUs%s, %s RAM, Linux %s (%s)" % (
        os.cpu_count() or 0, " (%s)" % cpu if cpu else "", mem, platform.release(),
        platform.machine()))
    try:
        lines.append("- Load average (1/5/15 min) when the summary was written: %.1f / %.1f / %.1f"
                     % os.getloadavg())
    except OSError:
        pass
    for cmd, label in ((["fio", "--version"], "fio"), (["fusermount3", "-V"], "fusermount3")):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            txt = (out.stdout or out.stderr).strip().splitlines()
            if txt:
                lines.append("- %s: %s" % (label, txt[0].strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    return lines


def read_status(result_dir):
    try:
        with open(os.path.join(result_dir, "status.txt")) as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "not run"


def build_section(a):
    tags = [t for t in a.tags.split(",") if t]
    dirs = {t: os.path.join(a.results, "bench-" + t) for t in tags}
    out = [BEGIN, "## Core comparison: tmpfs, FUSE passthrough, TierFS", ""]
    out.append("Generated by `bench/run.sh` (see `bench/README.md`); do not edit by hand, "
               "rerun the script.")
    out.append("")
    out.append("- Date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"))
    out.extend(machine_lines())
    for line in a.extra or []:
        out.append("- " + line)
    out.append("- Command: `%s`" % a.cmdline)
    if a.knobs:
        out.append("- Effective bench-kit knobs: `%s`" % a.knobs)
    out.append("")
    out.append("Targets:")
    out.append("")
    for t in tags:
        out.append("- `%s`: %s. Status: %s." % (t, TARGET_DESCRIPTIONS.get(t, t),
                                                 read_status(dirs[t])))
    out.append("")

    # Side-by-side table from the bench-kit's own report.py.
    present = [dirs[t] for t in tags if os.path.isdir(dirs[t])]
    out.append("### Side by side (bench-kit report.py)")
    out.append("")
    out.append("```text")
    if present:
        rep = subprocess.run([sys.executable, os.path.join(a.kit, "report.py")] + present,
                             capture_output=True, text=True)
        out.extend(rep.stdout.rstrip("\n").splitlines())
        if rep.returncode != 0:
            out.append("(report.py exited with %d: %s)" % (rep.returncode, rep.stderr.strip()))
    else:
        out.append("(no result folders)")
    out.append("```")
    out.append("")

    failed = False
    # Ratios TierFS-on-tmpfs / passthrough.
    out.append("### Ratios: `%s` / `%s` (floor %.1f)" % (TIERFS_TMPFS_TAG, BASE_TAG, FLOOR))
    out.append("")
    out.append("| metric | unit | %s | %s | ratio | vs floor %.1f |" % (BASE_TAG, TIERFS_TMPFS_TAG, FLOOR))
    out.append("|---|---|---:|---:|---:|---|")
    for label, unit, fn, scale in RATIO_METRICS:
        base = fn(dirs[BASE_TAG]) if BASE_TAG in dirs else None
        tier = fn(dirs[TIERFS_TMPFS_TAG]) if TIERFS_TMPFS_TAG in dirs else None
        if base and tier is not None:
            ratio = tier / base
            mark = "PASS" if ratio >= FLOOR else "BELOW"
            failed |= mark == "BELOW"
            rtxt = "%.2f" % ratio
        else:
            rtxt, mark = "n/a", "n/a (target not run or no result)"
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            label, unit, fmt_num(base, scale), fmt_num(tier, scale), rtxt, mark))
    out.append("")

    # Peak client memory.
    buf = parse_size(a.buffer_size)
    limit = buf + 100 * MIB if buf is not None else None
    out.append("### TierFS client peak memory (VmHWM) vs `--buffer-size` + 100 MiB")
    out.append("")
    out.append("| target | peak RSS (MiB) | --buffer-size | limit (MiB) | result |")
    out.append("|---|---:|---:|---:|---|")
    for t in tags:
        if t not in TIERFS_TAGS:
            continue
        rss = load_json(os.path.join(dirs[t], "rss.json"))
        if not rss or not rss.get("vmhwm_kib"):
            out.append("| %s | n/a | %s | %s | n/a (no sample) |" % (
                t, a.buffer_size, fmt_num(limit, MIB)))
            continue
        peak = int(rss["vmhwm_kib"]) * 1024
        if limit is None:
            mark = "n/a (cannot parse buffer size)"
        else:
            mark = "PASS" if peak <= limit else "ABOVE"
            failed |= mark == "ABOVE"
        if not rss.get("client_alive_at_end", True):
            mark += " (client was gone at the end of the run; last sample)"
        out.append("| %s | %.1f | %s | %s | %s |" % (
            t, peak / MIB, a.buffer_size, fmt_num(limit, MIB), mark))
    if not any(t in TIERFS_TAGS for t in tags):
        out.append("| (no TierFS target in this run) | | | | |")
    out.append("")
    out.append(END)
    return "\n".join(out) + "\n", failed


def write_doc(doc, section):
    try:
        with open(doc) as f:
            old = f.read()
    except FileNotFoundError:
        old = None
    if old is None:
        new = ("# TierFS benchmarks\n\n"
               "Measured results, produced by the scripts in `bench/` (see `bench/README.md`).\n"
               "Each section between `<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->`\n"
               "markers is regenerated by its script; text outside the markers is kept.\n\n"
               + section)
    elif BEGIN in old and END in old and old.index(BEGIN) < old.index(END):
        i, j = old.index(BEGIN), old.index(END) + len(END)
        rest = old[j:]
        if rest.startswith("\n"):
            rest = rest[1:]
        new = old[:i] + section + rest
    else:
        new = old.rstrip("\n") + "\n\n" + section
    os.makedirs(os.path.dirname(os.path.abspath(doc)), exist_ok=True)
    tmp = doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--cmdline", required=True)
    ap.add_argument("--tags", default="tmpfs,passthrough,tierfs-disk,tierfs-tmpfs")
    ap.add_argument("--buffer-size", default="300M")
    ap.add_argument("--knobs", default="")
    ap.add_argument("--extra", action="append")
    a = ap.parse_args()
    section, failed = build_section(a)
    with open(os.path.join(a.results, "summary.md"), "w") as f:
        f.write(section)
    write_doc(a.doc, section)
    sys.stdout.write(section)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
