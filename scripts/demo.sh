#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a mounted volume on the embedded default
# (SQLite metadata + local directory for blocks). Re-running reuses the demo volume.
#   DEMO_DIR   where the database and blocks live   (default: ./demo-volume)
#   MOUNTPOINT where the volume is mounted           (default: ./demo-volume/mnt)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
TIERFS=$ROOT/build/src/cmd/tierfs
DEMO_DIR=${DEMO_DIR:-$ROOT/demo-volume}
MOUNTPOINT=${MOUNTPOINT:-$DEMO_DIR/mnt}
META="sqlite3://$DEMO_DIR/meta.db"
mkdir -p "$DEMO_DIR" "$MOUNTPOINT"
if ! "$TIERFS" status "$META" >/dev/null 2>&1; then
  "$TIERFS" format "$META" demo --storage file --bucket "$DEMO_DIR/blocks"
fi
if grep -qs " $MOUNTPOINT fuse" /proc/mounts; then
  echo "already mounted at $MOUNTPOINT"
else
  "$TIERFS" mount "$META" "$MOUNTPOINT" -d --log "$DEMO_DIR/tierfs.log"
fi
echo
echo "TierFS volume 'demo' is mounted at $MOUNTPOINT"
echo "  metadata: $META"
echo "  blocks:   $DEMO_DIR/blocks"
echo "  log:      $DEMO_DIR/tierfs.log"
echo "  unmount:  $TIERFS umount $MOUNTPOINT"
