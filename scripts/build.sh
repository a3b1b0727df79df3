#!/usr/bin/env bash
# Configures (once) and builds into build/ (override with BUILD_DIR). Release, Ninja, ccache,
# against the torch in the project's Python environment (scripts/install-deps.sh makes it).
#   PLACEMENT_WITH_CUDA  ON, OFF or AUTO (default): the CUDA copy paths, compiled and linked
#                        against that torch's CUDA runtime and NCCL; CI sets ON.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
build=${BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  if ! torch_prefix=$("$placement_python" -c 'import torch; print(torch.utils.cmake_prefix_path)'); then
    echo "no torch in $placement_venv: run scripts/install-deps.sh first" >&2
    exit 1
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACEMENT_BUILD_TESTS=ON -DPLACEMENT_BUILD_BENCH=ON \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPLACEMENT_WITH_TORCH=ON -DPLACEMENT_WITH_CUDA="${PLACEMENT_WITH_CUDA:-AUTO}"
fi
cmake --build "$build" -j"$(nproc)"
