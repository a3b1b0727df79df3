#!/usr/bin/env bash
# The Python package as `cmake --install` lays it out, staged under DESTDIR as a package would be:
# it imports from there, not from the build tree, loads the libplacement libraries installed beside
# the daemon, and trains a few steps.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
python=$2
tmp=$(mktemp -d /tmp/pdpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "python_import: $*" >&2; exit 1; }

DESTDIR=$tmp cmake --install "$build" >/dev/null
DESTDIR=$tmp cmake --install "$build" --component python >/dev/null
init=$(find "$tmp" -path '*/placement/__init__.py' | head -n 1)
[ -n "$init" ] || { find "$tmp" -type f | sort; fail "cmake --install --component python installed no placement package"; }
ls "$(dirname "$init")"/_placement*.so >/dev/null 2>&1 || fail "the package was installed without its extension"
library=$(find "$tmp" -name 'libplacement_torch.so.0' | head -n 1)
[ -n "$library" ] || fail "cmake --install installed no libplacement_torch.so.0"
# The staged libraries stand in for the ones the extension's RUNPATH names (the configured
# prefix's lib directory), which exist only after a real install.
cd "$tmp"
PYTHONPATH=$(dirname "$(dirname "$init")") LD_LIBRARY_PATH=$(dirname "$library") \
  "$python" "$here/installed_package_check.py" "$tmp"
