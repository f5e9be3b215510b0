#!/usr/bin/env python3
"""Incremental `tierfs sync` rounds from a TierFS volume: read from its change log
(--changes) against a full round (listing both sides), after the same changes, in one run;
each also as a --dry-run (finding the changes only, no copy).

    bench/sync_changes.py [--files N] [--dirs D] [--changed PCT,PCT...] [--repeat R] [--volume-tmpfs-gib G]

A SQLite volume with a change log (format --changelog-hours) holds N small files in D
directories, copied to two local directories. Each repetition, for each PCT, changes PCT% of the files
(appended through the client library: `tierfs sync` of the changed files into the volume),
then runs, order rotated, an incremental round into one copy and a full round into the
other; both must copy exactly the changed files. Reports wall seconds (median, min-max) and
the keys each round listed. Writes the table to docs/benchmarks.md ("sync --changes").
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from doc_section import write_section  # noqa: E402

TIERFS = os.environ.get("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs"))


def markers(trees_on_tmpfs):
    """The section's markers: a run with the trees on tmpfs has a section of its own."""
    where = "bench/sync_changes.py, trees on tmpfs" if trees_on_tmpfs else "bench/sync_changes.py"
    return "<!-- BEGIN sync-changes (%s) -->" % where, "<!-- END sync-changes (%s) -->" % where


DRY = ", finding only"  # the label of --dry-run rounds


def sync(*args):
    t = time.monotonic()
    p = subprocess.run([TIERFS, "sync", *args, "--json", "-q"], capture_output=True, text=True)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit("tierfs sync failed: " + p.stderr[-2000:])
    return wall, json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--dirs", type=int, default=1000)
    ap.add_argument("--changed", default="1", help="percents of the files changed before a round, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--volume-tmpfs-gib", type=int, default=0,
                    help="keep the volume (SQLite file and bucket) on a tmpfs of this size (0: with the trees)")
    ap.add_argument("--trees-tmpfs-gib", type=int, default=0,
                    help="keep the source tree and the two copies on a tmpfs of this size (0: the local disk); "
                    "the table then has a section of its own")
    a = ap.parse_args()
    begin, end = markers(a.trees_tmpfs_gib > 0)
    tmp = tempfile.mkdtemp(prefix="tierfs-bench-changes-")
    mounts = []
    if a.trees_tmpfs_gib:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dg" % a.trees_tmpfs_gib, "tmpfs", tmp], check=True)
        mounts.append(tmp)
    voldir = tmp
    if a.volume_tmpfs_gib:
        voldir = os.path.join(tmp, "vol")
        os.makedirs(voldir)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dg" % a.volume_tmpfs_gib, "tmpfs", voldir], check=True)
        mounts.insert(0, voldir)
    try:
        src = os.path.join(tmp, "src")
        names = []
        for i in range(a.files):
            d = os.path.join(src, "d%05d" % (i % a.dirs))
            os.makedirs(d, exist_ok=True)
            names.append(os.path.join("d%05d" % (i % a.dirs), "f%07d" % i))
            with open(os.path.join(src, names[-1]), "wb") as f:
                f.write(b"x" * 1024)
        db = os.path.join(voldir, "meta.db")
        subprocess.run([TIERFS, "format", "sqlite3://" + db, "bench", "--storage", "file", "--bucket",
                        os.path.join(voldir, "bucket"), "--trash-days", "0", "--changelog-hours", "24"],
                       check=True, capture_output=True)
        vol = "sqlite3://" + db + ":/data"
        t0, s = sync(src, vol, "--threads", "16")
        print("loaded %d files into the volume in %.1f s" % (s["copied"], t0), flush=True)
        inc, full = os.path.join(tmp, "inc"), os.path.join(tmp, "full")
        state = os.path.join(tmp, "state")
        sync(vol, inc, "--changes", state, "--threads", "16")
        sync(vol, full, "--threads", "16")
        rng = random.Random(1)
        res, listed = {}, {}

        def interleaved(r, label, copied):
            """Finding the changes only (--dry-run: nothing saved, nothing copied), an
            incremental and a full round each, order rotated by r; then the two rounds that
            copy, each copying `copied`."""
            for dry in (True, False):
                order = [("incremental" + label, inc, ["--changes", state, "--list-threads", "4"]),
                         ("full" + label, full, ["--list-threads", "4"])]
                for kind, dst, extra in (order[::-1] if r % 2 else order):
                    kind = kind.replace(label, DRY + label) if dry else kind
                    wall, s = sync(vol, dst, "--threads", "16", *extra, *(["--dry-run"] if dry else []))
                    if s["copied"] != copied or s["failed"]:
                        differ = subprocess.run(["diff", "-rq", inc, full], capture_output=True, text=True).stdout
                        sys.exit("%s round copied %d of %d changed files: %r\n%s" % (kind, s["copied"], copied, s,
                                                                                   differ[:2000]))
                    if kind.startswith("incremental") and s.get("round") != "incremental":
                        sys.exit("the round with --changes was not incremental: %r" % s)
                    res.setdefault(kind, []).append(wall)
                    listed[kind] = s["found"]
                    print("round %d %s: %.2f s, %d keys listed" % (r, kind, wall, s["found"]), flush=True)

        pcts = [float(p) for p in a.changed.split(",")]
        for r in range(a.repeat):
            for pct in pcts:
                changed = rng.sample(names, max(1, int(a.files * pct / 100)))
                stage = os.path.join(tmp, "stage")
                for n in changed:
                    os.makedirs(os.path.join(stage, os.path.dirname(n)), exist_ok=True)
                    with open(os.path.join(stage, n), "wb") as f:
                        f.write(b"y" * (1024 + r + 1))
                sync(stage, vol, "--threads", "16")
                shutil.rmtree(stage)
                interleaved(r, " (%g%%: %d files changed)" % (pct, len(changed)), len(changed))
        for r in range(a.repeat):  # nothing changed: the cost of finding out, without copies
            interleaved(r, ", nothing changed", 0)
        med = {k: statistics.median(v) for k, v in res.items()}
        cmd = "bench/sync_changes.py --files %d --dirs %d --changed %s --repeat %d%s%s" % (
            a.files, a.dirs, a.changed, a.repeat,
            " --volume-tmpfs-gib %d" % a.volume_tmpfs_gib if a.volume_tmpfs_gib else "",
            " --trees-tmpfs-gib %d" % a.trees_tmpfs_gib if a.trees_tmpfs_gib else "")
        title = "## sync --changes: incremental rounds from a volume's change log"
        out = [begin, title + (" (trees on tmpfs)" if a.trees_tmpfs_gib else ""), "",
               "`%s` (%s). A SQLite volume with a change log holding %d files of 1 KiB in %d directories, synced "
               "to two local directories; before each round some of the files change (rewritten through the "
               "client library), then an incremental round (`--changes`) and a full round run, order rotated; "
               "both copy exactly the changed files." % (cmd, time.strftime("%Y-%m-%d"), a.files, a.dirs), "",
               "| round | seconds (median, min-max of %d) | keys listed |" % a.repeat, "|---|---|---|"]
        labels = [" (%g%%: %d files changed)" % (p, max(1, int(a.files * p / 100))) for p in pcts]
        labels.append(", nothing changed")
        for label in labels:
            for k in ("incremental" + label, "full" + label, "incremental" + DRY + label, "full" + DRY + label):
                out.append("| %s | %.2f (%.2f-%.2f) | %d |" % (k, med[k], min(res[k]), max(res[k]), listed[k]))
        out.append("")
        for label in labels:
            out.append("- %s: the incremental round %.1fx faster than the full round; finding the changes "
                       "(--dry-run) %.1fx faster." % (
                           label.strip(" ,()"), med["full" + label] / med["incremental" + label],
                           med["full" + DRY + label] / med["incremental" + DRY + label]))
        floor = med["incremental" + DRY + ", nothing changed"]
        out += ["", "Both rounds of a pair copy the same files; each run also starts the client and opens the "
                "volume (an incremental round that finds nothing takes %.2f s: the floor of every round here). "
                "The rounds marked %s run with --dry-run: they find what changed and copy nothing, so they "
                "compare the cost of finding the changes (the change log against listing both sides)."
                % (floor, DRY.strip(" ,")), end]
        write_section(os.path.join(REPO, "docs", "benchmarks.md"), begin, end, "\n".join(out))
        print("\n".join(out))
    finally:
        for m in mounts:  # the volume's tmpfs first: it is inside the trees' one
            subprocess.run(["umount", m])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
