#!/usr/bin/env python3
"""Data-parallel replicas: what placement.Job's replica group costs against a plain torch.distributed
loop, for 1, 2 and 4 ranks on this machine.

Each rank trains two copies of one model side by side on the same batches, in alternating windows:
one through placement.Job.step (its own Gloo group from torchrun's environment, no daemon), one in
the plain eager loop whose gradients a torch.distributed Gloo group averages in the same flat
buckets (25 MiB per device and dtype, parameter order). Rank 0 reports both step times and both
all-reduce times per step; the ratios come with a 95% bootstrap interval over the window pairs.
Issue #20's target: the placement layer's all-reduce within 5% of the plain one.

    python3 bench/python/replicas_bench.py --ranks 1,2,4
"""

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

import torch

from figures import interval, positive


def ranks(text):
    values = [positive(v) for v in text.split(",")]
    return values


def free_ports(count, rng):
    """Distinct free ports below the kernel's ephemeral range: a port bind(0) hands out is back in the
    pool once its socket closes, where any connect() on the machine (a Gloo pair, another test) can
    take it before the rank that was meant to listen on it does."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    held = []
    try:
        while len(held) < count:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", rng.randrange(10000, ephemeral_low)))
            except OSError:
                s.close()
                continue
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def model(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(512, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 512),
    )


def buckets(parameters, limit=25 << 20):
    """The replica group's buckets: by device and dtype, in parameter order, at most `limit` bytes."""
    out, filled, current = [], {}, {}
    for p in parameters:
        key = (str(p.device), p.dtype)
        size = p.numel() * p.element_size()
        if key not in current or filled[key] + size > limit:
            current[key] = []
            out.append(current[key])
            filled[key] = 0
        current[key].append(p)
        filled[key] += size
    return out


def child(args):
    import torch.distributed as dist

    import placement

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{os.environ['PLAIN_PORT']}", rank=rank, world_size=world
    )
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(args.batch, 512, generator=g), torch.randn(args.batch, 512, generator=g)
    loss_fn = torch.nn.functional.mse_loss

    job = placement.attach("replicas-bench", model(args.width), (x,), devices=["cpu"], use_daemon=False)
    job_opt = torch.optim.SGD(job.parameters(), lr=1e-3)
    plain = model(args.width)
    plain_opt = torch.optim.SGD(plain.parameters(), lr=1e-3)
    plain_buckets = buckets(list(plain.parameters()))
    plain_allreduce = [0.0]

    def plain_step():
        loss_fn(plain(x), y).backward()
        started = time.perf_counter()
        for bucket in plain_buckets if world > 1 else []:  # one process: the plain loop alone
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            dist.all_reduce(flat)
            flat.div_(world)
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        plain_allreduce[0] += time.perf_counter() - started
        plain_opt.step()
        plain_opt.zero_grad()

    def job_step():
        job.step((x,), loss_fn, job_opt, targets=y)

    def window(step, allreduce):
        before = allreduce()
        started = time.perf_counter()
        for _ in range(args.window):
            step()
        return (time.perf_counter() - started) / args.window, (allreduce() - before) / args.window

    for _ in range(args.warmup):
        job_step()
        plain_step()
    rows = {"job": [], "plain": []}
    for pair in range(args.pairs):
        order = [
            ("job", job_step, lambda: job.stats()["allreduce_seconds"]),
            ("plain", plain_step, lambda: plain_allreduce[0]),
        ]
        for name, step, allreduce in order if pair % 2 == 0 else reversed(order):
            rows[name].append(window(step, allreduce))
    # Rank 0 serves both groups' stores: no rank leaves before every rank is done with them.
    dist.barrier()
    job.detach()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(rows))


def parent(args):
    parameters = sum(p.numel() for p in model(args.width).parameters())
    print(
        f"MLP 512-{args.width}-{args.width}-512 ({parameters / 1e6:.1f} M parameters, {4 * parameters / 2**20:.0f} MiB "
        f"of gradients), batch {args.batch} a rank, on cpu; {args.pairs} pairs of {args.window}-step windows, "
        f"alternating, after {args.warmup} warm-up steps; torch {torch.__version__}, {os.cpu_count()} cores"
    )
    print(
        f"{'ranks':>5} {'job step':>10} {'plain step':>11} {'step ratio (95%)':>24} {'job all-reduce':>15} "
        f"{'plain all-reduce':>17} {'all-reduce ratio (95%)':>26}"
    )
    rng = random.Random(0)
    ports = random.Random()
    for n in args.ranks:
        master_port, plain_port = free_ports(2, ports)
        env = dict(
            os.environ,
            WORLD_SIZE=str(n),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(master_port),
            PLAIN_PORT=str(plain_port),
            OMP_NUM_THREADS=str(args.threads),
        )
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            "--width",
            str(args.width),
            "--batch",
            str(args.batch),
            "--pairs",
            str(args.pairs),
            "--window",
            str(args.window),
            "--warmup",
            str(args.warmup),
        ]
        procs = [
            subprocess.Popen(
                command,
                env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r in range(n)
        ]
        outputs = [p.communicate(timeout=args.timeout) for p in procs]
        failed = [(r, p.returncode, err) for r, (p, (_, err)) in enumerate(zip(procs, outputs)) if p.returncode != 0]
        if failed:
            r, code, err = failed[0]
            tail = "\n".join(err.strip().splitlines()[-8:]) or "(nothing on stderr)"
            raise RuntimeError(f"{n} ranks: rank {r} exited with {code}; the end of its stderr:\n{tail}")
        rows = json.loads(outputs[0][0].strip().splitlines()[-1])
        job_step = [s for s, _ in rows["job"]]
        plain_step = [s for s, _ in rows["plain"]]
        step_ratio = [j / p for j, p in zip(job_step, plain_step)]
        low, high = interval(step_ratio, rng)
        line = (
            f"{n:>5} {1e3 * statistics.median(job_step):>8.2f}ms {1e3 * statistics.median(plain_step):>9.2f}ms "
            f"{statistics.fmean(step_ratio):>8.3f} ({low:.3f}-{high:.3f})"
        )
        if n > 1:
            job_ar = [a for _, a in rows["job"]]
            plain_ar = [a for _, a in rows["plain"]]
            ar_ratio = [j / p for j, p in zip(job_ar, plain_ar)]
            ar_low, ar_high = interval(ar_ratio, rng)
            line += (
                f" {1e3 * statistics.median(job_ar):>13.2f}ms {1e3 * statistics.median(plain_ar):>15.2f}ms "
                f"{statistics.fmean(ar_ratio):>10.3f} ({ar_low:.3f}-{ar_high:.3f})"
            )
        else:
            line += f" {'-':>15} {'-':>17} {'(one rank: no all-reduce)':>26}"
        print(line, flush=True)


def main():
    p = argparse.ArgumentParser(
        description="Step and gradient all-reduce time of placement.Job's replica group "
        "against a plain torch.distributed loop, for several rank counts."
    )
    p.add_argument("--ranks", type=ranks, default=[1, 2, 4], help="rank counts, comma-separated (default 1,2,4)")
    p.add_argument("--width", type=positive, default=1024, help="the MLP's hidden width (default 1024)")
    p.add_argument("--batch", type=positive, default=32, help="rows a rank per step (default 32)")
    p.add_argument("--pairs", type=positive, default=10, help="pairs of windows (default 10)")
    p.add_argument("--window", type=positive, default=5, help="steps a window (default 5)")
    p.add_argument("--warmup", type=positive, default=3, help="untimed steps of each loop first (default 3)")
    p.add_argument("--threads", type=positive, default=1, help="intra-op threads a rank (default 1)")
    p.add_argument("--timeout", type=positive, default=600, help="seconds a rank count may take (default 600)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError, RuntimeError) as e:
        print(f"replicas_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
