#!/bin/bash
# Shared-volume benchmarks, side by side in one run, written to docs/benchmarks.md:
#  1. per-operation metadata latency (lookup, getattr, create, rename, unlink, slice commit)
#     on SQLite, Redis and PostgreSQL, in process (bench/meta_bench, no FUSE);
#  2. sequential 1 MiB write and read through a mount with data on Ceph: TierFS via S3
#     (radosgw) and via RADOS (both with Redis metadata), next to s3fs and rclone mounted
#     on the same radosgw.
# Servers are throwaway ones started here (tests/servers.py, ports offset by 200) and
# stopped at the end.
#
# usage: bench/shared.sh            (QUICK=1: 256 MiB files and 500 metadata ops)
# env:   TIERFS, META_BENCH (binaries; default build/...), BENCH_WORK (scratch, default
#        build/bench/shared), BENCH_KIT (default ../shared/bench-kit), BENCH_DOC,
#        FIO_SIZE (default 1g), META_OPS (default 2000), TARGETS (default
#        "tierfs-s3 tierfs-rados s3fs rclone")
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE="bench/shared.sh"
[ -n "${QUICK:-}" ] && CMDLINE="QUICK=$QUICK $CMDLINE"
[ -n "${FIO_SIZE:-}" ] && CMDLINE="FIO_SIZE=$FIO_SIZE $CMDLINE"
TIERFS=${TIERFS:-$REPO/build/src/cmd/tierfs}
META_BENCH=${META_BENCH:-$REPO/build/bench/meta_bench}
BENCH_KIT=${BENCH_KIT:-$REPO/../shared/bench-kit}
BENCH_WORK=${BENCH_WORK:-$REPO/build/bench/shared}
BENCH_DOC=${BENCH_DOC:-$REPO/docs/benchmarks.md}
TARGETS=${TARGETS:-"tierfs-s3 tierfs-rados s3fs rclone"}
if [ -n "${QUICK:-}" ]; then : "${FIO_SIZE:=256m}" "${META_OPS:=500}"; fi
export FIO_SIZE=${FIO_SIZE:-1g}
META_OPS=${META_OPS:-2000}
export TIERFS_TEST_PORT_OFFSET=200
log() { echo "[shared.sh $(date +%H:%M:%S)] $*" >&2; }
die() { echo "shared.sh: $*" >&2; exit 1; }
[ -x "$TIERFS" ] || die "no tierfs binary at $TIERFS (build first)"
[ -x "$META_BENCH" ] || die "no meta_bench at $META_BENCH (build first)"
[ -x "$BENCH_KIT/run-bench.sh" ] || die "bench-kit not found at $BENCH_KIT"

rm -rf "$BENCH_WORK"; mkdir -p "$BENCH_WORK"
SRV=$BENCH_WORK/servers
RESULTS=$BENCH_WORK/results
MOUNTS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  python3 "$REPO/tests/servers.py" down all --dir "$SRV" >/dev/null 2>&1
}
trap cleanup EXIT
log "starting Redis, PostgreSQL and Ceph"
python3 "$REPO/tests/servers.py" up all --dir "$SRV" >&2 || die "servers did not start"
eval "$(python3 "$REPO/tests/servers.py" env --dir "$SRV")"
S3=$TIERFS_TEST_S3_ENDPOINT AK=$TIERFS_TEST_S3_ACCESS_KEY SK=$TIERFS_TEST_S3_SECRET_KEY

# ---- 1. metadata latency ------------------------------------------------------------
log "metadata latency, $META_OPS ops per operation and engine"
META_TABLE=$("$META_BENCH" -n "$META_OPS" "sqlite3://$BENCH_WORK/meta-bench.db" "$TIERFS_TEST_REDIS_URL/9" \
  "$TIERFS_TEST_PG_URL/tierfs_bench" | grep '^|') || die "meta_bench failed"
echo "$META_TABLE"

# ---- 2. sequential throughput on Ceph -------------------------------------------------
export BENCH_OUT=$RESULTS FIO_JOBS="01 03" SKIP_PY=1
mount_target() {  # name mountpoint
  local name=$1 mp=$2 bucket
  mkdir -p "$mp"
  case $name in
    tierfs-s3)
      "$TIERFS" format "$TIERFS_TEST_REDIS_URL/10" benchs3 --force --storage s3 --bucket "$S3/tierfs-bench-s3" \
        --access-key "$AK" --secret-key "$SK" >&2 &&
      "$TIERFS" mount -d "$TIERFS_TEST_REDIS_URL/10" "$mp" --log "$BENCH_WORK/$name.log" ;;
    tierfs-rados)
      "$TIERFS" format "$TIERFS_TEST_REDIS_URL/11" benchrados --force --storage rados --bucket "$TIERFS_TEST_RADOS_POOL" \
        --ceph-conf "$TIERFS_TEST_CEPH_CONF" >&2 &&
      "$TIERFS" mount -d "$TIERFS_TEST_REDIS_URL/11" "$mp" --log "$BENCH_WORK/$name.log" ;;
    s3fs)
      bucket=s3fs-bench
      TIERFS_ACCESS_KEY=$AK TIERFS_SECRET_KEY=$SK "$TIERFS" objbench "$S3/$bucket" --skip-bench >/dev/null 2>&1
      echo "$AK:$SK" > "$BENCH_WORK/s3fs.passwd"; chmod 600 "$BENCH_WORK/s3fs.passwd"
      s3fs "$bucket" "$mp" -o url="$S3" -o use_path_request_style -o passwd_file="$BENCH_WORK/s3fs.passwd" \
        -o multipart_size=16 -o parallel_count=8 ;;
    rclone)
      bucket=rclone-bench
      TIERFS_ACCESS_KEY=$AK TIERFS_SECRET_KEY=$SK "$TIERFS" objbench "$S3/$bucket" --skip-bench >/dev/null 2>&1
      cat > "$BENCH_WORK/rclone.conf" <<EOF
[ceph]
type = s3
provider = Ceph
access_key_id = $AK
secret_access_key = $SK
endpoint = $S3
EOF
      # rclone refuses to start when AWS_CA_BUNDLE is set for a plain-HTTP endpoint.
      env -u AWS_CA_BUNDLE rclone mount "ceph:$bucket" "$mp" --config "$BENCH_WORK/rclone.conf" --vfs-cache-mode writes \
        --cache-dir "$BENCH_WORK/rclone-cache" --daemon --daemon-wait 30s ;;
  esac
}
for t in $TARGETS; do
  mp=$BENCH_WORK/mnt-$t
  log "mounting $t"
  if ! mount_target "$t" "$mp"; then log "$t: mount failed"; continue; fi
  MOUNTS+=("$mp")
  for _ in $(seq 100); do mountpoint -q "$mp" && break; sleep 0.1; done
  log "fio on $t"
  "$BENCH_KIT/run-bench.sh" "$mp" "$t" >/dev/null 2>&1 || log "$t: run-bench.sh failed"
  fusermount3 -u "$mp" 2>/dev/null || umount "$mp"
done

FIO_TABLE=$(python3 - "$RESULTS" $TARGETS <<'EOF'
import json, os, sys
res, targets = sys.argv[1], sys.argv[2:]
def bw(t, job):
    try:
        with open(os.path.join(res, "bench-" + t, "fio-%s.json" % job)) as f:
            j = json.load(f)["jobs"][0]
        side = "write" if "write" in job else "read"
        return "%.0f" % (j[side]["bw_bytes"] / 1048576)
    except Exception:
        return "failed"
print("| target | seq write 1 MiB (MiB/s) | seq read 1 MiB (MiB/s) |")
print("|---|---:|---:|")
for t in targets:
    print("| %s | %s | %s |" % (t, bw(t, "01-seqwrite-1job"), bw(t, "03-seqread-1job")))
EOF
)
echo "$FIO_TABLE"

SECTION=$(cat <<EOF
<!-- bench:shared:begin -->
## Shared engines and stores

Command: \`$CMDLINE\` on $(date -u +%Y-%m-%d), $(nproc) cores. Servers are throwaway ones on
loopback (tests/servers.py): Redis 7 (append-only file, fsync every second), PostgreSQL 15
(fsync off), Ceph 16 with one memstore OSD and radosgw.

### Metadata: per-operation latency, one thread, in process (bench/meta_bench, $META_OPS ops each)

$META_TABLE

### Sequential throughput through a mount, data on Ceph (FIO_SIZE=$FIO_SIZE, bench-kit jobs 01 and 03)

TierFS uses Redis metadata in both rows; s3fs (path-style, 16 MiB parts, 8 in parallel) and
rclone (\`--vfs-cache-mode writes\`) mount a bucket on the same radosgw. The read follows the
write in the same mount, as in the bench-kit.

$FIO_TABLE
<!-- bench:shared:end -->
EOF
)
python3 - "$BENCH_DOC" "$SECTION" <<'EOF'
import re, sys
doc, section = sys.argv[1], sys.argv[2]
try:
    text = open(doc).read()
except FileNotFoundError:
    text = "# Benchmarks\n"
pat = re.compile(r"<!-- bench:shared:begin -->.*?<!-- bench:shared:end -->", re.S)
text = pat.sub(lambda m: section, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section + "\n"
open(doc, "w").write(text)
EOF
log "updated $BENCH_DOC"
