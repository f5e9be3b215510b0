#!/bin/bash
# Build libfuse3's low-level passthrough example (passthrough_ll.c, shipped in the Debian
# package libfuse3-dev) for use as the "cost of FUSE itself" reference in bench/run.sh.
#
# usage: bench/build-passthrough.sh        prints the path of the binary on stdout
#
# env:
#   LIBFUSE_EXAMPLES  folder holding passthrough_ll.c (default: the libfuse3-dev examples)
#   BENCH_BUILD       build folder (default: <repo>/build/bench); binary = $BENCH_BUILD/passthrough_ll
#   CC                C compiler (default: cc)
#
# Idempotent: rebuilds only if the binary is missing or older than the example sources.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
EXAMPLES=${LIBFUSE_EXAMPLES:-/usr/share/doc/libfuse3-dev/examples}
BUILD=${BENCH_BUILD:-$REPO/build/bench}
CC=${CC:-cc}
SRC_DIR=$BUILD/passthrough_ll.src
BIN=$BUILD/passthrough_ll

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
MAIN=$(find_src passthrough_ll.c)
[ -n "$MAIN" ] || die "passthrough_ll.c not found in $EXAMPLES (install libfuse3-dev or set LIBFUSE_EXAMPLES)"
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
  "$CC" -O2 -Wall -o "$BIN.tmp" "$SRC_DIR/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) >&2 ||
    die "compilation failed"
  mv -f "$BIN.tmp" "$BIN"
fi
echo "$BIN"
