#!/bin/bash
# Client-cache benchmark: reads through a mount with data on Ceph, cold, warm in the same
# mount and warm after a remount, for TierFS (S3 and RADOS) next to s3fs and rclone on the
# same radosgw, and next to the limits: the store's raw GET rate (tierfs objbench), tmpfs,
# and libfuse3's passthrough_ll over tmpfs. Writes the section between
# <!-- bench:cache:begin --> and <!-- bench:cache:end --> of docs/benchmarks.md.
#
# usage: bench/cache.sh            full run (2 GiB file, 3000 small files, 3 rounds)
#        QUICK=1 bench/cache.sh    256 MiB file, 500 small files, 128 MiB checkpoint, 1 round
#
# Workloads (WORKLOADS, default "seq small numpy torch"); before every measured phase (but
# torch's "hot") the kernel's page cache and the Ceph OSD's caches are dropped:
#   seq    one SEQ_SIZE MiB file read with fio, 1 MiB reads: cold, warm, after remount
#   small  SMALL_FILES files of SMALL_KIB KiB read in random order by SMALL_THREADS threads,
#          three epochs, the third after a remount
#   numpy  python3 -c 'import numpy' with numpy copied into the volume: cold, after remount
#   torch  torch.load of a TORCH_MIB MiB checkpoint: cold, warm, hot (again, the kernel's
#          page cache kept: a node loading the same model twice), after remount
# Targets (TARGETS, default all): get-s3 get-rados (objbench, seq and small only; its GETs run
# after the same cache drop, through objbench --before-get), tmpfs,
# passthrough, tierfs-s3, tierfs-rados (Redis metadata), s3fs, rclone (--vfs-cache-mode full).
# Rounds (ROUNDS) are interleaved: each round runs every target once, in a rotated order.
#
# Environment (see bench/README.md): QUICK ROUNDS TARGETS WORKLOADS SEQ_SIZE SMALL_FILES
#   SMALL_KIB SMALL_THREADS TORCH_MIB OBJBENCH_BIG_COUNT OBJBENCH_SMALL_COUNT OBJBENCH_THREADS
#   TIERFS_CACHE_OPTS (default "--cache-dir {cache} --cache-size 8G"; {cache} = the target's
#   folder on the cache tmpfs) TIERFS_MOUNT_OPTS S3FS_OPTS RCLONE_OPTS PASSTHROUGH_OPTS
#   DATA_TMPFS_SIZE CACHE_TMPFS_SIZE MEASURE_TIMEOUT KEEP_WORK
#   paths: TIERFS BENCH_WORK BENCH_OUT BENCH_DOC BENCH_BUILD LIBFUSE_EXAMPLES PYTHON NUMPY_DIR
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
HERE=$REPO/bench
HELPER=$HERE/cache.py

case ${1:-} in
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "cache.sh: no arguments expected (configure with environment variables; see --help)" >&2; exit 2 ;;
esac

# ---- the command line as given (before defaults are filled in); no machine paths
KNOBS="QUICK ROUNDS TARGETS WORKLOADS SEQ_SIZE SMALL_FILES SMALL_KIB SMALL_THREADS TORCH_MIB
       OBJBENCH_BIG_COUNT OBJBENCH_SMALL_COUNT OBJBENCH_THREADS TIERFS_CACHE_OPTS TIERFS_MOUNT_OPTS
       S3FS_OPTS RCLONE_OPTS PASSTHROUGH_OPTS DATA_TMPFS_SIZE CACHE_TMPFS_SIZE MEASURE_TIMEOUT KEEP_WORK"
PATH_KNOBS="TIERFS BENCH_WORK BENCH_OUT BENCH_DOC BENCH_BUILD LIBFUSE_EXAMPLES PYTHON NUMPY_DIR"
quote() { case $1 in *[!A-Za-z0-9_.,:=%+/-]*|"") printf "'%s'" "$1" ;; *) printf '%s' "$1" ;; esac; }
CMDLINE=""
for v in $KNOBS; do [ -n "${!v+x}" ] && CMDLINE+="$v=$(quote "${!v}") "; done
for v in $PATH_KNOBS; do [ -n "${!v+x}" ] && CMDLINE+="$v=<path> "; done
CMDLINE+="bench/cache.sh"

# Messages go to the stderr the script started with, also from the traps, which run inside
# whatever redirection the interrupted command had.
exec {ERR}>&2
die() { echo "cache.sh: $*" >&$ERR; exit 1; }
log() { echo "[cache.sh $(date +%H:%M:%S)] $*" >&$ERR; }

# ---- configuration
if [ -n "${QUICK:-}" ] && [ "$QUICK" != 0 ]; then
  : "${ROUNDS:=1}" "${SEQ_SIZE:=256}" "${SMALL_FILES:=500}" "${TORCH_MIB:=128}"
  : "${OBJBENCH_BIG_COUNT:=32}" "${OBJBENCH_SMALL_COUNT:=200}" "${MEASURE_TIMEOUT:=600}"
fi
ROUNDS=${ROUNDS:-3}
SEQ_SIZE=${SEQ_SIZE:-2048}            # MiB
SMALL_FILES=${SMALL_FILES:-3000}
SMALL_KIB=${SMALL_KIB:-100}
SMALL_THREADS=${SMALL_THREADS:-4}
TORCH_MIB=${TORCH_MIB:-1024}
OBJBENCH_BIG_COUNT=${OBJBENCH_BIG_COUNT:-128}
OBJBENCH_SMALL_COUNT=${OBJBENCH_SMALL_COUNT:-1000}
OBJBENCH_THREADS=${OBJBENCH_THREADS:-8}
MEASURE_TIMEOUT=${MEASURE_TIMEOUT:-1800}
TIERFS_CACHE_OPTS=${TIERFS_CACHE_OPTS-"--cache-dir {cache} --cache-size 8G"}
TIERFS_MOUNT_OPTS=${TIERFS_MOUNT_OPTS:-}
S3FS_OPTS=${S3FS_OPTS-"-o multipart_size=16 -o parallel_count=8"}
RCLONE_OPTS=${RCLONE_OPTS:-}
PASSTHROUGH_OPTS=${PASSTHROUGH_OPTS:-}
BIG=$((SEQ_SIZE > TORCH_MIB ? SEQ_SIZE : TORCH_MIB))
DATA_TMPFS_SIZE=${DATA_TMPFS_SIZE:-$((BIG + 1024))m}
CACHE_TMPFS_SIZE=${CACHE_TMPFS_SIZE:-10g}
TARGETS=${TARGETS:-"get-s3 get-rados tmpfs passthrough tierfs-s3 tierfs-rados s3fs rclone"}
WORKLOADS=${WORKLOADS:-"seq small numpy torch"}
TIERFS=${TIERFS:-$REPO/build/src/cmd/tierfs}
BENCH_WORK=${BENCH_WORK:-$REPO/build/bench/cache}
BENCH_DOC=${BENCH_DOC:-$REPO/docs/benchmarks.md}
if [ -z "${PYTHON:-}" ]; then
  # Debian's interpreter: python3-numpy and python3-torch install for it.
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=$(command -v python3); fi
fi
export TIERFS_TEST_PORT_OFFSET=300 TIERFS_CEPH_BLUESTORE=1

declare -A PHASES=([seq]="cold warm +remount" [small]="epoch1 epoch2 +epoch3" [numpy]="cold +remount"
                   [torch]="cold warm =hot +remount")  # "+": remount before the phase; "=": no cache drop
has() { [[ " $TARGETS " == *" $1 "* ]]; }
for t in $TARGETS; do
  case $t in get-s3|get-rados|tmpfs|passthrough|tierfs-s3|tierfs-rados|s3fs|rclone) ;;
    *) die "unknown target '$t'" ;; esac
done
for w in $WORKLOADS; do [ -n "${PHASES[$w]:-}" ] || die "unknown workload '$w' (known: seq small numpy torch)"; done
[ "$(id -u)" = 0 ] || die "must run as root (mounts, drop_caches)"
for c in fio findmnt fusermount3 pgrep timeout; do
  command -v "$c" >/dev/null || die "'$c' not found (Debian: fio, util-linux, fuse3, procps, coreutils)"
done
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 8))' || die "PYTHON=$PYTHON is not a python3 >= 3.8"
NEED_STORE=""
for t in $TARGETS; do case $t in get-*|tierfs-*|s3fs|rclone) NEED_STORE=1 ;; esac; done
if [ -n "$NEED_STORE" ]; then
  [ -x "$TIERFS" ] || die "no tierfs binary at $TIERFS (build first, or set TIERFS=...)"
  "$TIERFS" version >/dev/null 2>&1 || die "'$TIERFS version' failed"
fi
if has tierfs-s3 || has tierfs-rados; then
  # Each --option of TIERFS_CACHE_OPTS must be known to this binary's mount.
  for o in $TIERFS_CACHE_OPTS $TIERFS_MOUNT_OPTS; do
    case $o in --*) "$TIERFS" mount --help 2>&1 | grep -qE -- "(^|[ ,])${o%%=*}( |=|\$)" ||
      die "this tierfs has no mount option ${o%%=*}; set TIERFS_CACHE_OPTS='' (or TIERFS_MOUNT_OPTS) to run without it" ;;
    esac
  done
  if "$TIERFS" mount --help 2>&1 | grep -q -- --cache-dir &&
     [[ " $TIERFS_CACHE_OPTS $TIERFS_MOUNT_OPTS " != *" --cache-dir"* ]]; then
    log "warning: without --cache-dir TierFS uses its default cache folder, which this script neither" \
        "puts on the tmpfs nor empties before cold phases; TIERFS_CACHE_OPTS='--cache-dir memory' disables it"
  fi
fi
if has s3fs || has rclone; then  # s3fs also fills the peers' bucket
  command -v s3fs >/dev/null || die "s3fs not found (apt-get install s3fs)"
fi
has rclone && { command -v rclone >/dev/null || die "rclone not found (apt-get install rclone)"; }
[[ " $WORKLOADS " == *" numpy "* ]] && { "$PYTHON" -c 'import numpy' 2>/dev/null || die "numpy not importable by $PYTHON (apt-get install python3-numpy)"; }
[[ " $WORKLOADS " == *" torch "* ]] && { "$PYTHON" -c 'import torch' 2>/dev/null || die "torch not importable by $PYTHON (apt-get install python3-torch)"; }
NUMPY_DIR=${NUMPY_DIR:-$("$PYTHON" -c 'import numpy, os; print(os.path.dirname(numpy.__file__))' 2>/dev/null)}
PASSTHROUGH=""
if has passthrough; then PASSTHROUGH=$("$HERE/build-passthrough.sh") || die "could not build passthrough_ll"; fi

# Room: the store keeps every data set (bluestore file under BENCH_WORK) and the tmpfs
# folders hold the current one plus one client's cache of it.
mkdir -p "$BENCH_WORK" || die "cannot create $BENCH_WORK"
need_disk=$(( (SEQ_SIZE + TORCH_MIB + SMALL_FILES * SMALL_KIB / 1024 + 200) * 3 + 2048 ))
free_disk=$(df -Pm "$BENCH_WORK" | awk 'NR == 2 {print $4}')
[ "$free_disk" -ge "$need_disk" ] || log "warning: $free_disk MiB free under BENCH_WORK, the store may need $need_disk MiB"
need_ram=$(( BIG * 3 + 4096 ))
free_ram=$(awk '/^MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
[ "$free_ram" -ge "$need_ram" ] || log "warning: $free_ram MiB of memory available, this run may use $need_ram MiB"

RUN_ID=$(date +%Y%m%d-%H%M%S)
OUT=${BENCH_OUT:-$REPO/bench-results}/cache-$RUN_ID
W=$BENCH_WORK/run-$RUN_ID
mkdir -p "$OUT/raw" "$OUT/logs" "$W" || die "cannot create $OUT or $W"
OUT=$(cd "$OUT" && pwd); W=$(cd "$W" && pwd)
RAW=$OUT/raw LOGS=$OUT/logs RESULTS=$OUT/results.jsonl
DATA=$W/data CACHE=$W/cache SRV=$W/servers
: > "$RESULTS"
T_START=$(date +%s)
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- cleanup: everything mounted or started here is undone on any exit
declare -A MPID=()   # target -> pid of its FUSE process while mounted
PIDS=()              # every daemon started here
TMPFS_MOUNTS=()
CHILD=""             # the long-running command in progress (see run_fg)
SERVERS_UP=""
PROBLEMS=()
problem() { PROBLEMS+=("$*"); log "PROBLEM: $*"; }

is_mounted() { findmnt -rn --mountpoint "$1" >/dev/null 2>&1; }
gone() { [ ! -d "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
wait_gone() {  # PID SECONDS, then TERM, then KILL
  local p=$1 s=${2:-60} i
  [ -n "$p" ] || return 0
  for ((i = 0; i < s * 10; i++)); do gone "$p" && return 0; sleep 0.1; done
  kill -TERM "$p" 2>/dev/null
  for ((i = 0; i < 50; i++)); do gone "$p" && return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null
  return 1
}
unmount_fuse() {  # MNT
  local m=$1
  is_mounted "$m" || return 0
  case $m in */mnt-tierfs-*) timeout 120 "$TIERFS" umount "$m" >/dev/null 2>&1 ;; esac
  is_mounted "$m" && timeout 60 fusermount3 -u "$m" >/dev/null 2>&1
  is_mounted "$m" && { log "unmount of $m failed; detaching it"; fusermount3 -uz "$m" 2>/dev/null || umount -l "$m"; }
  ! is_mounted "$m"
}
# shellcheck disable=SC2317 # invoked through the EXIT trap
cleanup() {
  local rc=$? m p i
  trap - EXIT INT TERM
  if [ -n "$CHILD" ] && ! gone "$CHILD"; then log "stopping the running command"; kill -TERM "$CHILD" 2>/dev/null; wait_gone "$CHILD" 20; fi
  for m in "$W"/mnt-*; do [ -d "$m" ] && unmount_fuse "$m"; done
  for p in "${PIDS[@]}"; do wait_gone "$p" 10; done
  if [ -n "$SERVERS_UP" ]; then
    log "stopping the servers"
    python3 "$REPO/tests/servers.py" down all --dir "$SRV" >/dev/null 2>&1
  fi
  for ((i = ${#TMPFS_MOUNTS[@]} - 1; i >= 0; i--)); do
    m=${TMPFS_MOUNTS[i]}; is_mounted "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done
  if findmnt -rn -o TARGET | grep -qF "$W/"; then
    log "something is still mounted under $W; leaving it in place"
  elif [ -z "${KEEP_WORK:-}" ]; then
    rm -rf --one-file-system "$W"; rmdir "$BENCH_WORK" 2>/dev/null
  else
    log "KEEP_WORK set: scratch left in $W"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Runs a command in the background and waits, so that INT/TERM reach the trap at once.
run_fg() { "$@" & CHILD=$!; wait "$CHILD"; local rc=$?; CHILD=""; return $rc; }
tlimit() { run_fg timeout -k 30 "$MEASURE_TIMEOUT" "$@"; }

mount_tmpfs() {  # DIR SIZE
  mkdir -p "$1" || die "cannot create $1"
  mount -t tmpfs -o "size=$2,mode=0755" tierfs-cache-bench "$1" || die "cannot mount a tmpfs on $1"
  TMPFS_MOUNTS+=("$1")
}
mount_tmpfs "$DATA" "$DATA_TMPFS_SIZE"
mount_tmpfs "$CACHE" "$CACHE_TMPFS_SIZE"

# ---- servers and volumes
if [ -n "$NEED_STORE" ]; then
  log "starting Redis and Ceph (bluestore OSD over a file under $SRV)"
  SERVERS_UP=1
  { python3 "$REPO/tests/servers.py" up redis --dir "$SRV" &&
    python3 "$REPO/tests/servers.py" up ceph --dir "$SRV" --bluestore; } >&2 || die "servers did not start"
  eval "$(python3 "$REPO/tests/servers.py" env --dir "$SRV")"
  S3=$TIERFS_TEST_S3_ENDPOINT CONF=$TIERFS_TEST_CEPH_CONF POOL=$TIERFS_TEST_RADOS_POOL
  export TIERFS_ACCESS_KEY=$TIERFS_TEST_S3_ACCESS_KEY TIERFS_SECRET_KEY=$TIERFS_TEST_S3_SECRET_KEY
  echo "$TIERFS_ACCESS_KEY:$TIERFS_SECRET_KEY" > "$W/s3fs.passwd"; chmod 600 "$W/s3fs.passwd"
  cat > "$W/rclone.conf" <<EOF
[ceph]
type = s3
provider = Ceph
access_key_id = $TIERFS_ACCESS_KEY
secret_access_key = $TIERFS_SECRET_KEY
endpoint = $S3
EOF
  if has s3fs || has rclone; then  # s3fs does not create buckets
    "$TIERFS" objbench "$S3/peers" --skip-bench > "$LOGS/peers-bucket.log" 2>&1 ||
      die "could not create the peers' bucket: $(tail -1 "$LOGS/peers-bucket.log")"
  fi
fi
db_of() { case $1 in tierfs-s3) echo "$TIERFS_TEST_REDIS_URL/10" ;; tierfs-rados) echo "$TIERFS_TEST_REDIS_URL/11" ;; esac; }
if has tierfs-s3; then
  "$TIERFS" format "$(db_of tierfs-s3)" cachebenchs3 --force --storage s3 --bucket "$S3/tierfs-cache-bench" \
    > "$LOGS/format-tierfs-s3.log" 2>&1 || die "tierfs format (s3) failed: $(tail -1 "$LOGS/format-tierfs-s3.log")"
fi
if has tierfs-rados; then
  "$TIERFS" format "$(db_of tierfs-rados)" cachebenchrados --force --storage rados --bucket "$POOL" --ceph-conf "$CONF" \
    > "$LOGS/format-tierfs-rados.log" 2>&1 || die "tierfs format (rados) failed: $(tail -1 "$LOGS/format-tierfs-rados.log")"
fi

# ---- mounts
root_of() { if [ "$1" = tmpfs ]; then echo "$DATA"; else echo "$W/mnt-$1"; fi; }
clear_cache() {  # TARGET (unmounted): the client's local cache starts empty
  case $1 in tierfs-*|rclone|s3fs) rm -rf --one-file-system "${CACHE:?}/$1"; mkdir -p "$CACHE/$1" ;; esac
}
wait_mounted() {  # MNT PID SECONDS
  local m=$1 p=$2 s=$3 i
  for ((i = 0; i < s * 10; i++)); do
    is_mounted "$m" && [[ $(findmnt -n -o FSTYPE --mountpoint "$m") == fuse* ]] && return 0
    [ -n "$p" ] && gone "$p" && return 1
    sleep 0.1
  done
  return 1
}
do_mount() {  # TARGET
  local t=$1 m=$W/mnt-$1 pid="" opts
  [ "$t" = tmpfs ] && return 0
  mkdir -p "$m"
  case $t in
    passthrough)
      # shellcheck disable=SC2086 # option lists are word-split on purpose
      ( ulimit -n "$(ulimit -Hn)"; exec "$PASSTHROUGH" -f -o "source=$DATA" $PASSTHROUGH_OPTS "$m" ) >> "$LOGS/passthrough.log" 2>&1 &
      pid=$! ;;
    tierfs-*)
      opts=${TIERFS_CACHE_OPTS//\{cache\}/$CACHE/$t}
      # shellcheck disable=SC2086
      "$TIERFS" mount -d "$(db_of "$t")" "$m" --log "$LOGS/$t.log" $opts $TIERFS_MOUNT_OPTS >> "$LOGS/$t.mount.log" 2>&1 ||
        { log "$t: tierfs mount failed: $(tail -1 "$LOGS/$t.mount.log")"; return 1; }
      pid=$(pgrep -n -f -- "tierfs mount .*$m( |\$)") ;;
    s3fs)
      # shellcheck disable=SC2086
      s3fs peers "$m" -o url="$S3" -o use_path_request_style -o passwd_file="$W/s3fs.passwd" \
        -o tmpdir="$CACHE/s3fs" -o logfile="$LOGS/s3fs.log" $S3FS_OPTS >> "$LOGS/s3fs.mount.log" 2>&1 || return 1
      pid=$(pgrep -n -f -- "^s3fs peers $m( |\$)") ;;
    rclone)
      # rclone refuses to start when AWS_CA_BUNDLE is set for a plain-HTTP endpoint.
      # shellcheck disable=SC2086
      env -u AWS_CA_BUNDLE rclone mount ceph:peers "$m" --config "$W/rclone.conf" --vfs-cache-mode full \
        --cache-dir "$CACHE/rclone" --log-file "$LOGS/rclone.log" $RCLONE_OPTS --daemon --daemon-wait 60s \
        >> "$LOGS/rclone.mount.log" 2>&1 || return 1
      pid=$(pgrep -n -f -- "rclone mount ceph:peers $m( |\$)") ;;
  esac
  [ -n "$pid" ] && PIDS+=("$pid")
  wait_mounted "$m" "$pid" 60 || { log "$t: $m did not appear"; unmount_fuse "$m"; wait_gone "$pid" 10; return 1; }
  MPID[$t]=$pid
}
do_umount() {  # TARGET STAGE: records the process's peak RSS under STAGE, unmounts, waits for it to exit
  local t=$1 pid=${MPID[$1]:-} kib
  [ "$t" = tmpfs ] && return 0
  if [ -n "$pid" ]; then
    kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    [ -n "$kib" ] && printf '{"kind":"rss","target":"%s","stage":"%s","kib":%s}\n' "$t" "$2" "$kib" >> "$RESULTS"
  fi
  unmount_fuse "$W/mnt-$t" || problem "$t: unmount failed"
  [ -n "$pid" ] && { wait_gone "$pid" 120 || problem "$t: client pid $pid did not exit after unmount"; }
  unset "MPID[$t]"
}
drop_all() {
  sync
  echo 3 > /proc/sys/vm/drop_caches
  [ -n "$NEED_STORE" ] && timeout 60 ceph -c "$CONF" tell osd.0 cache drop >/dev/null 2>&1
  return 0
}

# ---- data sets: made on the data tmpfs (read there by tmpfs and passthrough), and copied
# with cp -r through a mount into the peers' bucket (s3fs) and into each TierFS volume.
declare -A BROKEN=()  # "workload:target" -> 1 when its data could not be put in place
make_data() {  # WORKLOAD
  local w=$1 d=$DATA/$1
  rm -rf "$d"; mkdir -p "$d"
  case $w in
    seq) run_fg head -c $((SEQ_SIZE << 20)) /dev/urandom > "$d/data.bin" ;;
    small) run_fg "$PYTHON" "$HELPER" mkfiles "$d" "$SMALL_FILES" $((SMALL_KIB * 1024)) ;;
    numpy)
      # Hash-based unchecked .pyc files: importing never compiles or writes, on every target.
      mkdir -p "$d/pylib" && cp -a "$NUMPY_DIR" "$d/pylib/numpy" &&
        find "$d/pylib" -name __pycache__ -prune -exec rm -rf {} + &&
        { run_fg "$PYTHON" -m compileall -q --invalidation-mode unchecked-hash "$d/pylib/numpy" > "$LOGS/compileall.log" 2>&1; true; } &&
        "$PYTHON" "$HELPER" pyimport "$PYTHON" "$d/pylib" numpy > /dev/null ;;
    torch) run_fg "$PYTHON" "$HELPER" torchsave "$d/ckpt.pt" "$TORCH_MIB" ;;
  esac
}
copy_in() {  # WORKLOAD
  local w=$1 t
  if has s3fs || has rclone; then
    # Through s3fs rather than rclone copy: s3fs shows folders that have no folder object
    # with mtime -1, which Python's import system takes for "never listed" (no numpy found).
    log "$w: copying into the peers' bucket through s3fs"
    clear_cache s3fs
    if do_mount s3fs; then
      tlimit cp -r "$DATA/$w" "$W/mnt-s3fs/" || { problem "$w: copy into the peers' bucket failed"; BROKEN[$w:s3fs]=1; BROKEN[$w:rclone]=1; }
      do_umount s3fs write
    else
      problem "$w: s3fs did not mount for the copy"; BROKEN[$w:s3fs]=1; BROKEN[$w:rclone]=1
    fi
  fi
  for t in tierfs-s3 tierfs-rados; do
    has "$t" || continue
    log "$w: copying into $t"
    clear_cache "$t"
    if ! do_mount "$t"; then problem "$w: $t did not mount for the copy"; BROKEN[$w:$t]=1; continue; fi
    tlimit cp -r "$DATA/$w" "$W/mnt-$t/" || { problem "$w: copy into $t failed"; BROKEN[$w:$t]=1; }
    do_umount "$t" write
    clear_cache "$t"
  done
}

# ---- measurements
TCK=$(getconf CLK_TCK)
ticks_of() {  # PID...: user + system clock ticks of the processes so far
  local p t=0
  for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
store_pids() { [ -n "$NEED_STORE" ] && pgrep -f -- "(radosgw|ceph-osd) -c $CONF"; }
secs() { awk -v t="$1" -v k="$TCK" 'BEGIN {printf "%.3f", t / k}'; }  # TICKS
record_cpu() {  # WORKLOAD TARGET PHASE ROUND CLIENT_SECONDS STORE_TICKS
  printf '{"kind":"cpu","workload":"%s","target":"%s","phase":"%s","round":%s,"client":%s,"store":%s}\n' \
    "$1" "$2" "$3" "$4" "$5" "$(secs "$6")" >> "$RESULTS"
}
record() {  # WORKLOAD TARGET PHASE ROUND VALUE
  printf '{"workload":"%s","target":"%s","phase":"%s","round":%s,"value":%s}\n' "$@" >> "$RESULTS"
  log "$1 $2 $3 round $4: $5"
}
measure() {  # WORKLOAD TARGET PHASE ROUND
  local w=$1 t=$2 p=$3 r=$4 root f v
  root=$(root_of "$t"); f=$RAW/$w-$t-$p-$r
  local c0 s0
  c0=$(ticks_of ${MPID[$t]:-}); s0=$(ticks_of $(store_pids))
  case $w in
    seq)
      tlimit fio --name=seqread --filename="$root/seq/data.bin" --rw=read --bs=1M --ioengine=psync --readonly \
        --output-format=json --output="$f.json" > "$f.err" 2>&1 &&
        v=$("$PYTHON" "$HELPER" fio-mibs "$f.json" 2>>"$f.err") ;;
    small)
      tlimit "$PYTHON" "$HELPER" randread "$root/small" "$SMALL_FILES" --threads "$SMALL_THREADS" \
        --seed $((r * 10 + ${p#epoch})) --json "$f.json" > "$f.out" 2> "$f.err" && v=$(cat "$f.out") ;;
    numpy)
      # Python, its stdlib and numpy's system libraries come back into the page cache first.
      env -u PYTHONPATH "$PYTHON" -c 'import numpy' > /dev/null 2>&1
      tlimit "$PYTHON" "$HELPER" pyimport "$PYTHON" "$root/numpy/pylib" numpy > "$f.out" 2> "$f.err" && v=$(cat "$f.out") ;;
    torch)
      tlimit "$PYTHON" "$HELPER" torchload "$root/torch/ckpt.pt" > "$f.out" 2> "$f.err" && v=$(tail -1 "$f.out") ;;
  esac
  if [ -n "${v:-}" ]; then
    record "$w" "$t" "$p" "$r" "$v"
    [ "$w" = seq ] && record_cpu "$w" "$t" "$p" "$r" \
      "$(secs $(($(ticks_of ${MPID[$t]:-}) - c0)))" $(($(ticks_of $(store_pids)) - s0))
  else problem "$w $t $p round $r failed: $(tail -1 "$f.err" 2>/dev/null)"; fi
}
measure_get() {  # WORKLOAD TARGET ROUND: tierfs objbench on the store
  local w=$1 t=$2 r=$3 url f=$RAW/$1-$2-$3.txt v args which unit phase
  case $t in get-s3) url=$S3/objbench ;; get-rados) url="rados://$POOL?conf=$CONF" ;; esac
  case $w in
    seq) args=(--big-size 4M --big-count "$OBJBENCH_BIG_COUNT" --small-count 1 -p "$OBJBENCH_THREADS"); which=big unit=mibs phase=cold ;;
    small) args=(--big-count 1 --small-size "${SMALL_KIB}K" --small-count "$OBJBENCH_SMALL_COUNT" -p "$SMALL_THREADS")
           which=small unit=ops phase=epoch1 ;;
    *) return 0 ;;
  esac
  drop_all
  # The GETs read objects the OSD has not cached, as every mount's cold read does. The
  # store's CPU is sampled there too: the sample after objbench also covers its deletes.
  local drop="sync; echo 3 > /proc/sys/vm/drop_caches; timeout 60 ceph -c '$CONF' tell osd.0 cache drop >/dev/null 2>&1; "
  drop+="awk '{t += \$14 + \$15} END {print t}' $(for p in $(store_pids); do printf '/proc/%s/stat ' "$p"; done) > '$f.store0'"
  tlimit "$TIERFS" objbench "$url" --skip-functional "${args[@]}" --before-get "$drop" > "$f" 2>&1 &&
    v=$("$PYTHON" "$HELPER" objbench-rate "$f" "$which" "$unit" 2>"$f.err")
  if [ -n "${v:-}" ]; then
    record "$w" "$t" "$phase" "$r" "$v"
    [ "$w" = seq ] && record_cpu "$w" "$t" "$phase" "$r" "$("$PYTHON" "$HELPER" objbench-rate "$f" "$which" cpu)" \
      $(($(ticks_of $(store_pids)) - $(cat "$f.store0")))
  else problem "$w $t round $r: objbench failed: $(cat "$f.err" 2>/dev/null; tail -1 "$f")"; fi
}
run_target() {  # WORKLOAD TARGET ROUND: one round of a workload on one target
  local w=$1 t=$2 r=$3 p phase
  case $t in get-*) measure_get "$w" "$t" "$r"; return ;; esac
  [ -n "${BROKEN[$w:$t]:-}" ] && return
  clear_cache "$t"
  do_mount "$t" || { problem "$w: $t did not mount (round $r)"; return; }
  for p in ${PHASES[$w]}; do
    phase=${p#[+=]}
    if [ "$p" = "+$phase" ]; then
      do_umount "$t" "$w"
      do_mount "$t" || { problem "$w: $t did not remount (round $r)"; return; }
    fi
    [ "$p" = "=$phase" ] || drop_all
    measure "$w" "$t" "$phase" "$r"
  done
  do_umount "$t" "$w"
  clear_cache "$t"
}

log "results: $OUT"
log "targets: $TARGETS; workloads: $WORKLOADS; rounds: $ROUNDS"
for w in $WORKLOADS; do
  TW=()
  for t in $TARGETS; do
    case $t:$w in get-*:numpy|get-*:torch) ;; *) TW+=("$t") ;; esac
  done
  log "$w: making the data set"
  make_data "$w" || { problem "$w: could not make the data set"; rm -rf "${DATA:?}/$w"; continue; }
  copy_in "$w"
  for ((r = 1; r <= ROUNDS; r++)); do
    n=${#TW[@]}
    for ((i = 0; i < n; i++)); do
      run_target "$w" "${TW[(i + r - 1) % n]}" "$r"
    done
  done
  rm -rf "${DATA:?}/$w"
done

# ---- report
ver() { "$@" 2>/dev/null | head -1; }
pyver() { "$PYTHON" -c "import $1; print($1.__version__)" 2>/dev/null; }
[ ${#PROBLEMS[@]} -gt 0 ] && printf '%s\n' "${PROBLEMS[@]}" > "$OUT/problems.txt"
M_CMDLINE=$CMDLINE M_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') M_CORES=$(nproc) \
M_CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) \
M_RAM_GIB=$(awk '/^MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo) M_KERNEL="Linux $(uname -r)" \
M_LOAD="${LOAD_AT_START// / / }" M_CEPH="Ceph $(ver ceph --version | awk '{print $3}')" \
M_TIERFS=$(ver "$TIERFS" version) M_TIERFS_OPTS="$TIERFS_CACHE_OPTS${TIERFS_MOUNT_OPTS:+ $TIERFS_MOUNT_OPTS}" \
M_S3FS="s3fs $(ver s3fs --version | grep -o 'V[0-9.]*')" \
M_S3FS_OPTS="-o use_path_request_style -o tmpdir=<cache tmpfs>${S3FS_OPTS:+ $S3FS_OPTS}" \
M_RCLONE=$(ver rclone version) M_RCLONE_OPTS="--vfs-cache-mode full --cache-dir <cache tmpfs>${RCLONE_OPTS:+ $RCLONE_OPTS}" \
M_PYTHON="Python $("$PYTHON" -c 'import platform; print(platform.python_version())')" \
M_NUMPY=$(pyver numpy) M_TORCH=$(pyver torch) M_TARGETS=$TARGETS M_WORKLOADS=$WORKLOADS \
M_SECONDS=$(($(date +%s) - T_START)) \
K_ROUNDS=$ROUNDS K_SEQ_SIZE=$SEQ_SIZE K_SMALL_FILES=$SMALL_FILES K_SMALL_KIB=$SMALL_KIB \
K_SMALL_THREADS=$SMALL_THREADS K_TORCH_MIB=$TORCH_MIB K_OBJBENCH_BIG_COUNT=$OBJBENCH_BIG_COUNT \
K_OBJBENCH_SMALL_COUNT=$OBJBENCH_SMALL_COUNT K_OBJBENCH_THREADS=$OBJBENCH_THREADS \
"$PYTHON" - "$OUT" <<'EOF'
import json, os, sys
e = os.environ
meta = {k[2:].lower(): v for k, v in e.items() if k.startswith("M_")}
meta["targets"], meta["workloads"] = meta["targets"].split(), meta["workloads"].split()
meta["knobs"] = {k[2:]: v for k, v in e.items() if k.startswith("K_")}
try:
    meta["problems"] = [l for l in open(os.path.join(sys.argv[1], "problems.txt")).read().split("\n") if l]
except OSError:
    meta["problems"] = []
json.dump(meta, open(os.path.join(sys.argv[1], "meta.json"), "w"), indent=1)
EOF
"$PYTHON" "$HELPER" report --results "$OUT" --doc "$BENCH_DOC"
rc=$?
log "updated $BENCH_DOC; results in $OUT; took $(( ($(date +%s) - T_START) / 60 )) min"
if [ ${#PROBLEMS[@]} -gt 0 ] || [ "$rc" != 0 ]; then
  log "finished with problems (${#PROBLEMS[@]}; see $OUT/problems.txt and the failed cells)"
  exit 1
fi
exit 0
