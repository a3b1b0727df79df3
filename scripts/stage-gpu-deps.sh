#!/usr/bin/env bash
# Stages into .gpu-deps/ what a GPU machine with the pip LibTorch lacks to build placementd: the
# Debian headers, libraries and CMake package configs of every C++ dependency (Boost's headers,
# nlohmann-json, TOML++, spdlog and fmt, CLI11, prometheus-cpp, GoogleTest, Eigen, METIS, Scotch,
# gloo's headers, zlib, libsystemd), and the torchao wheel the offload benchmark compares against.
# That machine's image holds PyTorch, the CUDA toolkit, CMake and ninja, and nothing can be
# installed there. Run it on a Debian 12 development machine; copy
# .gpu-deps/ along with the tree (the device tool's `carry`). The folder mirrors /usr (include/,
# lib/x86_64-linux-gnu/, share/), so CMake package configs that find their prefix relative to
# themselves work unchanged with CMAKE_PREFIX_PATH=.gpu-deps; scripts/gpu-run.sh --stage build does
# that.
#
# Boost's headers are 150 MiB, past what travels to that machine (64 MiB), so only the Boost headers
# the build reads are staged: what the project's sources include, found by the preprocessor (g++ -M
# over every source file). No build is needed first, so a fresh checkout can stage at once when a
# GPU is lent; the test scripts.stage_gpu_deps checks the set against what a real build read.
#   scripts/stage-gpu-deps.sh [DIR]    (default: .gpu-deps in the checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"
out=${1:-$root/.gpu-deps}
need=(libtomlplusplus-dev libmetis-dev libscotch-dev libsystemd-dev libeigen3-dev libgloo-dev libboost-dev
      nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev prometheus-cpp-dev libgtest-dev libgmock-dev zlib1g-dev)
missing=()
for p in "${need[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "stage-gpu-deps.sh: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
arch=/usr/lib/x86_64-linux-gnu
lib=$out/lib/x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/include" "$lib/cmake" "$out/share/eigen3" "$out/share/cmake"
cp -r /usr/include/toml++ /usr/include/metis.h /usr/include/scotch /usr/include/systemd /usr/include/eigen3 \
  /usr/include/gloo /usr/include/nlohmann /usr/include/spdlog /usr/include/fmt /usr/include/CLI \
  /usr/include/prometheus /usr/include/gtest /usr/include/gmock /usr/include/zlib.h /usr/include/zconf.h "$out/include/"
# The Boost headers the sources read, with their paths under /usr/include kept: every source file is
# preprocessed with the include directories the build gives it, since which Boost headers a file
# reads depends on what was included before (Asio's strand.hpp pulls io_context_strand.hpp only after
# io_context.hpp). -MG lets headers that are not here (LibTorch's) pass. The defines are the ones
# the build sets that Boost's headers read (sdk/CMakeLists.txt).
# A file that does not preprocess alone (one that wants a define of its target) is passed over; its
# Boost headers are read by the files it shares them with.
{ (cd "$root" && git ls-files -- '*.cpp') |
  xargs -P "$(nproc)" -I{} g++ -std=c++17 -DBOOST_DLL_USE_STD_FS -M -MG -x c++ \
    -I"$root/sdk/include" -I"$root/daemon" -I"$root/sdk/src" -I"$root/sdk/src/torch" -I"$root/tests/support" \
    -I"$root/tests/mocks" -I"$root/examples/common" -I"$root/examples/live" "$root/{}" 2>/dev/null || true; } |
  tr ' \\' '\n\n' | grep -E '^/usr/include/boost/' | sort -u |
  (cd / && xargs cp --parents -t "$out")
[ -d "$out/usr/include/boost" ] && mv "$out/usr/include/boost" "$out/include/" && rm -rf "$out/usr"
[ -f "$out/include/boost/version.hpp" ] || { echo "stage-gpu-deps.sh: the preprocessor found no Boost headers in the sources" >&2; exit 1; }
cp -P "$arch"/libtomlplusplus.so* "$arch"/libmetis.so* "$arch"/libscotch*.so* "$arch"/libspdlog.so* "$arch"/libfmt.so* \
  "$arch"/libprometheus-cpp-*.so* "$arch"/libgtest*.a "$arch"/libgmock*.a "$arch"/libz.so.1* "$lib/"
ln -sf libz.so.1 "$lib/libz.so"
for config in tomlplusplus spdlog fmt prometheus-cpp GTest Boost-1.74.0 boost_headers-1.74.0 BoostDetectToolset-1.74.0.cmake; do
  cp -r "$arch/cmake/$config" "$lib/cmake/"
done
# placementd links prometheus-cpp's core alone; its pull and push parts would want civetweb and curl.
sed -i -E 's/^set\(PROMETHEUS_CPP_ENABLE_(PULL|PUSH) ON\)/set(PROMETHEUS_CPP_ENABLE_\1 OFF)/' \
  "$lib/cmake/prometheus-cpp/prometheus-cpp-config.cmake"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$out/share/cmake/"
cp -r /usr/share/eigen3/cmake "$out/share/eigen3/"
# libsystemd.so.0 is on every systemd machine; only the link-time name is missing there. Where it is
# not, the link dangles, CMake finds no libsystemd and builds without sd_notify (PLACEMENT_WITH_SYSTEMD=AUTO).
ln -s "$arch/libsystemd.so.0" "$lib/libsystemd.so"
# The torchao wheel the offload benchmark compares against (bench/python/offload_bench.py), at the
# version scripts/python-requirements.txt pins: the GPU machine reaches no registry, and its image has
# no torchao. gpu-run.sh --stage offload installs it from here.
torchao=$(grep -E '^torchao==' "$root/scripts/python-requirements.txt")
mkdir -p "$out/wheels"
"$placement_python" -m pip download -q --no-deps --only-binary :all: -d "$out/wheels" "$torchao" ||
  { echo "stage-gpu-deps.sh: could not download $torchao from PyPI" >&2; exit 1; }
# Keep it out of git: it is a build input of one machine, not source.
if [ -z "${1:-}" ] && [ -d "$root/.git" ]; then
  mkdir -p "$root/.git/info"
  grep -qx '/.gpu-deps/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$root/.git/info/exclude"
fi
du -sh "$out" | sed 's/^/staged /'
