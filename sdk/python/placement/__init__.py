"""placementd's Python SDK: a PyTorch training loop lets placementd place its model while it trains.

    import torch, placement
    job = placement.attach("resnet-train", model, (example_input,), devices=["cuda:0", "cuda:1", "cpu"],
                           expected_steps=10_000)
    opt = torch.optim.Adam(job.parameters(), lr=1e-3)
    for x, y in loader:
        loss = job.step((x,), torch.nn.functional.cross_entropy, opt, targets=y)
    print(job.summary())

The loop never waits for placementd: when it is missing or dies, the job trains on its current
placement and attaches again once it is back. docs/python.md has the whole API.
"""

from __future__ import annotations

import re
from typing import Iterable

import torch

from ._build_info import TORCH_VERSION as _BUILT_AGAINST


def _release(version: str):
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else version


# The extension is C++ compiled against one torch's headers and libraries: beside another release
# (`pip install -U torch`) it fails to load with an undefined symbol, or worse, loads. Say so first.
if _release(torch.__version__) != _release(_BUILT_AGAINST):
    raise ImportError(
        f"placement was built against torch {_BUILT_AGAINST}, and this environment has torch "
        f"{torch.__version__}: its C++ extension runs only beside the torch it was compiled with. "
        "Build it again here: pip install --no-build-isolation --force-reinstall --no-deps <placement's "
        'source or sdist> (docs/python.md, "Installing it with pip")'
    )

from ._export import capture
from ._job import Job, Summary, attach
from ._placement import CaptureError, __version__
from ._placement import parameters_digest as _parameters_digest

__all__ = ["attach", "capture", "CaptureError", "Job", "Summary", "parameters_digest", "__version__"]


def parameters_digest(tensors: Iterable[torch.Tensor]) -> str:
    """16 hex digits over every tensor's bytes in order, as the C++ examples print: data-parallel
    replicas whose parameters agree bit for bit print the same."""
    return _parameters_digest([t.detach() for t in tensors])
