"""The placement package as installed (by `cmake --install --component python`, or by pip into a
fresh environment): it is imported from under ROOT, not from the build tree, its libplacement
libraries are the ones installed under ROOT, and it trains a few steps.

usage: installed_package_check.py ROOT [VERSION]   (VERSION: what placement.__version__ must say)"""

import sys

import torch

import placement

root = sys.argv[1]
assert placement.__file__.startswith(root), f"imported {placement.__file__}, not the installed package"
if len(sys.argv) > 2:
    assert placement.__version__ == sys.argv[2], placement.__version__
with open("/proc/self/maps") as maps:
    loaded = {line.split()[-1] for line in maps if "libplacement" in line}
assert loaded and all(path.startswith(root) for path in loaded), f"libraries loaded from {sorted(loaded)}"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
x = torch.randn(32, 8)
with placement.attach("installed", model, (x,), use_daemon=False) as job:
    optimizer = torch.optim.AdamW(job.parameters(), lr=0.1)
    losses = [job.step((x,), lambda out: out.pow(2).mean(), optimizer).item() for _ in range(10)]
assert losses[-1] < losses[0], losses
print(
    f"placement {placement.__version__} installed at {placement.__file__} trained: "
    f"loss {losses[0]:.4f} -> {losses[-1]:.4f}"
)
