#!/usr/bin/env bash
# Configures and builds TierFS into ./build (BUILD_TYPE=RelWithDebInfo by default).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
ninja -C "$BUILD_DIR" -j"${JOBS:-2}"
