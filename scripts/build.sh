#!/usr/bin/env bash
# Configures (once) and builds into build/ (override with BUILD_DIR). Release, Ninja, ccache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACEMENT_BUILD_TESTS=ON -DPLACEMENT_BUILD_BENCH=ON
fi
cmake --build "$build" -j"$(nproc)"
