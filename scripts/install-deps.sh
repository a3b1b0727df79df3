#!/usr/bin/env bash
# Installs what placementd builds and tests with, if any is missing:
# - Debian 12 packages (the toolchain, Boost, TOML++, METIS, Scotch, GoogleTest ...; clang with its
#   sanitizer and libFuzzer runtimes for scripts/sanitize.sh; clang-format-14 for scripts/format.sh;
#   rsvg-convert, which renders `placementctl jobs show --plot` in its test)
#   with apt-get;
# - PyTorch from PyPI (scripts/python-requirements.txt: torch 2.11 with its LibTorch, CUDA runtime
#   and NCCL, torchvision, transformers) into the project's virtual environment, .venv in the
#   checkout or $PLACEMENT_VENV. The build links that torch; the tests trace their models with it.
# Nothing is vendored or downloaded at build time. The environment is reused until the
# requirements file changes (2.8 GB of wheels the first time; pip's cache keeps them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/python-env.sh
. "$root/scripts/python-env.sh"

packages=(
  cmake g++ ninja-build ccache pkg-config
  libboost-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libsystemd-dev zlib1g-dev libmetis-dev libscotch-dev
  libgtest-dev libgmock-dev libeigen3-dev prometheus-cpp-dev libgloo-dev librsvg2-bin
  systemd util-linux python3 python3-venv
  dpkg-dev file
  clang libclang-rt-14-dev clang-format-14
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]}" >&2
    echo "run as root, or: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

requirements=$root/scripts/python-requirements.txt
stamp=$placement_venv/placementd-requirements.txt
if [ ! -x "$placement_python" ]; then
  echo "creating the Python environment $placement_venv"
  python3 -m venv "$placement_venv"
fi
if ! cmp -s "$requirements" "$stamp"; then
  echo "installing into $placement_venv: $(grep -v '^#' "$requirements" | tr '\n' ' ')"
  "$placement_python" -m pip install -q --progress-bar off -r "$requirements"
  cp "$requirements" "$stamp"
fi
