#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
export OMP_NUM_THREADS=1
ctest --test-dir "${BUILD_DIR:-$root/build}" -j"$(nproc)" --output-on-failure --timeout 300
