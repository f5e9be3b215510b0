#!/bin/bash
# Build libfuse3's low-level passthrough example (passthrough_ll.c, shipped in the Debian
# package libfuse3-dev) for use as the "cost of FUSE itself" reference in bench/run.sh; with
# the argument `passthrough`, its high-level, path-based sibling (passthrough.c: no open
# descriptor per inode, for bench/readdir.py's directories of more entries than
# RLIMIT_NOFILE allows passthrough_ll).
#
# usage: bench/build-passthrough.sh [passthrough_ll|passthrough]   prints the binary's path
#
# env:
#   LIBFUSE_EXAMPLES  folder holding passthrough_ll.c (default: the libfuse3-dev examples)
#   BENCH_BUILD       build folder (default: <repo>/build/bench); binary = $BENCH_BUILD/NAME
#   CC                C compiler (default: cc)
#
# Idempotent: rebuilds only if the binary is missing or older than the example sources.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
EXAMPLES=${LIBFUSE_EXAMPLES:-/usr/share/doc/libfuse3-dev/examples}
BUILD=${BENCH_BUILD:-$REPO/build/bench}
CC=${CC:-cc}
NAME=${1:-passthrough_ll}
case $NAME in passthrough_ll|passthrough) ;; *) echo "build-passthrough: unknown example '$NAME'" >&2; exit 1 ;; esac
SRC_DIR=$BUILD/$NAME.src
BIN=$BUILD/$NAME

die() { echo "build-passthrough: $*" >&2; exit 1; }

pkg-config --exists fuse3 2>/dev/null ||
  die "pkg-config cannot find fuse3; install the Debian packages libfuse3-dev and pkg-config"

# Debian may ship documentation examples gzip-compressed; accept both forms.
find_src() {
  local name=$1
  if [ -f "$EXAMPLES/$name" ]; then echo "$EXAMPLES/$name"
  elif [ -f "$EXAMPLES/$name.gz" ]; then echo "$EXAMPLES/$name.gz"
  fi
}
MAIN=$(find_src "$NAME.c")
[ -n "$MAIN" ] || die "$NAME.c not found in $EXAMPLES (install libfuse3-dev or set LIBFUSE_EXAMPLES)"
HELPERS=$(find_src passthrough_helpers.h)

up_to_date() {
  [ -x "$BIN" ] || return 1
  [ "$BIN" -nt "$MAIN" ] || return 1
  [ -z "$HELPERS" ] || [ "$BIN" -nt "$HELPERS" ] || return 1
  [ "$BIN" -nt "$0" ] || return 1
}

if ! up_to_date; then
  mkdir -p "$SRC_DIR"
  for f in "$MAIN" $HELPERS; do
    base=$(basename "$f" .gz)
    case $f in
      *.gz) gzip -dc "$f" > "$SRC_DIR/$base" ;;
      *) cp "$f" "$SRC_DIR/$base" ;;
    esac
  done
  echo "build-passthrough: compiling $MAIN -> $BIN" >&2
  # shellcheck disable=SC2046 # pkg-config output must be word-split
  "$CC" -O2 -Wall -o "$BIN.tmp" "$SRC_DIR/$NAME.c" $(pkg-config --cflags --libs fuse3) >&2 ||
    die "compilation failed"
  mv -f "$BIN.tmp" "$BIN"
fi
echo "$BIN"
