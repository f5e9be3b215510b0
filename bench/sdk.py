#!/usr/bin/python3
"""The Python SDK against the FUSE mount of the same volume and tmpfs (issue "Python SDK",
Measure): a PyTorch DataLoader reading small files for several epochs, and torch.load of a
big checkpoint, side by side in one run.

    sudo /usr/bin/python3 bench/sdk.py [--files 3000] [--size-kib 100] [--epochs 3]
                                       [--ckpt-mib 1024] [--workers 4] [--runs 3]

TierFS: the embedded default (SQLite, local bucket on this disk). The mount and the SDK's
client have a fresh disk cache directory for each cold round; the SDK's forked workers
run with memory caches (a disk cache directory serves one process). Cold: the client or the mount just started
and the page cache dropped (every block from the bucket); warm: the epochs after the first,
and a second torch.load. DataLoader: map-style, batch 32, persistent workers (forked),
items are the files' bytes. Median (min-max) over the interleaved rounds. Writes the "sdk"
section of docs/benchmarks.md."""
import argparse
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
sys.path.insert(0, os.path.join(REPO, "build", "python"))
os.environ.setdefault("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))
import harness  # noqa: E402
import torch  # noqa: E402
import torch.utils.data  # noqa: E402

import tierfs  # noqa: E402
from doc_section import write_section  # noqa: E402
from fastpaths import cell  # noqa: E402
from passthrough import drop_caches  # noqa: E402
from tierfs import torch_data  # noqa: E402

BEGIN, END = "<!-- BEGIN sdk (bench/sdk.py) -->", "<!-- END sdk (bench/sdk.py) -->"
MiB = 1 << 20
TARGETS = ("tmpfs", "FUSE mount", "SDK")


class LocalFiles(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            return f.read()


def epochs(dataset, n, workers):
    """Files per second of each of n epochs."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=workers, collate_fn=list,
                                         persistent_workers=True)
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        count = sum(len(b) for b in loader)
        out.append(count / (time.monotonic() - t0))
        assert count == len(dataset), count
    del loader
    return out


def timed_load(fn):
    t0 = time.monotonic()
    state = fn()
    dt = time.monotonic() - t0
    size = state["w"].numel() * 4
    del state
    return size / MiB / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--size-kib", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--ckpt-mib", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "benchmarks.md"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tierfs-sdkbench-", dir="/var/tmp")
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dM" % (a.ckpt_mib + a.files * a.size_kib // 1024 + 512),
                    "tmpfs", tmpfs], check=True)
    vol = harness.Volume("sdkbench", base=work)
    caches = os.path.join(work, "caches")
    try:
        vol.format(trash_days=0)
        vol.mount("--cache-dir", os.path.join(caches, "fill"))
        names = ["/data/f%05d" % i for i in range(a.files)]
        for root in (tmpfs, vol.mnt):
            os.makedirs(root + "/data")
            for n in names:
                with open(root + n, "wb") as f:
                    f.write(os.urandom(a.size_kib << 10))
            torch.save({"w": torch.rand(a.ckpt_mib * MiB // 4)}, root + "/ckpt.pt")
        subprocess.run(["sync"], check=True)
        vol.umount()
        res = {}
        for r in range(a.runs):
            for t in TARGETS:
                drop_caches()
                if t == "tmpfs":
                    ds, load = LocalFiles([tmpfs + n for n in names]), lambda: torch.load(tmpfs + "/ckpt.pt")
                    client = None
                elif t == "FUSE mount":
                    shutil.rmtree(caches, ignore_errors=True)
                    vol.mount("--cache-dir", os.path.join(caches, str(r)))
                    drop_caches()
                    ds, load = LocalFiles([vol.mnt + n for n in names]), lambda: torch.load(vol.mnt + "/ckpt.pt")
                    client = None
                else:
                    shutil.rmtree(caches, ignore_errors=True)
                    client = tierfs.Client(vol.meta_url, cache_dir=os.path.join(caches, "sdk%d" % r))
                    ds = torch_data.FileDataset(client, "/data")
                    assert len(ds) == a.files
                    load = lambda: torch_data.load(client, "/ckpt.pt")  # noqa: E731
                # The checkpoint first (cold), then the small files, then the checkpoint warm.
                res.setdefault((t, "ckpt cold"), []).append(timed_load(load))
                per_epoch = epochs(ds, a.epochs, a.workers)
                res.setdefault((t, "small cold"), []).append(per_epoch[0])
                res.setdefault((t, "small warm"), []).extend(per_epoch[1:])
                res.setdefault((t, "ckpt warm"), []).append(timed_load(load))
                if client is not None:
                    client.close()
                if t == "FUSE mount":
                    # Unmounted between its turns: its disk cache still takes in what the
                    # cold reads fetched, which would run beside the next target's reads.
                    vol.umount()
                print("round %d %-10s ckpt cold %.0f MiB/s warm %.0f MiB/s; files/s by epoch %s" % (
                    r + 1, t, res[(t, "ckpt cold")][-1], res[(t, "ckpt warm")][-1],
                    [round(x) for x in per_epoch]), flush=True)
        write_doc(a, res)
    finally:
        vol.cleanup()
        subprocess.run(["umount", tmpfs])
        shutil.rmtree(work, ignore_errors=True)


def write_doc(a, res):
    lines = [BEGIN, "", "## Python SDK: PyTorch DataLoader and torch.load (bench/sdk.py)", "",
             "`sudo /usr/bin/python3 bench/sdk.py --files %d --size-kib %d --epochs %d --ckpt-mib %d --workers %d "
             "--runs %d` on %s (%d cores), %s, torch %s. TierFS: the embedded default (SQLite, local bucket on ext4); "
             "the mount and the SDK's client with a fresh disk cache each round (the SDK's forked DataLoader workers with memory caches: a disk cache directory serves one process). Cold: just started, page "
             "cache dropped; warm: epochs 2-%d, and a second load. Median (min-max) over %d interleaved rounds." % (
                 a.files, a.size_kib, a.epochs, a.ckpt_mib, a.workers, a.runs, os.uname().nodename,
                 os.cpu_count(), os.uname().release, torch.__version__, a.epochs, a.runs), "",
             "| target | small files/s, cold epoch | small files/s, warm epochs | torch.load MiB/s, cold | "
             "torch.load MiB/s, warm |", "|---|---|---|---|---|"]
    for t in TARGETS:
        lines.append("| %s | %s | %s | %s | %s |" % (t, cell(res[(t, "small cold")]), cell(res[(t, "small warm")]),
                                                     cell(res[(t, "ckpt cold")]), cell(res[(t, "ckpt warm")])))
    med = {k: statistics.median(v) for k, v in res.items()}
    ratio = lambda k, t: med[("SDK", k)] / med[(t, k)]  # noqa: E731
    lines += ["", "The issue's goals, from the medians: the SDK against the mount, small files %.2fx cold and %.2fx "
              "warm (goal 1.5x); torch.load %.2fx cold and %.2fx warm (goal 1.0x); the warm small-file epoch at "
              "%.2fx of tmpfs's rate (goal within 2x, 0.5). tmpfs itself reads the warm epoch at %.2fx the mount's "
              "rate: with 4 workers on 2 cores the DataLoader's own work (a process per worker, the items "
              "pickled to the parent) bounds every target." % (
                  ratio("small cold", "FUSE mount"), ratio("small warm", "FUSE mount"),
                  ratio("ckpt cold", "FUSE mount"), ratio("ckpt warm", "FUSE mount"),
                  ratio("small warm", "tmpfs"), med[("tmpfs", "small warm")] / med[("FUSE mount", "small warm")]),
              "", END]
    write_section(a.doc, BEGIN, END, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
