"""The training loop the Python examples share: attach a model to placementd, train it on
synthetic batches for --steps, print progress and what the job did (the C++ examples'
examples/live/live_training.cpp, in Python). Each example gives the model, its batches and its
loss."""

import argparse
import contextlib
import os
import sys
import time

import torch

import placement


def parser(description, job):
    """The options every example takes; an example adds its model's own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=positive, default=300, help="training steps (default 300)")
    p.add_argument("--log-every", type=positive, default=50, help="print progress every N steps (default 50)")
    p.add_argument("--job", default=job, help=f"job name shown by placementctl (default {job})")
    p.add_argument(
        "--devices",
        help="comma-separated devices placementd may use (default: every CUDA device "
        "and the CPU; without CUDA, two logical CPU devices cpu:0,cpu:1)",
    )
    p.add_argument("--socket", help="placementd's socket (default: $PLACEMENTD_SOCKET, else the system socket)")
    p.add_argument("--no-daemon", action="store_true", help="train without placementd (the control run)")
    p.add_argument("--seed", type=int, default=0, help="seeds the model's initial weights and the batches")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    p.add_argument(
        "--losses",
        metavar="FILE",
        help="write every step's loss here (hex floats, one a line), to compare runs bit for bit",
    )
    return p


def language_model_options(p, batch, context, vocab, width, heads, layers):
    """The sizes the language-model examples (train_lm.py, train_hf.py) take, with their defaults."""
    p.add_argument("--batch", type=positive, default=batch, help=f"sequences per batch (default {batch})")
    p.add_argument("--context", type=positive, default=context, help=f"tokens per sequence (default {context})")
    p.add_argument("--vocab", type=positive, default=vocab, help=f"vocabulary size (default {vocab})")
    p.add_argument("--width", type=positive, default=width, help=f"model width (default {width})")
    p.add_argument("--heads", type=positive, default=heads, help=f"attention heads (default {heads})")
    p.add_argument("--layers", type=positive, default=layers, help=f"transformer blocks (default {layers})")


def check_language_model_options(p, args):
    if args.width % args.heads:
        p.error(f"--width {args.width} is not a multiple of --heads {args.heads}")


def synthetic_text(args):
    """batch(step) for the language-model examples: ((tokens,), next tokens). Each sequence steps
    through the vocabulary by a fixed stride from a random token, a rule the model can learn, so
    the loss falls from log(vocab) as it trains; the same batches in every run."""

    def batch(step):
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        start = torch.randint(args.vocab, (args.batch, 1), generator=g)
        stride = torch.randint(1, 8, (args.batch, 1), generator=g)
        text = (start + stride * torch.arange(args.context + 1)) % args.vocab
        return (text[:, :-1],), text[:, 1:]  # predict each next token

    return batch


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def devices(args):
    if args.devices:
        return [d.strip() for d in args.devices.split(",") if d.strip()]
    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())] + ["cpu"]
    return ["cpu:0", "cpu:1"]


def train(args, model, example_inputs, batch, loss_fn, make_optimizer=None, make_scheduler=None):
    """Trains `model` for args.steps steps: batch(step) gives (inputs, target), loss_fn(output,
    target) the loss. The target may be on any device: the job moves it to the output's.
    make_optimizer(parameters) gives the optimizer (default Adam at --lr), make_scheduler(optimizer)
    a learning-rate scheduler stepped after every step (default none)."""
    started = time.monotonic()
    job = placement.attach(
        args.job,
        model,
        example_inputs,
        devices=devices(args),
        expected_steps=args.steps,
        socket=args.socket,
        use_daemon=not args.no_daemon,
    )
    with job:
        status = job.daemon()
        if args.no_daemon:
            where = "not used"
        elif status["connected"]:
            where = f"session {status['session']}"
        else:
            where = f"not reachable ({status['last_error']}); training anyway"
        stats = job.stats()
        if stats["world_size"] > 1 and stats["rank"] > 0 and not args.no_daemon:
            where = "of rank 0, which places every rank"
        print(
            f"job '{args.job}': {len(job.placement)} ops on {', '.join(job.device_names)}; placementd {where}",
            flush=True,
        )
        if stats["world_size"] > 1:
            print(
                f"replica: rank {stats['rank']} of {stats['world_size']} in group {stats['replica_group']}", flush=True
            )
        optimizer = (make_optimizer or (lambda p: torch.optim.Adam(p, lr=args.lr)))(job.parameters())
        scheduler = make_scheduler(optimizer) if make_scheduler else None
        with contextlib.ExitStack() as files:
            losses = files.enter_context(open(args.losses, "w")) if args.losses else None
            train_steps(args, job, optimizer, scheduler, batch, loss_fn, losses)
        answer = job.detach()
    stats = job.stats()
    summary = job.summary()  # what placementd did for the job, asked after the detach
    print(f"\n== summary\n{'wall time':34} {time.monotonic() - started:.1f} s")
    print(summary)
    if summary["placementd"] is None:
        print(f"{'placement in force':34} {_describe(stats)}")
    counts = {}
    for d in job.placement:
        counts[job.device_names[d]] = counts.get(job.device_names[d], 0) + 1
    print(f"{'ops per device':34} " + ", ".join(f"{name}: {n}" for name, n in counts.items()))
    # Replicas: what carried each device's gradients between the ranks (NCCL, or Gloo and why).
    for device, route in stats["collectives"].items():
        print(f"{'gradients on ' + device:34} {route}")
    # Data-parallel replicas (torchrun's environment) print the same digest.
    print(f"parameters digest: {placement.parameters_digest(job.parameters())}")
    if not args.no_daemon and stats["rank"] == 0:
        detached = answer["detached"]
        if detached is None:
            print(f"detached: no answer ({answer['last_error'] or 'placementd not reachable'})")
        else:
            best = detached["best_step_time_s"]
            print(
                f"detached: best {f'{best:.6f} s/step' if best is not None else 'none'}, "
                f"{'persisted' if detached['persisted'] else 'not persisted'} "
                f"(attached {answer['attaches']} time{'' if answer['attaches'] == 1 else 's'}); "
                f"placementctl jobs --finished shows what placementd found"
            )


def train_steps(args, job, optimizer, scheduler, batch, loss_fn, losses):
    """The loop itself, printing every --log-every steps the mean step time since the last line."""
    window_s = 0.0
    # Under torchrun's environment rank r of n trains on batches r, n + r, 2n + r, ...
    rank, world = job.stats()["rank"], job.stats()["world_size"]
    for step in range(args.steps):
        inputs, target = batch(step * world + rank)
        loss = job.step(inputs, loss_fn, optimizer, targets=target).item()
        if scheduler is not None:
            scheduler.step()
        if losses:
            losses.write(f"{loss.hex()}\n")
        stats = job.stats()
        window_s += stats["last_step_s"]
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            away = "  [placementd away]" if not args.no_daemon and rank == 0 and not job.daemon()["connected"] else ""
            steps_in_window = (step % args.log_every) + 1
            print(
                f"step {step + 1:6d}  loss {loss:.4f}  lr {optimizer.param_groups[0]['lr']:.2e}  "
                f"{1e3 * window_s / steps_in_window:7.2f} ms/step  placement {_describe(stats)}{away}",
                flush=True,
            )
            window_s = 0.0


def _describe(stats):
    """ "3 (policy, exploring)"; the job's own placement, before placementd's first, is "0 (own)"."""
    why = ", ".join(x for x in (stats["reason"], stats["state"]) if x)
    return f"{stats['placement_id']} ({why})"


def main(program, run):
    """Runs `run()`; an error the user can fix (a bad device, a model that cannot be captured, a
    file that cannot be written) is one line on stderr and status 1."""
    try:
        run()
    except (ValueError, OSError) as e:
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


def program_name():
    return os.path.basename(sys.argv[0])
