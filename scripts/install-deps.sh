#!/usr/bin/env bash
# Installs the Debian 12 packages placementd builds and tests with, if any is missing.
# Everything comes from Debian; nothing is vendored or downloaded at build time. python3-torch and
# python3-torchvision (for /usr/bin/python3) trace the test models at test time. Debian's LibTorch
# links libblas.so.3; with the reference (netlib) BLAS behind it the learned placers' updates are
# 3-10x slower than with OpenBLAS, which libopenblas0-pthread installs as that alternative.
set -euo pipefail
packages=(
  cmake g++ ninja-build ccache pkg-config
  libboost-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libsystemd-dev zlib1g-dev libmetis-dev libscotch-dev
  libgtest-dev libgmock-dev libeigen3-dev
  libtorch-dev libopenblas0-pthread python3-torch python3-torchvision
  systemd util-linux python3
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing packages: ${missing[*]}" >&2
  echo "run as root, or: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
