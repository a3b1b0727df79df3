#!/usr/bin/env python3
"""What job.step costs beyond the training step a PyTorch user writes, when no swap happens.

Two copies of one model train side by side on the same batches: one in the plain eager loop
(forward, loss, backward, optimizer.step(), zero_grad()), one through placement.Job.step with every
op on one device and no daemon. Windows of --window steps alternate between them (ABBA, so neither
always runs first); each pair of windows gives a ratio, and the figures are the median step times
and the mean overhead over the pairs with a 95% bootstrap interval, and each copy's minor page
faults a step (the process's, median window: a step whose tensors land on fresh pages pays for
them; issue #40 in docs/benchmarks.md). Issue #19's target: at most 3% on ResNet-18, or at most
50 us a step on a tiny model. Models train in train mode (dropout on, batch norm updating), as jobs
do: bert and gpt2 are transformers' BertForMaskedLM and GPT2LMHeadModel at BERT-base's and GPT-2
small's sizes (12 layers, hidden 768), random weights, masked-LM and next-token cross entropy over
--seq tokens.

    python3 bench/python/step_overhead.py --model mlp
    python3 bench/python/step_overhead.py --model resnet18 --batch 32 --image-size 224 --device cuda:0
    python3 bench/python/step_overhead.py --model gpt2 --batch 4 --seq 128
"""

import argparse
import random
import resource
import statistics
import sys
import time

import torch

import placement
from figures import interval, positive


def make(args):
    """(model, inputs, target, loss_fn) on the CPU, the same for every call (seeded)."""
    torch.manual_seed(args.seed)
    if args.model == "mlp":
        mlp = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
        )
        return mlp, (torch.randn(args.batch, 32),), torch.randn(args.batch, 4), torch.nn.functional.mse_loss
    if args.model in ("bert", "gpt2"):
        import transformers

        transformers.logging.set_verbosity_error()
        if args.model == "bert":
            model = transformers.BertForMaskedLM(transformers.BertConfig())  # BERT-base: 12 x 768, 30522 tokens
        else:
            model = transformers.GPT2LMHeadModel(transformers.GPT2Config(use_cache=False))  # GPT-2 small: 12 x 768
        vocab = model.config.vocab_size
        tokens = torch.randint(vocab, (args.batch, args.seq))

        def lm_loss(out, target):
            return torch.nn.functional.cross_entropy(out.logits.reshape(-1, vocab), target.reshape(-1))

        return model.train(), (tokens,), torch.randint(vocab, (args.batch, args.seq)), lm_loss
    import torchvision

    name = "resnet18" if args.model == "resnet18" else args.model.split(":", 1)[1]
    kwargs = {"num_classes": 1000}
    if name.startswith("vit_"):
        kwargs["image_size"] = args.image_size  # its position embedding is sized for the image
    model = torchvision.models.get_model(name, **kwargs)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size)

    def classification_loss(out, target):
        # GoogLeNet and Inception-V3 return their auxiliary classifiers' logits too in train mode.
        logits = out[0] if isinstance(out, tuple) else out
        return torch.nn.functional.cross_entropy(logits, target)

    return model.train(), (x,), torch.randint(1000, (args.batch,)), classification_loss


def make_optimizer(args, parameters):
    if args.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=1e-3)
    return torch.optim.SGD(parameters, lr=1e-3, momentum=0.9)


def model_name(text):
    """argparse type: mlp, resnet18, bert, gpt2 or torchvision:NAME of a torchvision classification model."""
    if text in ("mlp", "resnet18", "bert", "gpt2"):
        return text
    if text.startswith("torchvision:"):
        import torchvision

        name = text.split(":", 1)[1]
        if name in torchvision.models.list_models(module=torchvision.models):
            return text
        raise argparse.ArgumentTypeError(f"{text}: torchvision has no classification model {name!r}")
    raise argparse.ArgumentTypeError(f"{text} is not mlp, resnet18, bert, gpt2 or torchvision:NAME")


def op_times(steps, step):
    """{aten op: (self CPU seconds a step, calls a step)} over `steps` steps of `step`, profiled."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return {e.key: (e.self_cpu_time_total / 1e6 / steps, e.count / steps) for e in prof.key_averages()}


def print_op_differences(steps, plain_step, job_step, top=15):
    """The ops whose self time a step differs most between the two copies (profiled one after the other,
    twice, ABBA; the profiler's own cost is in both)."""
    plain_a, job_a = op_times(steps, plain_step), op_times(steps, job_step)
    job_b, plain_b = op_times(steps, job_step), op_times(steps, plain_step)

    def mean(a, b, key):
        return tuple((x + y) / 2 for x, y in zip(a.get(key, (0.0, 0.0)), b.get(key, (0.0, 0.0))))

    keys = set(plain_a) | set(job_a) | set(plain_b) | set(job_b)
    rows = [(key, mean(plain_a, plain_b, key), mean(job_a, job_b, key)) for key in keys]
    rows.sort(key=lambda r: -abs(r[2][0] - r[1][0]))
    total_plain = sum(r[1][0] for r in rows)
    total_job = sum(r[2][0] for r in rows)
    print(
        f"\nself CPU time a step under torch.profiler, {steps} steps of each copy twice (ABBA): plain "
        f"{1e3 * total_plain:.1f} ms, job.step {1e3 * total_job:.1f} ms; the {top} ops that differ most:"
    )
    print(f"{'op':44} {'plain ms':>10} {'job ms':>10} {'diff ms':>10} {'calls (plain/job)':>18}")
    for key, (plain_s, plain_n), (job_s, job_n) in rows[:top]:
        print(
            f"{key[:44]:44} {1e3 * plain_s:10.2f} {1e3 * job_s:10.2f} {1e3 * (job_s - plain_s):+10.2f} "
            f"{plain_n:8.0f}/{job_n:<8.0f}"
        )
    # Where a step is bound by launching kernels (a GPU at small batches), calls count more than time.
    calls = sorted((r for r in rows if round(r[1][1]) != round(r[2][1])), key=lambda r: -abs(r[2][1] - r[1][1]))
    if calls:
        print(f"\nthe ops called a different number of times a step ({len(calls)}; at most {top}):")
        for key, (plain_s, plain_n), (job_s, job_n) in calls[:top]:
            print(
                f"{key[:44]:44} {1e3 * plain_s:10.2f} {1e3 * job_s:10.2f} {1e3 * (job_s - plain_s):+10.2f} "
                f"{plain_n:8.0f}/{job_n:<8.0f}"
            )


def run():
    p = argparse.ArgumentParser(
        description="Per-step overhead of placement.Job.step against the plain PyTorch "
        "loop, no swap, windows interleaved in one run."
    )
    p.add_argument(
        "--model",
        type=model_name,
        default="resnet18",
        help="mlp (batch 8 by default), torchvision's resnet18 (default) or any of its classification "
        "models as torchvision:NAME (e.g. torchvision:convnext_tiny), or a BERT-base-sized "
        "encoder (bert) or GPT-2-small-sized decoder (gpt2) from transformers",
    )
    p.add_argument(
        "--batch", type=positive, help="batch size (default: 8 for mlp, 32 for resnet18, 8 for bert and gpt2)"
    )
    p.add_argument("--image-size", type=positive, default=224, help="resnet18's image size (default 224)")
    p.add_argument("--seq", type=positive, default=128, help="bert's and gpt2's tokens per example (default 128)")
    p.add_argument(
        "--device",
        default="cuda:0" if torch.cuda.is_available() else "cpu",
        help="where both copies train (default: cuda:0 when there is one, else cpu)",
    )
    p.add_argument(
        "--optimizer",
        choices=["sgd", "adam"],
        default="sgd",
        help="both copies' optimizer: SGD with momentum 0.9 (default) or Adam, lr 1e-3",
    )
    p.add_argument("--pairs", type=positive, default=20, help="pairs of windows (default 20)")
    p.add_argument("--window", type=positive, help="steps a window (default: 200 for mlp, 5 for resnet18)")
    p.add_argument("--warmup", type=positive, default=5, help="untimed steps of each copy first (default 5)")
    p.add_argument(
        "--frontend",
        choices=["export", "torchscript"],
        default="export",
        help="how the job's copy is captured (default export: torch.export, the SDK's default)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--profile",
        type=positive,
        metavar="N",
        help="then run N more steps of each copy under torch.profiler and print the ops whose "
        "time differs most between them (where an overhead comes from)",
    )
    args = p.parse_args()
    vision = args.model == "resnet18" or args.model.startswith("torchvision:")
    args.batch = args.batch or (32 if vision else 8)
    args.window = args.window or (200 if args.model == "mlp" else 5)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: this torch sees no CUDA device")

    model, inputs, target, loss_fn = make(args)
    plain = model.to(device)
    plain_inputs = tuple(x.to(device) for x in inputs)
    plain_target = target.to(device)
    plain_opt = make_optimizer(args, plain.parameters())

    placed_model, _, _, _ = make(args)
    job = placement.attach(
        "step-overhead", placed_model, inputs, devices=[args.device], use_daemon=False, frontend=args.frontend
    )
    job_inputs = plain_inputs
    job_opt = make_optimizer(args, job.parameters())

    def plain_step():
        loss = loss_fn(plain(*plain_inputs), plain_target)
        loss.backward()
        plain_opt.step()
        plain_opt.zero_grad()

    def job_step():
        job.step(job_inputs, loss_fn, job_opt, targets=plain_target)

    faults = {plain_step: [], job_step: []}

    def window(step):
        if cuda:
            torch.cuda.synchronize(device)
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        started = time.perf_counter()
        for _ in range(args.window):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - started) / args.window
        faults[step].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / args.window)
        return seconds

    for _ in range(args.warmup):
        plain_step()
        job_step()
    plain_s, job_s = [], []
    for pair in range(args.pairs):
        if pair % 2 == 0:
            plain_s.append(window(plain_step))
            job_s.append(window(job_step))
        else:
            job_s.append(window(job_step))
            plain_s.append(window(plain_step))
    if args.profile:
        print_op_differences(args.profile, plain_step, job_step)
    job.detach()

    ratios = [j / q for j, q in zip(job_s, plain_s)]
    deltas = [j - q for j, q in zip(job_s, plain_s)]
    rng = random.Random(args.seed)
    ratio_low, ratio_high = interval(ratios, rng)
    delta_low, delta_high = interval(deltas, rng)
    overhead = statistics.fmean(ratios) - 1
    delta = statistics.fmean(deltas)
    shape = f"batch {args.batch}" + (
        f", 3x{args.image_size}x{args.image_size}"
        if vision
        else {"bert": f" x {args.seq}", "gpt2": f" x {args.seq}"}.get(args.model, "")
    )
    print(
        f"{args.model} ({shape}) on {args.device}, {args.frontend} front end, {args.optimizer}, "
        f"torch {torch.__version__}: "
        f"{args.pairs} pairs of "
        f"{args.window}-step windows, alternating, after {args.warmup} warm-up steps each"
    )
    print(f"{'plain PyTorch loop':22} {1e3 * statistics.median(plain_s):10.3f} ms/step (median window)")
    print(f"{'job.step':22} {1e3 * statistics.median(job_s):10.3f} ms/step")
    print(
        f"{'minor page faults':22} {statistics.median(faults[plain_step]):10.0f} a plain step, "
        f"{statistics.median(faults[job_step]):.0f} a job.step (median window)"
    )
    print(
        f"{'overhead':22} {100 * overhead:+10.2f} %  (95% interval {100 * (ratio_low - 1):+.2f} to "
        f"{100 * (ratio_high - 1):+.2f})"
    )
    print(f"{'':22} {1e6 * delta:+10.1f} us/step (95% interval {1e6 * delta_low:+.1f} to {1e6 * delta_high:+.1f})")
    met = ratio_high - 1 <= 0.03 or delta_high <= 50e-6
    print(f"{'target':22} <= 3% or <= 50 us a step: {'met' if met else 'not met'} (upper bounds of the intervals)")


if __name__ == "__main__":
    try:
        run()
    except (ValueError, OSError) as e:
        print(f"step_overhead.py: {e}", file=sys.stderr)
        sys.exit(1)
