#!/usr/bin/env python3
"""Capture time and peak memory of large models through the torch.export front end.

Each model is built and exported on PyTorch's meta device (shapes, no weights), saved as a .pt2
(torch.export.save), and captured by `placementctl capture` from the program and the example
shapes alone: no weight is read or allocated, and ops without a meta kernel in LibTorch take the
outputs the program records for its example (the bench passes the exported shapes as --input).
Prints, per
model, the export's and the capture's wall time and peak resident memory. Issue #40's target:
capture within 30 s and 2 GiB.

    PYTHONPATH=build/python .venv/bin/python bench/python/export_capture_bench.py --placementctl build/bin/placementctl
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MODELS = ["gpt2_xl_bs8", "bert_large_mlm_bs24"]


def export(name, path):
    """Run in a process of its own (--export): this one stays small, and a child forked from it
    starts with little resident memory, which its peak would otherwise count."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models"))
    import make_models

    if name not in make_models.MODELS:
        sys.exit(f"unknown model {name}; known: {', '.join(make_models.MODELS)}")
    build, shapes, dtype = make_models.MODELS[name]
    with torch.device("meta"):
        model = build().train()
        inputs = tuple(torch.randint(0, 100, s) if dtype == "int64" else torch.randn(s) for s in shapes)
    torch.export.save(torch.export.export(model, inputs, strict=False), path)
    print(json.dumps({"shapes": shapes, "dtype": dtype, "torch": torch.__version__}))


def main():
    p = argparse.ArgumentParser(description="Capture time and peak RSS of large models exported on the meta device.")
    p.add_argument("--placementctl", default="build/bin/placementctl", help="the placementctl to run")
    p.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated names of tests/models/make_models.py (default {','.join(MODELS)})",
    )
    p.add_argument("--export", nargs=2, metavar=("NAME", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.export:
        export(*args.export)
        return
    print(f"{os.cpu_count()} CPUs")
    print(f"{'model':22} {'export':>9} {'capture':>9} {'capture peak RSS':>17}  graph")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = os.path.join(tmp, name + ".pt2")
            started = time.perf_counter()
            made = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--export", name, path], capture_output=True, text=True
            )
            export_s = time.perf_counter() - started
            if made.returncode != 0:
                sys.exit(
                    f"{name}: export failed: {made.stderr.strip().splitlines()[-1] if made.stderr.strip() else ''}"
                )
            facts = json.loads(made.stdout.strip().splitlines()[-1])
            shapes, dtype = facts["shapes"], facts["dtype"]
            command = [args.placementctl, "capture", path, "--dtype", dtype, "-o", os.path.join(tmp, name + ".json.gz")]
            for shape in shapes:
                command += ["--input", "x".join(str(d) for d in shape)]
            started = time.perf_counter()
            with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
                child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
                _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest so far
                capture_s = time.perf_counter() - started
                out.seek(0)
                err.seek(0)
                if os.waitstatus_to_exitcode(status) != 0:
                    sys.exit(f"{name}: placementctl capture failed: {err.read().strip()}")
                summary = out.read().splitlines()[0].split(": ", 1)[-1]
            peak = usage.ru_maxrss / 1024
            print(f"{name:22} {export_s:8.1f}s {capture_s:8.1f}s {peak:13.0f} MiB  {summary} (torch {facts['torch']})")


if __name__ == "__main__":
    main()
