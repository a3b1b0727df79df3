#!/usr/bin/env python3
"""What job.step costs beyond plain eager PyTorch across torchvision's classification models: for
each model, bench/python/step_overhead.py in a process of its own (the same batches, windows
interleaved, a 95% bootstrap interval), one row a model as it ends. The setting is a new user's
first try: a small batch at a small image size, Adam, one intra-op thread. Issue #66's target: each
model within 3% (the interval's upper bound), or its reason in docs/benchmarks.md.

    python3 bench/python/zoo_overhead.py
    python3 bench/python/zoo_overhead.py --models resnet18,convnext_tiny,swin_t --pairs 10
"""

import argparse
import os
import re
import subprocess
import sys

from figures import positive

HERE = os.path.dirname(os.path.abspath(__file__))


def zoo():
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def parameters(name):
    """How many parameters the model has, counted on the meta device (no memory)."""
    import torch
    import torchvision

    try:
        with torch.device("meta"):
            model = torchvision.models.get_model(name, num_classes=1000)
    except NotImplementedError:
        # RegNet's builder computes its widths from tensor values, which meta tensors have none of.
        model = torchvision.models.get_model(name, num_classes=1000)
    return sum(p.numel() for p in model.parameters())


def run():
    p = argparse.ArgumentParser(
        description="job.step against plain eager PyTorch over torchvision's "
        "classification models, one process a model."
    )
    p.add_argument("--models", help="comma-separated torchvision model names (default: every classification model)")
    p.add_argument("--batch", type=positive, default=2, help="images a batch (default 2)")
    p.add_argument("--image-size", type=positive, default=64, help="image size (default 64)")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="adam", help="default adam")
    p.add_argument("--pairs", type=positive, default=6, help="pairs of windows a model (default 6)")
    p.add_argument("--window", type=positive, default=3, help="steps a window (default 3)")
    p.add_argument("--threads", type=positive, default=1, help="intra-op threads (default 1)")
    p.add_argument("--timeout", type=positive, default=600, help="seconds a model may take (default 600)")
    p.add_argument(
        "--max-parameters",
        type=float,
        default=100e6,
        help="models with more parameters are listed, not run: two copies train at once, with Adam's "
        "state (default 1e8)",
    )
    args = p.parse_args()
    names = zoo()
    if args.models:
        chosen = [m for m in args.models.split(",") if m]
        unknown = [m for m in chosen if m not in names]
        if unknown or not chosen:
            p.error(f"--models: {', '.join(unknown) or 'none given'} not among torchvision's classification models")
        names = chosen
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print(
        f"{len(names)} models, batch {args.batch} at {args.image_size}x{args.image_size}, {args.optimizer}, "
        f"{args.threads} thread(s), {args.pairs} pairs of {args.window}-step windows each",
        flush=True,
    )
    print(f"{'model':28} {'eager ms':>10} {'job ms':>10} {'overhead (95% interval)':>30}", flush=True)
    within, rows = 0, []
    for name in names:
        count = parameters(name)
        if count > args.max_parameters:
            print(
                f"{name:28} not run: {count / 1e6:.0f} M parameters (--max-parameters {args.max_parameters:g})",
                flush=True,
            )
            continue
        command = [
            sys.executable,
            os.path.join(HERE, "step_overhead.py"),
            "--model",
            f"torchvision:{name}",
            "--batch",
            str(args.batch),
            "--image-size",
            str(args.image_size),
            "--optimizer",
            args.optimizer,
            "--pairs",
            str(args.pairs),
            "--window",
            str(args.window),
            "--device",
            "cpu",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            print(f"{name:28} did not end in {args.timeout} s", flush=True)
            continue
        plain = re.search(r"^plain PyTorch loop +([0-9.]+) ms", done.stdout, re.M)
        job = re.search(r"^job\.step +([0-9.]+) ms", done.stdout, re.M)
        over = re.search(r"^overhead +([-+0-9.]+) % +\(95% interval ([-+0-9.]+) to ([-+0-9.]+)\)", done.stdout, re.M)
        if done.returncode != 0 or not (plain and job and over):
            last = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-1:]
            print(f"{name:28} did not run: {last[0][:160] if last else 'exit ' + str(done.returncode)}", flush=True)
            continue
        mean, low, high = (float(x) for x in over.groups())
        within += high <= 3.0
        rows.append((name, mean, high))
        print(
            f"{name:28} {float(plain.group(1)):10.2f} {float(job.group(1)):10.2f} "
            f"{mean:+12.2f} % ({low:+.2f} to {high:+.2f})",
            flush=True,
        )
    if rows:
        worst = max(rows, key=lambda r: r[2])
        print(
            f"within 3% (upper bound): {within} of {len(rows)} measured; the highest upper bound: {worst[0]} "
            f"{worst[2]:+.2f} %"
        )


if __name__ == "__main__":
    run()
