#!/usr/bin/env bash
# `pip install` of the SDK as docs/python.md shows it: an sdist made from this source, installed
# with pip install --no-build-isolation into a fresh virtual environment that has nothing of
# placementd's (pip builds the wheel against the torch there); the package then imports
# from site-packages, loads its own libraries from beside its extension, says its version, and
# trains a few steps. A build whose Python has no torch stops with the error that says what to do.
#   python_wheel.sh SOURCE_DIR PYTHON
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$1
python=$2
tmp=$(mktemp -d /tmp/pdwheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "python_wheel: $*" >&2; exit 1; }

version=$(sed -n 's/^project(placementd VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
# The sdist, through scikit-build-core's PEP 517 hook (what `python -m build --sdist` calls).
(cd "$source_dir" && "$python" -c "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))" "$tmp/dist") >"$tmp/sdist.log" 2>&1 \
  || { cat "$tmp/sdist.log"; fail "building the sdist failed"; }
sdist=$tmp/dist/placement-$version.tar.gz
[ -f "$sdist" ] || { ls -l "$tmp/dist"; fail "no $sdist"; }
listing=$(tar tzf "$sdist")
for needed in pyproject.toml CMakeLists.txt cmake/PlacementTorch.cmake sdk/python/module.cpp sdk/python/placement/__init__.py \
              sdk/python/placement/py.typed sdk/python/placement/_placement.pyi sdk/src/torch/engine.cpp; do
  grep -qx "placement-$version/$needed" <<<"$listing" || fail "the sdist lacks $needed"
done
if grep -qE "^placement-$version/(daemon|plugins|tests|bench)/" <<<"$listing"; then
  fail "the sdist carries the daemon's sources: $(grep -cE "/(daemon|plugins|tests|bench)/" <<<"$listing") files"
fi

# A fresh environment: torch (and scikit-build-core, the build backend) reachable from this
# Python's site-packages through a .pth file, as a venv with --system-site-packages sees a system
# torch; nothing of placementd's build is.
"$python" -m venv "$tmp/venv"
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
fresh_site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" >"$fresh_site/torch-from-the-build-python.pth"
# What docs/python.md shows: pip builds the wheel from the sdist against that torch and installs it.
env -u PYTHONPATH "$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index "$sdist" >"$tmp/install.log" 2>&1 \
  || { tail -n 40 "$tmp/install.log"; fail "pip install --no-build-isolation of the sdist failed"; }
installed=$(cd "$fresh_site" && find placement -type f | sort)
for needed in placement/__init__.py placement/py.typed placement/_placement.pyi placement/libplacement.so \
              placement/libplacement_torch.so; do
  grep -qx "$needed" <<<"$installed" || { echo "$installed"; fail "the installed package lacks $needed"; }
done
grep -q "^placement/_placement\..*\.so$" <<<"$installed" || fail "the installed package lacks the extension"
# One file a library: a wheel has no symbolic links, so a versioned name and its alias would be two copies.
if grep -q "\.so\.[0-9]" <<<"$installed"; then echo "$installed"; fail "the wheel held versioned library copies"; fi
cd "$tmp"
env -u PYTHONPATH -u LD_LIBRARY_PATH "$tmp/venv/bin/python" "$here/installed_package_check.py" "$fresh_site/placement/" \
  "$version"

# A Python without torch (as pip's isolated build environment is): the configure stops and says why.
bare=$tmp/bare
"$python" -m venv --without-pip "$bare"
if cmake -S "$source_dir" -B "$tmp/bare-build" -DSKBUILD=2 -DPython_EXECUTABLE="$bare/bin/python" \
     >"$tmp/bare.log" 2>&1; then
  fail "configuring for a Python without torch succeeded"
fi
said=$(tr -s ' \n' '  ' <"$tmp/bare.log")  # CMake wraps its messages
grep -q "cannot import one (ModuleNotFoundError: No module named 'torch')" <<<"$said" \
  && grep -q "pip install --no-build-isolation <source or sdist>" <<<"$said" \
  || { cat "$tmp/bare.log"; fail "the error does not say what is missing and what to do"; }
echo "python_wheel: sdist, wheel, install into a fresh environment and the missing-torch error all as documented"
