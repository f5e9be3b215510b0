#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite: installs packages,
# builds, runs every unit and integration test (mounted file systems, real tools).
# Exits non-zero when any test fails.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
cd "$ROOT/build"
# Unit tests run two at a time; mount tests are marked RUN_SERIAL and run alone.
ctest --output-on-failure -j2
