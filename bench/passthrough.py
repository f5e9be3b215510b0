#!/usr/bin/env python3
"""What FUSE passthrough (fuse/kernel_passthrough.h) buys a cached file: a sequential
read, and torch.load of a checkpoint, after a remount, every block in the disk cache on
tmpfs.

    sudo bench/passthrough.py [--gib 1] [--runs 5]

Targets, interleaved in every round (the page cache dropped before each read):
  - tmpfs: the file where it was made (the limit: memory);
  - passthrough_ll: libfuse3's example over that tmpfs (every read a FUSE round trip);
  - tierfs user space: TierFS mounted with --no-passthrough (blocks copied out of the cache
    files, verified, copied into the kernel);
  - tierfs passthrough, first open: the first read after a remount (the copies found in the
    cache are checked in the background from the mount on; a read that starts before its
    copy's check ended goes through user space);
  - tierfs passthrough: the next read (the kernel reads the verified copy).
For each: GiB/s of a 1 MiB-buffer sequential read of the whole file, and the CPU seconds
per GiB its daemon spent (none for tmpfs); torch.load seconds for a state dict of the same
size when PyTorch (Debian: python3-torch) is installed. Median and spread over the runs.
Writes the "passthrough" section of docs/benchmarks.md."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
import harness  # noqa: E402
from doc_section import write_section  # noqa: E402
from passthrough_ll import PassthroughLL  # noqa: E402

BEGIN, END = "<!-- BEGIN passthrough (bench/passthrough.py) -->", "<!-- END passthrough (bench/passthrough.py) -->"
MIB = 1 << 20
TARGETS = ["tmpfs", "passthrough_ll", "tierfs user space", "tierfs passthrough, first open", "tierfs passthrough"]
TORCH_SAVE = """
import sys, torch
n = int(sys.argv[2]) * (1 << 20) // 4 // (1 << 20)
torch.save({"w%d" % i: torch.randn(1 << 20) for i in range(n)}, sys.argv[1])
"""
TORCH_LOAD = """
import sys, time, torch
t = time.monotonic()
torch.load(sys.argv[1])
print(time.monotonic() - t)
"""


def drop_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_seconds(pid):
    if not pid:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seq_read(path, pid):
    drop_caches()
    c0 = cpu_seconds(pid)
    t0 = time.monotonic()
    n = 0
    buf = bytearray(MIB)
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
    dt = time.monotonic() - t0
    return n / dt / (1 << 30), (cpu_seconds(pid) - c0) / (n / (1 << 30))


def wait_copies(mnt, n, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        fc = json.loads(os.getxattr(mnt, "tierfs.stats")).get("flat_copies", {})
        if fc.get("built", 0) + fc.get("verified", 0) >= n:
            return
        time.sleep(0.1)
    raise SystemExit("the copies were not ready after %d s: %s" % (timeout, fc))


def torch_load(path):
    drop_caches()
    out = subprocess.run(["/usr/bin/python3", "-c", TORCH_LOAD, path], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def have_torch():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    size_mib = int(a.gib * 1024)
    torch_ok = have_torch()
    work = tempfile.mkdtemp(prefix="tierfs-pt-bench-")
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dM" % (size_mib * 10 + 1024), "tmpfs", tmpfs], check=True)
    ptll_mnt = os.path.join(work, "ptll")
    ptll = None
    vols = []
    try:
        data = os.path.join(tmpfs, "data")
        os.makedirs(data)
        blob = os.path.join(data, "blob")
        with open(blob, "wb") as f:
            for _ in range(size_mib):
                f.write(os.urandom(MIB))
        ckpt = os.path.join(data, "ckpt.pt")
        if torch_ok:
            subprocess.run(["/usr/bin/python3", "-c", TORCH_SAVE, ckpt, str(size_mib)], check=True)
        files = ["blob"] + (["ckpt.pt"] if torch_ok else [])
        # passthrough_ll over the tmpfs
        ptll = PassthroughLL(data, ptll_mnt).start()
        # Two TierFS volumes (one per mode), caches on the tmpfs.
        modes = {"tierfs user space": ["--no-passthrough"], "tierfs passthrough": []}
        for name, extra in modes.items():
            v = harness.Volume("ptbench", base=work, mount_args=extra + [
                "--cache-dir", os.path.join(tmpfs, "cache-" + name.split()[-1]),
                "--passthrough-cache-size", "%dM" % (size_mib * 3)])
            vols.append((name, v))
            v.format()
            v.mount()
            for fn in files:
                shutil.copyfile(os.path.join(data, fn), os.path.join(v.mnt, fn))
                os.getxattr(os.path.join(v.mnt, fn), "tierfs.warmup")
                with open(os.path.join(v.mnt, fn), "rb") as f:
                    f.read(1)  # queues the copy (passthrough mode)
            if "passthrough" in name:
                wait_copies(v.mnt, len(files))
        res = {(t, k): [] for t in TARGETS for k in ("gibs", "cpu", "torch")}
        for r in range(a.runs):
            for t in TARGETS:
                if t == "tmpfs":
                    paths, pid = data, None
                elif t == "passthrough_ll":
                    paths, pid = ptll_mnt, ptll.pid
                else:
                    v = dict(vols)["tierfs user space" if t == "tierfs user space" else "tierfs passthrough"]
                    if t != "tierfs passthrough":  # after a remount
                        v.umount()
                        v.mount()
                    else:  # an open queues the check of a copy found at mount
                        for fn in files:
                            open(os.path.join(v.mnt, fn), "rb").close()
                        wait_copies(v.mnt, len(files))
                    paths, pid = v.mnt, v.pid
                gibs, cpu = seq_read(os.path.join(paths, "blob"), pid)
                res[(t, "gibs")].append(gibs)
                res[(t, "cpu")].append(cpu)
                if torch_ok:
                    if t == "tierfs passthrough, first open":  # its first open after a remount too
                        v.umount()
                        v.mount()
                    res[(t, "torch")].append(torch_load(os.path.join(paths, "ckpt.pt")))
                print("round %d %-32s %.2f GiB/s  %.3f cpu-s/GiB%s" % (
                    r + 1, t, gibs, cpu, ("  torch.load %.2f s" % res[(t, "torch")][-1]) if torch_ok else ""),
                    flush=True)
        write_doc(a, res, torch_ok, size_mib)
    finally:
        for _, v in vols:
            v.cleanup()
        if ptll:
            ptll.stop()
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return "%.2f-%.2f" % (min(xs), max(xs)) if xs else "-"


def write_doc(a, res, torch_ok, size_mib):
    tm = med(res[("tmpfs", "gibs")])
    lines = [BEGIN, "",
             "### Passthrough for cached files (bench/passthrough.py)", "",
             "`sudo bench/passthrough.py --gib %g --runs %d` on %s (%d cores), %s. A %d MiB file of random bytes "
             "(and, with PyTorch, a state dict of float32 tensors of the same size), the disk cache on tmpfs, "
             "every block cached; the page cache dropped before each read; targets interleaved in each of %d "
             "rounds. Median (min-max)." % (a.gib, a.runs, os.uname().nodename, os.cpu_count(), os.uname().release,
                                              size_mib, a.runs),
             "",
             "| target | sequential read GiB/s | / tmpfs | daemon CPU s/GiB |%s" % (
                 " torch.load s | tmpfs / it |" if torch_ok else ""),
             "|---|---|---|---|%s" % ("---|---|" if torch_ok else "")]
    tt = med(res[("tmpfs", "torch")]) if torch_ok else None
    for t in TARGETS:
        g = res[(t, "gibs")]
        row = "| %s | %.2f (%s) | %.2fx | %s |" % (t, med(g), spread(g), med(g) / tm,
                                                 "-" if t == "tmpfs" else "%.3f" % med(res[(t, "cpu")]))
        if torch_ok:
            tl = res[(t, "torch")]
            row += " %.2f (%s) | %.2fx |" % (med(tl), spread(tl), tt / med(tl))
        lines.append(row)
    lines += ["",
              "\"first open\" is the first read after a remount: the copies the cache holds are checked against "
              "their sums in the background from the mount on (newest first; one an open asks for next), and an "
              "open that comes before its copy's check ended reads through user space. The sequential read starts "
              "right after the mount, usually before the check of its (older) copy ends; torch.load starts after "
              "`import torch`, by which time the check of its copy has ended in most rounds. Later opens read the "
              "copies in the kernel.", "", END]
    write_section(a.doc, BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
