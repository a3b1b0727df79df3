#!/usr/bin/env bash
# Stages what the GPU machine lacks into .gpu-deps/ (copy it along with the tree: `carry`):
# ../shared/gpu/stage-deps.sh's TOML++, METIS, Scotch and libsystemd, plus Eigen, which that script
# predates (header-only; sim/model_assisted_selection.cpp uses it). The layout mirrors /usr, so
# CMAKE_PREFIX_PATH=.gpu-deps finds Eigen3Config.cmake and its include/eigen3 relative to it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${PLACEMENT_SHARED:-$root/../shared}
# The shared script records .gpu-deps in .git/info/exclude, which a fresh clone may lack.
[ -d "$root/.git" ] && mkdir -p "$root/.git/info"
(cd "$root" && "$shared/gpu/stage-deps.sh")
dpkg -s libeigen3-dev >/dev/null 2>&1 || apt-get install -y -q libeigen3-dev >/dev/null
mkdir -p "$root/.gpu-deps/include" "$root/.gpu-deps/share/eigen3"
cp -r /usr/include/eigen3 "$root/.gpu-deps/include/"
cp -r /usr/share/eigen3/cmake "$root/.gpu-deps/share/eigen3/"
du -sh "$root/.gpu-deps" | sed 's/^/staged with Eigen: /'
