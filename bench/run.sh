#!/bin/bash
# Side-by-side benchmark of TierFS against tmpfs and libfuse3's passthrough example, in one
# run, using the fixed bench-kit yardstick; writes the core section of docs/benchmarks.md.
#
# usage: bench/run.sh              full run (bench-kit defaults: 4 GiB files, 20 s random jobs)
#        QUICK=1 bench/run.sh      smaller settings (1 GiB, 5 s, 2000 small files)
#
# Targets (TARGETS, default "tmpfs passthrough tierfs-disk tierfs-tmpfs"):
#   tmpfs         a fresh tmpfs mounted for the run
#   passthrough   libfuse3's passthrough_ll example (default options) over a fresh tmpfs
#   tierfs-disk   TierFS, SQLite db + file bucket under $BENCH_WORK (on the repo's disk)
#   tierfs-tmpfs  TierFS, SQLite db + file bucket on a fresh tmpfs
#
# Environment (see bench/README.md):
#   BENCH_KIT      bench-kit folder (default <repo>/../shared/bench-kit)
#   TIERFS         tierfs binary (default <repo>/build/src/cmd/tierfs)
#   BENCH_WORK     scratch folder for mountpoints and the on-disk TierFS volume
#                  (default <repo>/build/bench/work)
#   BENCH_OUT      results go to $BENCH_OUT/run-<timestamp>/bench-<target> (default <repo>/bench-results)
#   BENCH_DOC      document to update (default <repo>/docs/benchmarks.md)
#   TIERFS_BUFFER_SIZE (300M), TIERFS_MOUNT_OPTS, TIERFS_FORMAT_OPTS, PASSTHROUGH_OPTS,
#   TMPFS_SIZE (50%), TARGET_TIMEOUT (seconds per target; 0 = none), KEEP_WORK=1, STRICT=1
#   bench-kit knobs passed through: FIO_SIZE FIO_SIZE_PER_JOB FIO_RUNTIME FIO_DIRECT
#   FIO_NRFILES FIO_JOBS SMALLFILES_ARGS MDTEST_ARGS SKIP_FIO SKIP_PY
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
HERE=$REPO/bench

case ${1:-} in
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "run.sh: no arguments expected (configure with environment variables; see --help)" >&2; exit 2 ;;
esac

# ---- the command line as the user gave it (before defaults are filled in); no machine paths
KNOBS="QUICK TARGETS FIO_SIZE FIO_SIZE_PER_JOB FIO_RUNTIME FIO_DIRECT FIO_NRFILES FIO_JOBS
       SMALLFILES_ARGS MDTEST_ARGS SKIP_FIO SKIP_PY TIERFS_BUFFER_SIZE TIERFS_MOUNT_OPTS
       TIERFS_FORMAT_OPTS PASSTHROUGH_OPTS TMPFS_SIZE TARGET_TIMEOUT KEEP_WORK STRICT"
PATH_KNOBS="BENCH_KIT TIERFS BENCH_WORK BENCH_OUT BENCH_DOC BENCH_BUILD LIBFUSE_EXAMPLES"
quote() { case $1 in *[!A-Za-z0-9_.,:=%+/-]*|"") printf "'%s'" "$1" ;; *) printf '%s' "$1" ;; esac; }
CMDLINE=""
for v in $KNOBS; do
  [ -n "${!v+x}" ] && CMDLINE+="$v=$(quote "${!v}") "
done
for v in $PATH_KNOBS; do
  [ -n "${!v+x}" ] && CMDLINE+="$v=<path> "
done
CMDLINE+="bench/run.sh"

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "[run.sh $(date +%H:%M:%S)] $*" >&2; }

# ---- configuration
BENCH_KIT=${BENCH_KIT:-$REPO/../shared/bench-kit}
if [ ! -x "$BENCH_KIT/run-bench.sh" ] || [ ! -f "$BENCH_KIT/report.py" ]; then
  die "bench-kit not found at $BENCH_KIT (expects run-bench.sh and report.py); set BENCH_KIT=/path/to/bench-kit"
fi
BENCH_KIT=$(cd "$BENCH_KIT" && pwd)
TIERFS=${TIERFS:-$REPO/build/src/cmd/tierfs}
BENCH_WORK=${BENCH_WORK:-$REPO/build/bench/work}
BENCH_DOC=${BENCH_DOC:-$REPO/docs/benchmarks.md}
TIERFS_BUFFER_SIZE=${TIERFS_BUFFER_SIZE:-300M}
TIERFS_MOUNT_OPTS=${TIERFS_MOUNT_OPTS:-}
TIERFS_FORMAT_OPTS=${TIERFS_FORMAT_OPTS:-}
PASSTHROUGH_OPTS=${PASSTHROUGH_OPTS:-}
TMPFS_SIZE=${TMPFS_SIZE:-50%}
TARGETS=${TARGETS:-"tmpfs passthrough tierfs-disk tierfs-tmpfs"}

if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
  : "${FIO_SIZE:=1g}" "${FIO_SIZE_PER_JOB:=256m}" "${FIO_RUNTIME:=5}" "${FIO_NRFILES:=2000}"
  : "${SMALLFILES_ARGS:=-n 2000 -s 65536 -t 4}" "${MDTEST_ARGS:=-n 2000 -t 4}"
  : "${TARGET_TIMEOUT:=1800}"
fi
# Same knobs for every target; unset ones keep the bench-kit's own defaults.
for v in FIO_SIZE FIO_SIZE_PER_JOB FIO_RUNTIME FIO_DIRECT FIO_NRFILES FIO_JOBS SMALLFILES_ARGS \
         MDTEST_ARGS SKIP_FIO SKIP_PY; do
  [ -n "${!v+x}" ] && export "${v?}"
done
TARGET_TIMEOUT=${TARGET_TIMEOUT:-7200}
EFFECTIVE_KNOBS="FIO_SIZE=${FIO_SIZE:-4g} FIO_SIZE_PER_JOB=${FIO_SIZE_PER_JOB:-1g} FIO_RUNTIME=${FIO_RUNTIME:-20} FIO_DIRECT=${FIO_DIRECT:-0} FIO_NRFILES=${FIO_NRFILES:-10000} SMALLFILES_ARGS='${SMALLFILES_ARGS:--n 10000 -s 65536 -t 4}' MDTEST_ARGS='${MDTEST_ARGS:--n 10000 -t 4}'"
[ -n "${FIO_JOBS:-}" ] && EFFECTIVE_KNOBS+=" FIO_JOBS='$FIO_JOBS'"
[ -n "${SKIP_FIO:-}" ] && EFFECTIVE_KNOBS+=" SKIP_FIO=$SKIP_FIO"
[ -n "${SKIP_PY:-}" ] && EFFECTIVE_KNOBS+=" SKIP_PY=$SKIP_PY"

for t in $TARGETS; do
  case $t in tmpfs|passthrough|tierfs-disk|tierfs-tmpfs) ;;
    *) die "unknown target '$t' (known: tmpfs passthrough tierfs-disk tierfs-tmpfs)" ;; esac
done
[ "$(id -u)" = 0 ] || die "must run as root (mounts tmpfs file systems)"
for c in fio python3 bc findmnt fusermount3 pgrep timeout; do
  command -v "$c" >/dev/null || die "'$c' not found; install it (Debian: fio, python3, bc, util-linux, fuse3, procps, coreutils)"
done
case " $TARGETS " in *" tierfs-"*)
  [ -x "$TIERFS" ] || die "tierfs binary not found at $TIERFS (build it, set TIERFS=..., or exclude the TierFS targets with TARGETS=\"tmpfs passthrough\")"
  "$TIERFS" version >/dev/null 2>&1 || die "'$TIERFS version' failed; is the binary complete?"
esac
PASSTHROUGH=""
case " $TARGETS " in *" passthrough "*)
  PASSTHROUGH=$("$HERE/build-passthrough.sh") || die "could not build passthrough_ll"
esac

RUN_ID=$(date +%Y%m%d-%H%M%S)
RESULTS=${BENCH_OUT:-$REPO/bench-results}/run-$RUN_ID
WORK=$BENCH_WORK/run-$RUN_ID
mkdir -p "$RESULTS" "$WORK" || die "cannot create $RESULTS or $WORK"
RESULTS=$(cd "$RESULTS" && pwd)
WORK=$(cd "$WORK" && pwd)
export BENCH_OUT=$RESULTS   # run-bench.sh writes $BENCH_OUT/bench-<TAG>

# ---- cleanup: everything mounted or started here is undone on any exit
MOUNTS=()    # "kind:path", kind = tmpfs | fuse
PIDS=()      # daemons and helpers started by this script
SAMPLER_PID=""
KIT_PID=""   # the running bench-kit (its timeout wrapper)

# Reads the mount table rather than stat()ing the path: a FUSE mount whose daemon died fails
# stat() with ENOTCONN but still has to be unmounted.
is_mounted() { findmnt -rn --mountpoint "$1" >/dev/null 2>&1; }

unmount_fuse() {  # MNT [tierfs]
  local m=$1 how=${2:-}
  is_mounted "$m" || return 0
  if [ "$how" = tierfs ] && [ -x "$TIERFS" ]; then
    timeout 60 "$TIERFS" umount "$m" >/dev/null 2>&1
  fi
  is_mounted "$m" && timeout 30 fusermount3 -u "$m" >/dev/null 2>&1
  is_mounted "$m" && { log "unmount of $m failed; detaching it lazily"; fusermount3 -uz "$m" >/dev/null 2>&1 || umount -l "$m"; }
  ! is_mounted "$m"
}

unmount_tmpfs() {
  local m=$1
  is_mounted "$m" || return 0
  umount "$m" 2>/dev/null || { log "umount $m busy; detaching lazily"; umount -l "$m"; }
}

stop_pid() {  # PID [grace seconds]: wait for it to exit, then TERM, then KILL
  local p=$1 g=${2:-10} i
  [ -n "$p" ] || return 0
  for ((i = 0; i < g * 10; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -TERM "$p" 2>/dev/null
  for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null
}

# shellcheck disable=SC2317 # invoked through the EXIT trap
cleanup() {
  local rc=$? i kind path
  trap - EXIT INT TERM
  if [ -n "$KIT_PID" ] && kill -0 "$KIT_PID" 2>/dev/null; then
    log "stopping the running bench-kit"
    kill -TERM "$KIT_PID" 2>/dev/null
    stop_pid "$KIT_PID" 20
  fi
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    kind=${MOUNTS[i]%%:*}; path=${MOUNTS[i]#*:}
    case $kind in
      tierfs|fuse) unmount_fuse "$path" "$kind" ;;
      tmpfs) unmount_tmpfs "$path" ;;
    esac
  done
  for p in "${PIDS[@]}"; do stop_pid "$p" 5; done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do   # second pass once daemons are gone
    path=${MOUNTS[i]#*:}; is_mounted "$path" && umount -l "$path" 2>/dev/null
  done
  if [ -n "$(findmnt -rn -o TARGET | grep -F "$WORK/")" ]; then
    log "something is still mounted under $WORK; leaving it in place"
  elif [ -z "${KEEP_WORK:-}" ]; then
    rm -rf --one-file-system "$WORK"
    rmdir "$BENCH_WORK" 2>/dev/null
  else
    log "KEEP_WORK set: scratch left in $WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

mount_tmpfs() {
  mkdir -p "$1" || return 1
  mount -t tmpfs -o "size=$TMPFS_SIZE,mode=0755" tierfs-bench "$1" || { log "mount tmpfs on $1 failed"; return 1; }
  MOUNTS+=("tmpfs:$1")
}

wait_mounted() {  # MNT PID-or-empty SECONDS: wait for a FUSE mount to appear
  local m=$1 p=$2 s=$3 i
  for ((i = 0; i < s * 10; i++)); do
    if is_mounted "$m" && [[ $(findmnt -n -o FSTYPE --mountpoint "$m") == fuse* ]]; then return 0; fi
    [ -n "$p" ] && ! kill -0 "$p" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

set_status() { mkdir -p "$RESULTS/bench-$1"; echo "$2" > "$RESULTS/bench-$1/status.txt"; log "$1: $2"; }
FAILED=()
add_failed() { [[ " ${FAILED[*]} " == *" $1 "* ]] || FAILED+=("$1"); }

# Runs the bench-kit on MNT; records the outcome in status.txt.
run_kit() {  # TAG MNT
  local tag=$1 m=$2 rc
  log "$tag: bench-kit on $m"
  mkdir -p "$RESULTS/bench-$tag"
  # In the background so that INT/TERM reach our trap at once (bash defers traps while a
  # foreground child runs); timeout puts the kit in its own process group and forwards
  # signals to all of it. A duration of 0 disables the time limit.
  timeout -k 60 "$TARGET_TIMEOUT" "$BENCH_KIT/run-bench.sh" "$m" "$tag" &
  KIT_PID=$!
  wait "$KIT_PID"
  rc=$?
  KIT_PID=""
  local blog=$RESULTS/bench-$tag/bench.log
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    set_status "$tag" "failed: timed out after ${TARGET_TIMEOUT}s (TARGET_TIMEOUT)"; add_failed "$tag"
  elif [ "$rc" != 0 ]; then
    set_status "$tag" "failed: run-bench.sh exited $rc"; add_failed "$tag"
  elif grep -qE 'rc=[1-9]|ERROR|Traceback' "$blog" 2>/dev/null; then
    set_status "$tag" "completed with errors (see bench-$tag/bench.log: $(grep -E 'rc=[1-9]|ERROR' "$blog" | head -3 | tr '\n' ';' | sed 's/;$//'))"
    add_failed "$tag"
  else
    set_status "$tag" "ok"
  fi
}

target_tmpfs() {
  local m=$WORK/mnt-tmpfs
  mount_tmpfs "$m" || { set_status tmpfs "failed: cannot mount tmpfs"; add_failed tmpfs; return; }
  run_kit tmpfs "$m"
  unmount_tmpfs "$m"
}

target_passthrough() {
  local src=$WORK/src-passthrough m=$WORK/mnt-passthrough pid
  local dlog=$RESULTS/bench-passthrough/passthrough_ll.log
  mkdir -p "$RESULTS/bench-passthrough" "$m"
  mount_tmpfs "$src" || { set_status passthrough "failed: cannot mount tmpfs"; add_failed passthrough; return; }
  # passthrough_ll keeps one fd per known inode: give it the hard RLIMIT_NOFILE.
  # shellcheck disable=SC2086 # PASSTHROUGH_OPTS holds several words
  ( ulimit -n "$(ulimit -Hn)"; exec "$PASSTHROUGH" -f -o "source=$src" $PASSTHROUGH_OPTS "$m" ) > "$dlog" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  MOUNTS+=("fuse:$m")
  if ! wait_mounted "$m" "$pid" 30; then
    set_status passthrough "failed: passthrough_ll did not mount (see bench-passthrough/passthrough_ll.log)"
    add_failed passthrough; unmount_fuse "$m"; stop_pid "$pid" 1; unmount_tmpfs "$src"; return
  fi
  log "passthrough: passthrough_ll pid $pid, options: -o source=<tmpfs> ${PASSTHROUGH_OPTS:-(defaults)}"
  run_kit passthrough "$m"
  unmount_fuse "$m"
  stop_pid "$pid" 10
  unmount_tmpfs "$src"
}

vmhwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

start_sampler() {  # PID FILE: keep the highest VmHWM seen in FILE (survives a client crash)
  local p=$1 f=$2
  (
    peak=0
    while kill -0 "$p" 2>/dev/null; do
      v=$(vmhwm_kib "$p")
      if [ -n "$v" ] && [ "$v" -gt "$peak" ]; then peak=$v; echo "$peak" > "$f"; fi
      sleep 1
    done
  ) &
  SAMPLER_PID=$!
}

target_tierfs() {  # TAG STORE-DIR
  local tag=$1 store=$2 m=$WORK/mnt-$1 pid rc out=$RESULTS/bench-$1
  local db="sqlite3://$store/meta.db" name=bench${tag#tierfs-}
  mkdir -p "$out" "$m" "$store/bucket"
  log "$tag: format $db $name --storage file --bucket <store>/bucket"
  # shellcheck disable=SC2086
  "$TIERFS" format "$db" "$name" --storage file --bucket "$store/bucket" $TIERFS_FORMAT_OPTS > "$out/format.log" 2>&1
  rc=$?
  if [ "$rc" != 0 ]; then
    set_status "$tag" "failed: tierfs format exited $rc ($(tail -1 "$out/format.log"))"; add_failed "$tag"; return
  fi
  MOUNTS+=("tierfs:$m")
  # shellcheck disable=SC2086
  "$TIERFS" mount "$db" "$m" -d --log "$out/tierfs.log" --buffer-size "$TIERFS_BUFFER_SIZE" \
    $TIERFS_MOUNT_OPTS > "$out/mount.log" 2>&1
  rc=$?
  if [ "$rc" != 0 ]; then
    set_status "$tag" "failed: tierfs mount exited $rc ($(tail -1 "$out/mount.log"))"; add_failed "$tag"
    unmount_fuse "$m" tierfs; return
  fi
  if ! wait_mounted "$m" "" 30; then
    set_status "$tag" "failed: mount point did not appear within 30 s (see bench-$tag/tierfs.log)"
    add_failed "$tag"; unmount_fuse "$m" tierfs; return
  fi
  pid=$(pgrep -n -f -- "tierfs mount .*$m( |\$)")
  if [ -z "$pid" ]; then
    log "$tag: could not find the client process; peak memory will not be recorded"
  else
    PIDS+=("$pid")
    log "$tag: client pid $pid, --buffer-size $TIERFS_BUFFER_SIZE"
    start_sampler "$pid" "$out/vmhwm.samples"
  fi
  run_kit "$tag" "$m"
  if [ -n "$pid" ]; then
    local alive=true final peak
    final=$(vmhwm_kib "$pid")
    [ -n "$final" ] || alive=false
    kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null; SAMPLER_PID=""
    peak=$(cat "$out/vmhwm.samples" 2>/dev/null || echo 0)
    [ -n "$final" ] && [ "$final" -gt "$peak" ] && peak=$final
    printf '{"pid": %s, "vmhwm_kib": %s, "buffer_size": "%s", "client_alive_at_end": %s}\n' \
      "$pid" "${peak:-0}" "$TIERFS_BUFFER_SIZE" "$alive" > "$out/rss.json"
    log "$tag: client peak RSS (VmHWM) $((peak / 1024)) MiB, alive at end: $alive"
    $alive || { set_status "$tag" "$(cat "$out/status.txt"); client process exited during the run"; add_failed "$tag"; }
  fi
  unmount_fuse "$m" tierfs || log "$tag: unmount failed"
  [ -n "$pid" ] && stop_pid "$pid" 30
}

LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "results: $RESULTS"
log "targets: $TARGETS; $EFFECTIVE_KNOBS"
TAGS=""
for t in $TARGETS; do
  TAGS+="${TAGS:+,}$t"
  case $t in
    tmpfs) target_tmpfs ;;
    passthrough) target_passthrough ;;
    tierfs-disk) rm -rf "$WORK/tierfs-disk"; target_tierfs tierfs-disk "$WORK/tierfs-disk"; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK/tierfs-disk" ;;
    tierfs-tmpfs)
      if mount_tmpfs "$WORK/tierfs-tmpfs-store"; then
        target_tierfs tierfs-tmpfs "$WORK/tierfs-tmpfs-store"
        unmount_tmpfs "$WORK/tierfs-tmpfs-store"
      else
        set_status tierfs-tmpfs "failed: cannot mount tmpfs"; add_failed tierfs-tmpfs
      fi ;;
  esac
done

EXTRA=(--extra "Load average (1/5/15 min) at the start of the run: ${LOAD_AT_START// / \/ }"
       --extra "Targets run: $TARGETS; results folder name: run-$RUN_ID")
case " $TARGETS " in *" tierfs-"*)
  EXTRA+=(--extra "TierFS: $("$TIERFS" version 2>&1 | head -1); mount options: -d --log <file> --buffer-size $TIERFS_BUFFER_SIZE${TIERFS_MOUNT_OPTS:+ $TIERFS_MOUNT_OPTS}")
esac
case " $TARGETS " in *" passthrough "*)
  EXTRA+=(--extra "passthrough_ll: libfuse $(pkg-config --modversion fuse3) example, built with cc -O2; options: -f -o source=<tmpfs>${PASSTHROUGH_OPTS:+ $PASSTHROUGH_OPTS} (otherwise defaults: cache=auto, timeout=1.0, no writeback, multi-threaded)")
esac

python3 "$HERE/summarize.py" --results "$RESULTS" --kit "$BENCH_KIT" --doc "$BENCH_DOC" \
  --cmdline "$CMDLINE" --tags "$TAGS" --buffer-size "$TIERFS_BUFFER_SIZE" \
  --knobs "$EFFECTIVE_KNOBS" "${EXTRA[@]}"
src=$?
log "updated $BENCH_DOC; results in $RESULTS"
if [ ${#FAILED[@]} -gt 0 ]; then
  log "targets with problems: ${FAILED[*]}"
  exit 1
fi
if [ "$src" = 3 ] && [ -n "${STRICT:-}" ]; then
  log "STRICT: a ratio is below its floor or client memory is above its limit"
  exit 3
fi
[ "$src" = 0 ] || [ "$src" = 3 ] || exit "$src"
exit 0
