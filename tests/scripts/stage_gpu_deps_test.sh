#!/usr/bin/env bash
# scripts/stage-gpu-deps.sh finds the Boost headers to stage with the preprocessor, not from a
# build; this checks its set against what a real build read (BUILD_DIR's Ninja dependency log):
# a header the build read and the stage lacks breaks the GPU machine's build, which has Boost only
# from the stage (the 2026-11-27 run's first build: Asio's io_context_strand.hpp).
#   stage_gpu_deps_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source=$1
build=$2
out=$(mktemp -d -t placementd-stage.XXXXXX)  # mktemp fills in the X's
trap 'rm -rf "$out"' EXIT
"$source/scripts/stage-gpu-deps.sh" "$out/deps" >/dev/null
read_by_build=$(ninja -C "$build" -t deps | grep -oE '^ +/usr/include/boost/[^ ]+' | sed 's|^ */usr/include/||' | sort -u)
[ -n "$read_by_build" ] || { echo "no Boost header in $build's dependency log: is it a finished Ninja build?" >&2; exit 1; }
missing=0
while read -r header; do
  if [ ! -f "$out/deps/include/$header" ]; then
    echo "the build read $header, which the stage lacks" >&2
    missing=$((missing + 1))
  fi
done <<<"$read_by_build"
staged=$(find "$out/deps/include/boost" -type f | wc -l)
echo "$(wc -l <<<"$read_by_build") Boost headers read by the build, $staged staged, $missing missing"
[ "$missing" -eq 0 ]
# The libraries and package configs the GPU build finds through CMAKE_PREFIX_PATH, and the wheel
# the offload stage installs.
for f in lib/x86_64-linux-gnu/cmake/tomlplusplus lib/x86_64-linux-gnu/cmake/GTest share/cmake/nlohmann_json \
         include/metis.h include/toml++/toml.h wheels/torchao-*.whl; do
  compgen -G "$out/deps/$f" >/dev/null || { echo "the stage lacks $f" >&2; exit 1; }
done
