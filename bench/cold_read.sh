#!/usr/bin/env bash
# bench/cold_read.sh OLD-TIERFS NEW-TIERFS [ROUNDS]: CPU per GiB of a cold sequential read
# from S3, two tierfs builds side by side (issue: half the CPU per GiB on cold reads).
#
# A throwaway Ceph (tests/servers.py: mon, memstore OSD, radosgw on 127.0.0.1) is the S3
# store, unless TIERFS_TEST_S3_ENDPOINT and its keys are set (then that one is used). For
# each round and build, alternating old, new, old, new...: a fresh volume on S3 (SQLite
# metadata, no trash), SIZE MiB written with dd, a remount with an empty disk cache on
# tmpfs, the page cache dropped, then `dd bs=1M` reads the file once. Measured: MiB/s, and
# CPU seconds per GiB of the FUSE process (utime + stime from /proc) and of radosgw.
# The raw GET rate of the same store (`tierfs objbench`, 4 MiB objects, 8 threads, the
# NEW build) runs once per round beside them. The section
# <!-- bench:cold-read:begin --> ... <!-- bench:cold-read:end --> of docs/benchmarks.md gets
# the median and range of each, with the command.
#
# Knobs: SIZE (MiB, default 2048: past the default memory cache of RAM/50, so buffers are
# recycled as they would be in a long read), LABEL_OLD / LABEL_NEW.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=$(realpath "${1:?usage: bench/cold_read.sh OLD-TIERFS NEW-TIERFS [ROUNDS]}")
NEW=$(realpath "${2:?usage: bench/cold_read.sh OLD-TIERFS NEW-TIERFS [ROUNDS]}")
ROUNDS=${3:-3}
SIZE=${SIZE:-2048}
LABEL_OLD=${LABEL_OLD:-old}
LABEL_NEW=${LABEL_NEW:-new}
PY=/usr/bin/python3
[ -x "$OLD" ] && [ -x "$NEW" ] || { echo "bench/cold_read.sh: both tierfs binaries must exist" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/cold_read.sh: must run as root (mounts, drop_caches)" >&2; exit 2; }

W=$(mktemp -d /tmp/tierfs-coldread.XXXXXX)
OWN_CEPH=0
cleanup() {
  for m in "$W"/*/mnt; do
    if mountpoint -q "$m" 2>/dev/null; then "$NEW" umount "$m" >/dev/null 2>&1 || fusermount3 -uz "$m"; fi
  done
  mountpoint -q "$W/cache" && umount -l "$W/cache"
  [ "$OWN_CEPH" = 1 ] && $PY "$ROOT/tests/servers.py" down ceph --dir "$W/servers" >/dev/null 2>&1
  rm -rf "$W"
}
trap cleanup EXIT INT TERM

if [ -z "${TIERFS_TEST_S3_ENDPOINT:-}" ]; then
  OWN_CEPH=1
  $PY "$ROOT/tests/servers.py" up ceph --dir "$W/servers" >/dev/null
  eval "$($PY "$ROOT/tests/servers.py" env --dir "$W/servers" | sed 's/^/export /')"
fi
mkdir -p "$W/cache"
mount -t tmpfs -o size=$((SIZE * 2 + 1024))m tmpfs "$W/cache"
S3=(--access-key "$TIERFS_TEST_S3_ACCESS_KEY" --secret-key "$TIERFS_TEST_S3_SECRET_KEY")
rgw_cpu() {  # centiseconds of CPU of every radosgw process
  local t=0 p
  for p in $(pgrep -x radosgw); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo $t
}

results=$W/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    bin=$OLD; [ "$v" = new ] && bin=$NEW
    d=$W/$v$round
    mkdir -p "$d/mnt"
    "$bin" format "sqlite3://$d/meta.db" "cold$v$round" --storage s3 --trash-days 0 \
      --bucket "$TIERFS_TEST_S3_ENDPOINT/cold-$v-$round-$$" "${S3[@]}" >/dev/null
    mnt() { "$bin" mount "sqlite3://$d/meta.db" "$d/mnt" -d --log "$d/log" --cache-dir "$W/cache/$v" --cache-size 8G; }
    mnt
    dd if=/dev/urandom of="$d/mnt/big" bs=1M count="$SIZE" status=none
    "$bin" umount "$d/mnt"
    rm -rf "$W/cache/$v"
    mnt
    sync
    echo 3 > /proc/sys/vm/drop_caches
    pid=$(pgrep -f "mount sqlite3://$d/meta.db" | head -1)
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); r0=$(rgw_cpu); t0=$(date +%s.%N)
    dd if="$d/mnt/big" of=/dev/null bs=1M status=none
    t1=$(date +%s.%N); c1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); r1=$(rgw_cpu)
    rm -f "$d/mnt/big"
    sleep 10  # the cleaner deletes the blocks (memstore keeps them in RAM)
    "$bin" umount "$d/mnt"
    rm -rf "$W/cache/$v"
    $PY - "$v" "$round" "$SIZE" "$t0" "$t1" "$c0" "$c1" "$r0" "$r1" >> "$results" <<'PY'
import json, sys
v, rnd, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0, t1, c0, c1, r0, r1 = map(float, sys.argv[4:10])
gib = size / 1024
print(json.dumps({"build": v, "round": rnd, "MiB/s": size / (t1 - t0),
                  "client CPU s/GiB": (c1 - c0) / 100 / gib, "radosgw CPU s/GiB": (r1 - r0) / 100 / gib}))
PY
    echo "round $round $v done" >&2
  done
  "$NEW" objbench "$TIERFS_TEST_S3_ENDPOINT/cold-raw-$round-$$" --storage s3 "${S3[@]}" --skip-functional \
    --big-size 4M --big-count 128 --small-count 1 -p 8 > "$W/objbench.txt" 2>&1 || true
  $PY - "$round" "$W/objbench.txt" >> "$results" <<'PY'
import json, re, sys
text = open(sys.argv[2]).read()
# | get 4.0 MiB | COUNT | MiB/s | ops/s | avg ms | p99 ms | result | cpu s |
m = re.search(r"^\| get 4\.0 MiB \| (\d+) \| ([0-9.]+) \|.*\| ([0-9.]+) \|$", text, re.M)
if m:
    gib = int(m.group(1)) * 4 / 1024
    print(json.dumps({"build": "raw", "round": int(sys.argv[1]), "MiB/s": float(m.group(2)),
                      "client CPU s/GiB": float(m.group(3)) / gib}))
PY
done

$PY - "$results" "$ROOT/docs/benchmarks.md" "$LABEL_OLD" "$LABEL_NEW" "$ROUNDS" "$SIZE" "$ROOT/bench" <<'PY'
import json, statistics, sys, time
path, doc, lold, lnew, rounds, size, bench = sys.argv[1:8]
sys.path.insert(0, bench)
from doc_section import write_section
rows = [json.loads(l) for l in open(path)]
def cell(build, m):
    xs = [r[m] for r in rows if r["build"] == build and m in r]
    if not xs:
        return ""
    f = "%.0f" if m == "MiB/s" else "%.2f"
    return (f + " (" + f + "-" + f + ")") % (statistics.median(xs), min(xs), max(xs))
metrics = ["MiB/s", "client CPU s/GiB", "radosgw CPU s/GiB"]
out = ["<!-- bench:cold-read:begin -->", "## Cold sequential read from S3: CPU per GiB, two builds", "",
       "Generated by `bench/cold_read.sh` (rounds alternate between the builds; median, and min-max).",
       "One %s MiB file on a fresh volume (SQLite metadata, S3 on a throwaway Ceph radosgw with a "
       "memstore OSD on this machine), remounted with an empty disk cache on tmpfs, page cache "
       "dropped, read once with `dd bs=1M`. CPU: utime + stime of the FUSE process and of radosgw "
       "over the read. raw GET: `tierfs objbench`, 4 MiB objects, 8 threads." % size, "",
       "- Date: %s" % time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
       "- Load average at the end: %s" % " / ".join(open("/proc/loadavg").read().split()[:3]),
       "- Command: `LABEL_OLD=... LABEL_NEW=... SIZE=%s bench/cold_read.sh OLD-TIERFS NEW-TIERFS %s`" % (size, rounds),
       "- old: %s; new: %s" % (lold, lnew), "",
       "| build | " + " | ".join(metrics) + " |", "|---|" + "---:|" * len(metrics)]
for b, label in (("raw", "raw GET (objbench)"), ("old", "old"), ("new", "new")):
    out.append("| %s | %s |" % (label, " | ".join(cell(b, m) for m in metrics)))
out += ["", "<!-- bench:cold-read:end -->"]
section = "\n".join(out)
write_section(doc, "<!-- bench:cold-read:begin -->", "<!-- bench:cold-read:end -->", section)
print(section)
PY
