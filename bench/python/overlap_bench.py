#!/usr/bin/env python3
"""What updating on the host while the backward goes on is worth: one residence plan, two copies of
one model trained side by side on the same batches, one with attach(overlap_updates=True) (each
parameter that lives on the host updated there as soon as its gradient is home, on a thread of its
own), one with overlap_updates=False (one optimizer.step() after the backward).

Windows of --window steps alternate between the copies (ABBA, so neither always runs first); each
pair of windows gives a ratio, and the figures are the median step times and the mean ratio over
the pairs with a 95% bootstrap interval, and the host's time on the overlapped updates (and the
copies that let a failed step undo them) a step. Both copies take the same batches in the same
order, so on the CPU they train bit for bit alike (--check fails otherwise).

The model is a GPT-2- or Llama-style decoder from transformers' configs in train mode, with AdamW
(fused on the CPU kernel where --fused); --device cpu trains on two logical CPU devices (cpu:0
computes, cpu:1 is the host), --device cuda:N on that GPU with the host as "cpu".

    python3 bench/python/overlap_bench.py --check
    python3 bench/python/overlap_bench.py --plan optimizer_on_host --layers 8 --hidden 512
    python3 bench/python/overlap_bench.py --device cuda:0 --layers 16 --hidden 2048 --seq 512
"""

import argparse
import random
import statistics
import sys
import time

import torch

import placement
from figures import interval, positive
from offload_bench import batch, build, lm_loss, residence

PLANS = ["stream_all", "optimizer_on_host", "half_streamed"]


def parse():
    p = argparse.ArgumentParser(
        description="A residence plan's step with the host's updates overlapped with the "
        "backward against one step after it, windows interleaved in one run."
    )
    p.add_argument(
        "--model",
        choices=["gpt2", "llama"],
        default="gpt2",
        help="a GPT-2-style (default) or Llama-style decoder from transformers' config classes",
    )
    p.add_argument(
        "--plan",
        choices=PLANS,
        default="stream_all",
        help="where the parameters live (offload_bench.py's plans; default stream_all)",
    )
    p.add_argument("--hidden", type=positive, default=256, help="hidden size (default 256)")
    p.add_argument("--layers", type=positive, default=4, help="blocks (default 4)")
    p.add_argument("--heads", type=positive, default=4, help="attention heads (default 4)")
    p.add_argument("--vocab", type=positive, default=4096, help="vocabulary (default 4096)")
    p.add_argument("--seq", type=positive, default=64, help="tokens a sequence (default 64)")
    p.add_argument("--batch", type=positive, default=2, help="sequences a batch (default 2)")
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True) in both copies")
    p.add_argument("--device", default="cpu", help="cpu (default: logical devices cpu:0 and cpu:1) or cuda:N")
    p.add_argument("--pairs", type=positive, default=10, help="pairs of windows (default 10)")
    p.add_argument("--window", type=positive, default=3, help="steps a window (default 3)")
    p.add_argument("--warmup", type=positive, default=2, help="untimed steps of each copy first (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless the overlapped copy updated on the host during its backward and, on the CPU, "
        "both copies trained bit for bit alike",
    )
    args = p.parse_args()
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.device != "cpu" and not args.device.startswith("cuda:"):
        p.error(f"--device {args.device}: cpu or cuda:N")
    # offload_bench's helpers read these.
    args.kv_heads = None
    args.intermediate = None
    args.cpu = args.device == "cpu"
    return args


def run():
    args = parse()
    cuda = not args.cpu
    if cuda and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: this torch sees no CUDA device")
    devices = ["cpu:0", "cpu:1"] if args.cpu else [args.device, "cpu"]
    compute, host = devices

    copies = {}
    for overlap in (True, False):
        model = build(args)
        job = placement.attach(
            f"overlap-{overlap}",
            model,
            (batch(args, 0, "cpu"),),
            devices=devices,
            use_daemon=False,
            residence=residence(args.plan, args, model, host),
            overlap_updates=overlap,
        )
        opt = torch.optim.AdamW(job.parameters(), lr=1e-4, fused=args.fused or None)
        # Each copy draws its dropout masks from random state of its own, so that the interleaving
        # gives both the same masks.
        torch.manual_seed(args.seed + 1)
        rng = (torch.get_rng_state(), torch.cuda.get_rng_state(args.device) if cuda else None)
        copies[overlap] = {"job": job, "opt": opt, "model": model, "step": 0, "losses": [], "window_s": [], "rng": rng}

    def steps(copy, count):
        torch.set_rng_state(copy["rng"][0])
        if cuda:
            torch.cuda.set_rng_state(copy["rng"][1], args.device)
        for _ in range(count):
            tokens = batch(args, copy["step"], "cpu")
            loss = copy["job"].step((tokens,), lm_loss, copy["opt"], targets=(tokens,))
            copy["losses"].append(loss.item())
            copy["step"] += 1
        copy["rng"] = (torch.get_rng_state(), torch.cuda.get_rng_state(args.device) if cuda else None)

    def window(copy):
        if cuda:
            torch.cuda.synchronize(args.device)
        started = time.perf_counter()
        steps(copy, args.window)
        if cuda:
            torch.cuda.synchronize(args.device)
        copy["window_s"].append((time.perf_counter() - started) / args.window)

    for copy in copies.values():
        steps(copy, args.warmup)
    timed_from = {overlap: copy["job"].stats() for overlap, copy in copies.items()}
    for pair in range(args.pairs):
        order = (True, False) if pair % 2 == 0 else (False, True)
        for overlap in order:
            window(copies[overlap])

    on, off = copies[True], copies[False]
    stats_on = on["job"].stats()
    timed_steps = args.pairs * args.window
    host_s = (stats_on["overlapped_update_seconds"] - timed_from[True]["overlapped_update_seconds"]) / timed_steps
    updated = stats_on["overlapped_updates"]
    proxies = on["job"].residence_activity()["proxies"]
    ratios = [a / b for a, b in zip(on["window_s"], off["window_s"])]
    low, high = interval(ratios, random.Random(args.seed))
    count = sum(p.numel() for p in on["model"].parameters())
    print(
        f"{args.model}, {args.layers} blocks, hidden {args.hidden}, {count / 1e6:.1f} M parameters, batch "
        f"{args.batch} x {args.seq}, plan {args.plan}, AdamW{' (fused)' if args.fused else ''}, on {compute} with "
        f"the host as {host}, torch {torch.__version__}, {torch.get_num_threads()} intra-op threads: {args.pairs} "
        f"pairs of {args.window}-step windows, alternating, after {args.warmup} warm-up steps each"
    )
    print(f"{'update after the backward':32} {1e3 * statistics.median(off['window_s']):10.2f} ms/step (median window)")
    print(f"{'update during the backward':32} {1e3 * statistics.median(on['window_s']):10.2f} ms/step")
    print(f"{'ratio (during / after)':32} {statistics.fmean(ratios):10.3f}     (95% interval {low:.3f} to {high:.3f})")
    print(
        f"{'host time on overlapped updates':32} {1e3 * host_s:10.2f} ms/step (with the copies that let a failed step "
        f"undo them, made under placementd's placements only)"
    )
    print(f"{'parameters updated during it':32} {updated:10d} of {proxies} read through proxies, {on['step']} steps")
    if not args.check:
        return 0
    checks = [
        (updated > 0, "the overlapped copy updated parameters during its backward"),
        (off["job"].stats()["overlapped_updates"] == 0, "the other copy updated none during its backward"),
    ]
    if args.cpu:
        same = on["losses"] == off["losses"] and all(
            torch.equal(p.detach(), q.detach()) for p, q in zip(on["model"].parameters(), off["model"].parameters())
        )
        checks.append((same, "both copies trained bit for bit alike (losses and parameters)"))
    for met, text in checks:
        print(f"check: {'met' if met else 'NOT MET'}: {text}")
    return 0 if all(met for met, _ in checks) else 1


if __name__ == "__main__":
    try:
        sys.exit(run())
    except (ValueError, OSError) as e:
        print(f"overlap_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
