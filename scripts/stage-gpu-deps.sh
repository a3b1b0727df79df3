#!/usr/bin/env bash
# Stages into .gpu-deps/ what a GPU machine with the pip LibTorch lacks to build placementd: the
# Debian headers and libraries of TOML++, METIS, Scotch and libsystemd, and Eigen's and gloo's headers. Run it
# on a Debian 12 development machine; copy .gpu-deps/ along with the tree (the device tool's
# `carry`). The folder mirrors /usr (include/, lib/x86_64-linux-gnu/, share/), so CMake package
# configs that find their prefix relative to themselves (TOML++'s, Eigen's) work unchanged with
# CMAKE_PREFIX_PATH=.gpu-deps; scripts/gpu-run.sh --stage build does that.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.gpu-deps
need=(libtomlplusplus-dev libmetis-dev libscotch-dev libsystemd-dev libeigen3-dev libgloo-dev)
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
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/x86_64-linux-gnu/cmake" "$out/share/eigen3"
cp -r /usr/include/toml++ /usr/include/metis.h /usr/include/scotch /usr/include/systemd /usr/include/eigen3 /usr/include/gloo "$out/include/"
cp -P "$arch"/libtomlplusplus.so* "$arch"/libmetis.so* "$arch"/libscotch*.so* "$out/lib/x86_64-linux-gnu/"
cp -r "$arch/cmake/tomlplusplus" "$out/lib/x86_64-linux-gnu/cmake/"
cp -r /usr/share/eigen3/cmake "$out/share/eigen3/"
# libsystemd.so.0 is on every systemd machine; only the link-time name is missing there.
ln -s "$arch/libsystemd.so.0" "$out/lib/x86_64-linux-gnu/libsystemd.so"
# Keep it out of git: it is a build input of one machine, not source.
if [ -d "$root/.git" ]; then
  mkdir -p "$root/.git/info"
  grep -qx '/.gpu-deps/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$root/.git/info/exclude"
fi
du -sh "$out" | sed 's/^/staged /'
