#!/usr/bin/env python3
"""Training a model larger than its GPU: placementd's residence plans against what users pick
instead, the same model, batches and optimizer in one run.

Rows, each trained in a process of its own (so that its peak memory is its own):
  ideal                plain eager PyTorch on the device with memory to spare (no cap)
  torchao              torchao's CPUOffloadOptimizer(offload_gradients=True): parameters on the
                       GPU; gradients, AdamW's state and its step on the host
  fsdp2                FSDP2's fully_shard with CPUOffloadPolicy at world size 1 (every block and
                       the root): parameters, gradients and optimizer state on the host, each block
                       copied in for its use
  placementd:PLAN      placement.Job with every op on the device and the residence PLAN:
                       stream_all (every parameter homed on the host, streamed for each use: FSDP2's
                       plan), optimizer_on_host (homed on the host, a persistent copy on the device:
                       torchao's plan), half_streamed (the first half of the parameters streamed, the
                       rest on the device), activations_offloaded and blocks_recomputed (the
                       optimizer on the host and every activation offloaded to the host, or each
                       transformer block recomputed in the backward)
  placementd:none      placement.Job with everything on the device: the model that does not fit

The device is capped (torch.cuda.set_per_process_memory_fraction; --cpu: the logical device
cpu:0's memory_limit_bytes) so that the model's training state (parameters, gradients and AdamW's
two moments, 16 bytes a parameter) is --ratio times the cap. Per row: the step time (median of the
steps after the warm-up, with its 95% bootstrap interval), the ratio to the ideal's (95% interval:
rows run one after another, so the interval is over their steps, not over interleaved windows),
the peak device memory (the caching allocator's on a GPU; the job's own tally on cpu:0), the peak
host RSS, the pinned host bytes (torch's pinned allocator's peak, and in placementd's rows its own
pinned pool's peak beside it), and the parameter and gradient bytes the
residence moved a step. A row that cannot run says why (a plan over the cap is refused before its
first step, or fails with the device's out-of-memory error).

--cpu trains on two logical CPU devices (cpu:0 computes, cpu:1 is the host) at a small size: every
placementd row must train bit for bit as the ideal (losses; --check fails otherwise) with its
accounted peak on cpu:0 within the cap; torchao and FSDP2's offload need a GPU and say so. On a GPU,
--check holds the targets of the issue it comes from: at a ratio of 1.5 or less, the fastest
placementd plan within 1.10x the ideal and 1.10x faster than the faster of torchao and FSDP2; above
it, a placementd plan trains wherever either does and is no slower (95% intervals).

    python3 bench/python/offload_bench.py --cpu --check
    python3 bench/python/offload_bench.py --model gpt2 --ratio 1.5
    python3 bench/python/offload_bench.py --model llama --ratio 3 --rows ideal,torchao,placementd:stream_all
"""

import argparse
import hashlib
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import time

from figures import positive

HERE = os.path.dirname(os.path.abspath(__file__))
PLANS = ["stream_all", "optimizer_on_host", "half_streamed", "activations_offloaded", "blocks_recomputed"]
ROWS = ["ideal", "torchao", "fsdp2"] + [f"placementd:{plan}" for plan in PLANS] + ["placementd:none"]
# Per parameter: its value, its gradient and AdamW's two moments, in float32.
STATE_BYTES_PER_PARAMETER = 16
# The modules whose children are the blocks a recompute or FSDP2 unit covers one by one.
BLOCKS = {"gpt2": "transformer.h", "llama": "model.layers"}
LR = 1e-4


def config(args):
    """The transformers model the arguments ask for, built on `device` (meta: shapes only)."""
    import transformers

    transformers.logging.set_verbosity_error()
    if args.model == "gpt2":
        return transformers.GPT2LMHeadModel, transformers.GPT2Config(
            vocab_size=args.vocab,
            n_embd=args.hidden,
            n_layer=args.layers,
            n_head=args.heads,
            n_positions=args.seq,
            use_cache=False,
        )
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate or 4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads or args.heads,
        max_position_embeddings=args.seq,
        use_cache=False,
    )


def build(args, device="cpu"):
    import torch

    cls, cfg = config(args)
    torch.manual_seed(args.seed)
    with torch.device(device):
        return cls(cfg).train()


def parameter_count(args):
    return sum(p.numel() for p in build(args, "meta").parameters())


def batch(args, step, device):
    import torch

    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)


def lm_loss(output, tokens):
    """Next-token cross entropy."""
    import torch

    logits = output.logits if hasattr(output, "logits") else output["logits"]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1)
    )


def residence(plan, args, model, host):
    """The residence PLAN as attach() takes it."""
    on_host = {"": (host, "persist")}
    if plan == "stream_all":
        return {"parameters": {"": (host, "stream")}}
    if plan == "optimizer_on_host":
        return {"parameters": on_host}
    if plan == "half_streamed":
        names = [n for n, _ in model.named_parameters()]
        return {"parameters": {n: (host, "stream") for n in names[: len(names) // 2]}}
    if plan == "activations_offloaded":
        return {"parameters": on_host, "activations": {"": ("offload", host)}}
    if plan == "blocks_recomputed":
        return {"parameters": on_host, "activations": {f"{BLOCKS[args.model]}.*": "recompute"}}
    raise ValueError(f"no plan {plan!r}: one of {', '.join(PLANS)}")


def optimizer(params, fused):
    import torch

    return torch.optim.AdamW(params, lr=LR, fused=fused)


class Measure:
    """A row's step times, losses and peaks, measured in its own process."""

    def __init__(self, args):
        import torch

        self.torch = torch
        self.cuda = not args.cpu
        self.device = args.device
        self.step_s, self.losses = [], []
        self.peak_device = None
        self.parameters_sha256 = None

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def run(self, args, step):
        """`step(i)` returns the loss tensor of step i (the model's own device)."""
        for i in range(args.warmup + args.steps):
            self.sync()
            started = time.perf_counter()
            loss = step(i)
            self.sync()
            if i >= args.warmup:
                self.step_s.append(time.perf_counter() - started)
            self.losses.append(loss.item())

    def digest(self, parameters):
        """On the CPU, a digest of the trained parameters' bytes (what --check compares with the ideal's)."""
        if self.cuda:
            return
        h = hashlib.sha256()
        for p in parameters:
            h.update(p.detach().contiguous().view(-1).view(self.torch.uint8).numpy().tobytes())
        self.parameters_sha256 = h.hexdigest()

    def result(self, extra=None):
        torch = self.torch
        peak = self.peak_device
        pinned = None
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device)
            pinned = int(torch.cuda.host_memory_stats().get("allocated_bytes.peak", 0))
        out = {
            "ran": True,
            "step_s": self.step_s,
            "losses": self.losses,
            "peak_device_bytes": peak,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "pinned_bytes": pinned,
            "parameters_sha256": self.parameters_sha256,
        }
        out.update(extra or {})
        return out


def cap_device(args, cap):
    """On a GPU, what this process's caching allocator may hold."""
    import torch

    if args.cpu or cap is None:
        return
    total = torch.cuda.get_device_properties(args.device).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), args.device)


def eager_step(args, model, opt):
    """The plain training step every eager row runs: forward, loss, backward, optimizer step."""

    def step(i):
        tokens = batch(args, i, args.device)
        loss = lm_loss(model(tokens), tokens)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    return step


def row_ideal(args, cap):
    import torch

    model = build(args)
    if args.cpu and args.model == "llama":
        # transformers' Llama exports a graph that PyTorch itself trains 1-2 ulp away from the eager
        # module (tests/python/test_export.py): the bit-for-bit reference is that graph.
        example = (batch(args, 0, "cpu"),)
        model = torch.export.export(model, example, strict=False, dynamic_shapes=({0: torch.export.Dim.AUTO},)).module()
    model.to(args.device)
    opt = optimizer(model.parameters(), fused=True)
    measure = Measure(args)
    torch.manual_seed(args.seed + 1)

    measure.run(args, eager_step(args, model, opt))
    measure.digest(model.parameters())
    return measure.result()


def row_torchao(args, cap):
    import torch

    try:
        from torchao.optim import CPUOffloadOptimizer
    except ImportError as e:
        return {"ran": False, "why": f"torchao is not installed ({e}); scripts/install-deps.sh installs it"}
    cap_device(args, cap)
    model = build(args)
    try:
        opt = CPUOffloadOptimizer(
            model.to(args.device).parameters(), torch.optim.AdamW, offload_gradients=True, fused=True, lr=LR
        )
    except AssertionError as e:  # its device check
        return {"ran": False, "why": f"torchao: {e}"}
    measure = Measure(args)
    torch.manual_seed(args.seed + 1)

    measure.run(args, eager_step(args, model, opt))
    return measure.result()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def row_fsdp2(args, cap):
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    if args.cpu:
        return {
            "ran": False,
            "why": "FSDP2's CPUOffloadPolicy offloads a GPU's tensors to the host: it needs a "
            "CUDA device (on the CPU it fails looking for an NVIDIA driver)",
        }
    cap_device(args, cap)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    torch.cuda.set_device(args.device)
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        model = build(args)
        policy = CPUOffloadPolicy(pin_memory=True)
        for block in model.get_submodule(BLOCKS[args.model]):
            fully_shard(block, offload_policy=policy)
        fully_shard(model, offload_policy=policy)
        opt = optimizer(model.parameters(), fused=True)
        measure = Measure(args)
        torch.manual_seed(args.seed + 1)
        measure.run(args, eager_step(args, model, opt))
        return measure.result()
    finally:
        dist.destroy_process_group()


def row_placementd(args, cap, plan):
    import torch

    import placement

    model = build(args)
    host = "cpu:1" if args.cpu else "cpu"
    options = {"devices": [args.device, host], "use_daemon": False}
    if plan != "none":
        options["residence"] = residence(plan, args, model, host)
    if args.cpu:
        options["memory_limit_bytes"] = [cap, 0]
    else:
        cap_device(args, cap)
    example = (batch(args, 0, "cpu"),)
    try:
        job = placement.attach(f"offload-{plan}", model, example, **options)
    except (ValueError, RuntimeError) as e:
        return {"ran": False, "why": f"refused at attach: {str(e).splitlines()[0]}"}
    opt = optimizer(job.parameters(), fused=True)
    measure = Measure(args)
    peaks = []
    torch.manual_seed(args.seed + 1)

    def step(i):
        tokens = batch(args, i, "cpu")
        loss = job.step((tokens,), lm_loss, opt, targets=(tokens,))
        peaks.append(job.stats()["peak_bytes"][0])
        return loss

    before = job.residence_activity()
    try:
        measure.run(args, step)
    except (RuntimeError, torch.OutOfMemoryError) as e:
        return {"ran": False, "why": f"failed at step {len(measure.losses)}: {str(e).splitlines()[0]}"}
    after = job.residence_activity()
    measure.digest(model.parameters())
    if args.cpu:
        measure.peak_device = max(peaks)
    pool_peak = job.stats()["pinned_peak_bytes"]
    job.detach()
    steps = args.warmup + args.steps
    moved = {
        key: (after.get(key, 0) - before.get(key, 0)) // steps
        for key in ("parameter_bytes_fetched", "gradient_bytes_sent_home", "activation_bytes_evicted")
    }
    out = measure.result({"moved_bytes": moved, "accounted_peak_bytes": max(peaks)})
    if measure.cuda:  # what the job's pinned pool held locked, beside torch's own pinned allocator
        out["pinned_bytes"] = (out["pinned_bytes"] or 0) + pool_peak
    return out


def run_row(args):
    """In the child: one row, its result as one JSON line on stdout."""
    import torch

    if args.cpu:
        torch.set_num_threads(1)
    cap = args.cap_bytes
    row = args.row
    try:
        if row == "ideal":
            result = row_ideal(args, None)
        elif row == "torchao":
            result = row_torchao(args, cap)
        elif row == "fsdp2":
            result = row_fsdp2(args, cap)
        else:
            result = row_placementd(args, cap, row.split(":", 1)[1])
    except torch.OutOfMemoryError as e:
        result = {"ran": False, "why": f"out of memory: {str(e).splitlines()[0]}"}
    print("ROW " + json.dumps(result), flush=True)


def child(args, row, cap):
    """Runs `row` in a process of its own; its result, or why it did not run."""
    command = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--row", row, "--cap-bytes", str(cap)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.row_timeout)
    except subprocess.TimeoutExpired:
        return {"ran": False, "why": f"did not end in {args.row_timeout} s (--row-timeout)"}
    for line in done.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:])
    last = [line for line in done.stderr.splitlines() if line.strip()][-3:]
    return {"ran": False, "why": f"its process exited with {done.returncode}: " + " | ".join(last)}


def median_interval(values, rng, resamples=2000):
    """The 95% bootstrap interval of the median."""
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def ratio_interval(values, reference, rng, resamples=2000):
    """The 95% bootstrap interval of median(values) / median(reference), resampling both."""
    ratios = sorted(
        statistics.median(rng.choices(values, k=len(values)))
        / statistics.median(rng.choices(reference, k=len(reference)))
        for _ in range(resamples)
    )
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def size(n):
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def link_speeds(args):
    """H2D and D2H GB/s of one pinned 256 MiB copy on this GPU (the median of five)."""
    import torch

    host = torch.empty(64 * 2**20, dtype=torch.float32, pin_memory=True)
    device = torch.empty_like(host, device=args.device)
    speeds = []
    for source, target in ((host, device), (device, host)):
        times = []
        for _ in range(5):
            torch.cuda.synchronize(args.device)
            started = time.perf_counter()
            target.copy_(source, non_blocking=True)
            torch.cuda.synchronize(args.device)
            times.append(time.perf_counter() - started)
        speeds.append(host.numel() * 4 / statistics.median(times) / 1e9)
    del host, device
    torch.cuda.empty_cache()  # the rows' processes share the GPU with this one
    return speeds


def check_targets(args, results, ideal):
    """What --check holds the run to; each target as (met, text)."""
    checks = []
    planned = {row: r for row, r in results.items() if row.startswith("placementd:") and row != "placementd:none"}
    if args.cpu:
        for row, r in planned.items():
            if not r["ran"]:
                # A plan that needs more than the cap may not train, but the cap must hold it.
                held = "refused at attach" in r["why"] or "(its memory limit)" in r["why"]
                checks.append((held, f"{row} does not fit the cap and stopped at it: {r['why']}"))
                continue
            checks.append(
                (
                    r["losses"] == ideal["losses"] and r["parameters_sha256"] == ideal["parameters_sha256"],
                    f"{row} trains bit for bit as the ideal (losses and parameters)",
                )
            )
            checks.append(
                (
                    r["accounted_peak_bytes"] <= args.cap_bytes,
                    f"{row}'s accounted peak on cpu:0 ({r['accounted_peak_bytes']} B) within the cap",
                )
            )
        if planned:
            checks.append((any(r["ran"] for r in planned.values()), "a placementd plan trains within the cap"))
        none = results.get("placementd:none")
        if none is not None:
            checks.append((not none["ran"], "the model without a plan does not fit the cap"))
        return checks
    rng = random.Random(args.seed)
    ran = {row: r for row, r in planned.items() if r["ran"]}
    baselines = {row: r for row, r in results.items() if row in ("torchao", "fsdp2") and r["ran"]}
    if not ran:
        return [(False, "no placementd plan trained")]
    best = min(ran, key=lambda row: statistics.median(ran[row]["step_s"]))
    if args.ratio <= 1.5:
        low, high = ratio_interval(ran[best]["step_s"], ideal["step_s"], rng)
        checks.append((high <= 1.10, f"{best} within 1.10x the ideal (95% interval {low:.2f}-{high:.2f})"))
        if baselines:
            fastest = min(baselines, key=lambda row: statistics.median(baselines[row]["step_s"]))
            low, high = ratio_interval(baselines[fastest]["step_s"], ran[best]["step_s"], rng)
            checks.append((low >= 1.10, f"{best} 1.10x faster than {fastest} (95% interval {low:.2f}-{high:.2f}x)"))
    else:
        for row in baselines:
            low, high = ratio_interval(ran[best]["step_s"], baselines[row]["step_s"], rng)
            checks.append((low <= 1.0, f"{best} no slower than {row} (95% interval {low:.2f}-{high:.2f}x its step)"))
    return checks


def print_header(width):
    print(
        f"{'row':{width}}  {'step ms (median, 95%)':>24}  {'vs ideal (95%)':>20}  {'peak device':>11}  "
        f"{'peak RSS':>9}  {'pinned':>9}  moved a step (parameters / gradients / activations)",
        flush=True,
    )


def print_row(row, r, ideal, width, rng):
    """One row of the table, as soon as the row has run (a run cut short keeps what it printed)."""
    if not r["ran"]:
        print(f"{row:{width}}  did not run: {r['why']}", flush=True)
        return
    median = statistics.median(r["step_s"])
    low, high = median_interval(r["step_s"], rng)
    against = "-"
    if ideal is not None and ideal["ran"] and row != "ideal":
        a, b = ratio_interval(r["step_s"], ideal["step_s"], rng)
        against = f"{median / statistics.median(ideal['step_s']):.2f} ({a:.2f}-{b:.2f})"
    moved = r.get("moved_bytes")
    moved_text = (
        "-"
        if moved is None
        else " / ".join(
            size(moved[k]) for k in ("parameter_bytes_fetched", "gradient_bytes_sent_home", "activation_bytes_evicted")
        )
    )
    timing = f"{1e3 * median:9.2f} ({1e3 * low:.2f}-{1e3 * high:.2f})"
    print(
        f"{row:{width}}  {timing:>24}  {against:>20}  {size(r['peak_device_bytes']):>11}  "
        f"{size(r['peak_rss_bytes']):>9}  {size(r['pinned_bytes']):>9}  {moved_text}",
        flush=True,
    )


def checked(args, results):
    """--check's verdict: 0 when every target is met."""
    ideal = results.get("ideal")
    if ideal is None or not ideal["ran"]:
        print("check: NOT MET: the ideal row did not run, so nothing can be compared")
        return 1
    checks = check_targets(args, results, ideal)
    for met, text in checks:
        print(f"check: {'met' if met else 'NOT MET'}: {text}")
    return 0 if all(met for met, _ in checks) else 1


def parse():
    p = argparse.ArgumentParser(
        description="placementd's residence plans against torchao's and FSDP2's offload, "
        "the same model and batches, one run."
    )
    p.add_argument(
        "--model",
        choices=["gpt2", "llama"],
        default="gpt2",
        help="a GPT-2-style (default) or Llama-style decoder from transformers' config classes",
    )
    p.add_argument("--hidden", type=positive, help="hidden size (default 2048; --cpu: 32)")
    p.add_argument("--layers", type=positive, help="blocks (default 16; --cpu: 2)")
    p.add_argument("--heads", type=positive, help="attention heads (default hidden / 128; --cpu: 2)")
    p.add_argument("--kv-heads", type=positive, help="llama's key/value heads (default: --heads)")
    p.add_argument("--intermediate", type=positive, help="llama's MLP width (default 4 x hidden)")
    p.add_argument("--vocab", type=positive, help="vocabulary (default 50257 for gpt2, 32000 for llama; --cpu: 128)")
    p.add_argument("--seq", type=positive, help="tokens a sequence (default 512; --cpu: 16)")
    p.add_argument("--batch", type=positive, help="sequences a batch (default 4; --cpu: 1)")
    p.add_argument(
        "--ratio", type=float, default=1.5, help="the model's training state over the device's cap (default 1.5)"
    )
    p.add_argument("--device", help="the GPU (default cuda:0; --cpu: the logical device cpu:0)")
    p.add_argument("--cpu", action="store_true", help="two logical CPU devices at a small size (what CI runs)")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default all: {','.join(ROWS)})")
    p.add_argument("--steps", type=positive, help="timed steps a row (default 20; --cpu: 3)")
    p.add_argument("--warmup", type=int, help="untimed steps a row first (default 3; --cpu: 1)")
    p.add_argument("--row-timeout", type=positive, default=600, help="seconds a row may take (default 600)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="exit 1 when a target is not met (see above)")
    p.add_argument("--json", metavar="FILE", help="also write every row's measurements to FILE")
    p.add_argument("--row", help=argparse.SUPPRESS)
    p.add_argument("--cap-bytes", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    small = args.cpu
    defaults = dict(
        hidden=32 if small else 2048,
        layers=2 if small else 16,
        seq=16 if small else 512,
        batch=1 if small else 4,
        steps=3 if small else 20,
        warmup=1 if small else 3,
        device="cpu:0" if small else "cuda:0",
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.heads = args.heads or (2 if small else max(1, args.hidden // 128))
    args.vocab = args.vocab or (128 if small else (50257 if args.model == "gpt2" else 32000))
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.ratio <= 0:
        p.error(f"--ratio {args.ratio} is not positive")
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup} is negative")
    rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        p.error(f"--rows: {', '.join(unknown) or 'none given'}: the rows are {', '.join(ROWS)}")
    args.rows = rows
    return args


def main():
    args = parse()
    if args.row is not None:
        run_row(args)
        return 0
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("offload_bench.py: this torch sees no CUDA device; --cpu runs the CPU rows", file=sys.stderr)
        return 2
    params = parameter_count(args)
    state = STATE_BYTES_PER_PARAMETER * params
    args.cap_bytes = int(state / args.ratio)
    versions = f"torch {torch.__version__}"
    try:
        import torchao

        versions += f", torchao {torchao.__version__}"
    except ImportError:
        versions += ", no torchao"
    where = (
        "two logical CPU devices (cpu:0 computes with a memory limit, cpu:1 is the host), one thread"
        if args.cpu
        else f"{args.device} ({torch.cuda.get_device_name(args.device)}) and the host"
    )
    count = f"{params / 1e9:.2f} B" if params >= 1e8 else f"{params / 1e6:.2f} M" if params >= 1e5 else f"{params}"
    print(
        f"offload_bench: {args.model} (hidden {args.hidden}, {args.layers} blocks, {count} parameters; "
        f"training state {size(state)} with AdamW) on {where}; the device capped at {size(args.cap_bytes)} "
        f"(the state {args.ratio:g}x the cap); batch {args.batch} x {args.seq} tokens; {args.steps} steps a row "
        f"after {args.warmup} warm-up; {versions}"
    )
    if not args.cpu:
        h2d, d2h = link_speeds(args)
        print(
            f"link (a pinned 256 MiB copy, median of 5): host to device {h2d:.1f} GB/s, device to host {d2h:.1f} GB/s"
        )
    print("rows run one after another, each in a process of its own; intervals are over each row's steps")
    width = max(len(row) for row in args.rows)
    print_header(width)
    results = {}
    rng = random.Random(args.seed)
    for row in args.rows:
        results[row] = child(args, row, args.cap_bytes)
        print_row(row, results[row], results.get("ideal"), width, rng)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "model": args.model,
                    "parameters": params,
                    "state_bytes": state,
                    "cap_bytes": args.cap_bytes,
                    "ratio": args.ratio,
                    "rows": results,
                },
                f,
                indent=1,
            )
    return checked(args, results) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
