#!/usr/bin/env bash
# The Python package as `cmake --install` lays it out, staged under DESTDIR as a package would be:
# it imports from there, not from the build tree, loads the libplacement libraries installed beside
# the daemon, and trains a few steps.
set -euo pipefail
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
PYTHONPATH=$(dirname "$(dirname "$init")") LD_LIBRARY_PATH=$(dirname "$library") "$python" - "$tmp" <<'PY'
import sys

import torch

import placement

root = sys.argv[1]
assert placement.__file__.startswith(root), f"imported {placement.__file__}, not the installed package"
with open("/proc/self/maps") as maps:
    loaded = {line.split()[-1] for line in maps if "libplacement" in line}
assert loaded and all(path.startswith(root) for path in loaded), f"libraries loaded from {sorted(loaded)}"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
x = torch.randn(32, 8)
with placement.attach("installed", model, (x,), use_daemon=False) as job:
    optimizer = torch.optim.SGD(job.parameters(), lr=0.1)
    losses = [job.step((x,), lambda out: out.pow(2).mean(), optimizer).item() for _ in range(10)]
assert losses[-1] < losses[0], losses
print(f"the installed package ({placement.__file__}) trained: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
PY
