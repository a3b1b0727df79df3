"""A Python training loop under torchrun's environment trains as a data-parallel replica (the C++
job API's replica group, Gloo on 127.0.0.1): both ranks run placementd's placements at the same
steps and end with the same parameters, those of one process trained on the whole batches."""

import json
import os
import socket
import subprocess
import sys

import torch

from conftest import Mlp, batch

# Each rank trains on its half of every batch of conftest's data; the parameters go to argv[3].
SCRIPT = r"""
import hashlib, sys, torch, placement
from conftest import Mlp, batch
torch.manual_seed(0 if sys.argv[1] in ("single", "0") else 101)  # rank 0's weights must win
model = Mlp()
job = placement.attach("py-replicas", model, (batch(0)[0][:4],), devices=["cpu:0", "cpu:1"], socket=sys.argv[2],
                       use_daemon=sys.argv[1] != "single")
optimizer = torch.optim.Adam(job.parameters(), lr=1e-2)
rank, world = job.stats()["rank"], job.stats()["world_size"]
placements = []
for step in range(80):
    x, y = batch(step)
    share = slice(rank * 8 // world, (rank + 1) * 8 // world)
    job.step((x[share],), lambda out, y: ((out - y) ** 2).mean(), optimizer, targets=y[share])
    placements.append(job.stats()["placement_id"])
job.detach()
# Logical CPU devices are all c10d's "cpu": Gloo carries them; one process has no group at all.
assert job.stats()["collectives"] == ({"cpu": "gloo"} if world > 1 else {}), job.stats()["collectives"]
torch.save([p.detach() for p in model.parameters()], sys.argv[3])
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(rank, world, digest, ",".join(map(str, placements)))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_env():
    """torchrun's environment for a group of two on 127.0.0.1, with conftest importable."""
    return dict(
        os.environ,
        WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ["PYTHONPATH"]]),
    )


def run_ranks(script, args_of_rank, env):
    """Runs both ranks of `script` (its arguments: args_of_rank(rank)); their outputs, once each exited 0."""
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), *args_of_rank(rank)],
            env=dict(env, RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        ended = [p.communicate(timeout=120) for p in ranks]
    finally:
        for p in ranks:  # a rank left waiting in a collective when the other failed
            p.kill()
    for rank, (p, (_, err)) in enumerate(zip(ranks, ended)):
        assert p.returncode == 0, f"rank {rank}:\n{err}\nthe other:\n{ended[1 - rank][1]}"
    return [out for out, _ in ended]


def test_two_python_replicas_follow_rank_zeros_placements_and_end_equal(daemon, tmp_path):
    (tmp_path / "replica.py").write_text(SCRIPT)
    env = group_env()
    results = [
        out.split()
        for out in run_ranks(
            tmp_path / "replica.py", lambda rank: [str(rank), daemon.socket, str(tmp_path / f"rank{rank}.pt")], env
        )
    ]
    assert [r[:2] for r in results] == [["0", "2"], ["1", "2"]]
    assert results[0][2] == results[1][2], "the replicas' parameters differ"
    assert results[0][3] == results[1][3], "the ranks ran different placements"
    assert len(set(results[0][3].split(","))) >= 2, "placementd swapped placements\n" + daemon.log()
    # Averaged gradients of two half batches are the gradient of the whole batch: one process on
    # the concatenated batches ends where the group does, to rounding.
    single_env = {k: v for k, v in env.items() if k not in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    single = subprocess.run(
        [sys.executable, str(tmp_path / "replica.py"), "single", daemon.socket, str(tmp_path / "single.pt")],
        env=single_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert single.returncode == 0, single.stderr
    assert single.stdout.split()[:2] == ["0", "1"]
    for group, alone in zip(torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "single.pt")):
        torch.testing.assert_close(group, alone, rtol=1e-5, atol=1e-6)


UNUSED = r"""
import torch, placement

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(4, 4)
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.used(x)

torch.manual_seed(0)
model = Model()
job = placement.attach("py-unused", model, (torch.randn(2, 4),), use_daemon=False)
optimizer = torch.optim.AdamW(job.parameters(), lr=0.1, weight_decay=0.5)
before = model.unused.weight.detach().clone()
for step in range(5):
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(10 * step + job.stats()["rank"]))
    job.step((x,), lambda out: out.pow(2).mean(), optimizer)
print(job.stats()["world_size"], torch.equal(before, model.unused.weight.detach()))
"""


def test_a_parameter_no_rank_reached_is_left_alone_as_in_one_process(tmp_path):
    """AdamW's weight decay would move it, were its gradient made zeros: one process skips it."""
    (tmp_path / "unused.py").write_text(UNUSED)
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    ranks = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "unused.py")],
            env=dict(env, RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for p in ranks:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.split() == ["2", "True"], out


MISMATCHED = r"""
import sys, torch, placement
placement.attach("py-mismatch", torch.nn.Linear(4, 4), (torch.randn(2, 4),), use_daemon=False,
                 cuda_collectives=sys.argv[1])
"""


def test_ranks_with_other_cuda_collectives_refuse_to_start_and_say_why(tmp_path):
    """They would wait for each other in different collectives on a GPU: both fail at once."""
    (tmp_path / "mismatch.py").write_text(MISMATCHED)
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    ranks = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "mismatch.py"), choice],
            env=dict(env, RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, choice in enumerate(["auto", "gloo"])
    ]
    for rank, p in enumerate(ranks):
        _, err = p.communicate(timeout=120)
        assert p.returncode != 0
        assert f"replica group: rank {rank} has cuda_collectives {['auto', 'gloo'][rank]}" in err, err
        assert "every rank needs the same cuda_collectives" in err, err


# Rank 1's loss function raises at step 5 (the user's bug, not the placement's): every rank ends that
# step unretried and without an update, rank 1 with its own exception, rank 0 with one naming rank 1;
# the loops catch them and train on, and the group stays one (the same parameters at the end).
LOSS_BUG = r"""
import hashlib, json, sys, torch, placement
from conftest import Mlp, batch
torch.manual_seed(0)
model = Mlp()
job = placement.attach("py-loss-bug", model, (batch(0)[0][:4],), devices=["cpu:0", "cpu:1"], socket=sys.argv[1])
optimizer = torch.optim.Adam(job.parameters(), lr=1e-2)
rank = job.stats()["rank"]
def loss(out, y, step):
    if rank == 1 and step == 5:
        raise ValueError("a bug in rank 1's loss function")
    return ((out - y) ** 2).mean()
caught = []
for step in range(20):
    x, y = batch(step)
    share = slice(rank * 4, (rank + 1) * 4)
    try:
        job.step((x[share],), lambda out, y: loss(out, y, step), optimizer, targets=y[share])
    except Exception as e:
        caught.append([step, type(e).__name__, str(e)])
stats = job.stats()
job.detach()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(json.dumps({"rank": rank, "caught": caught, "steps": stats["steps"], "retried": stats["retried_steps"],
                  "digest": digest}))
"""


def test_a_loss_function_that_fails_on_one_rank_ends_that_step_on_every_rank_unretried(daemon, tmp_path):
    (tmp_path / "loss_bug.py").write_text(LOSS_BUG)
    results = [
        json.loads(out.strip().splitlines()[-1])
        for out in run_ranks(tmp_path / "loss_bug.py", lambda rank: [daemon.socket], group_env())
    ]
    assert results[1]["caught"] == [[5, "ValueError", "a bug in rank 1's loss function"]]
    assert results[0]["caught"] == [[5, "RuntimeError", "the loss function failed on rank 1"]]
    for r in results:
        assert r["retried"] == 0, r  # not the placement's failure: nothing retried
    assert results[0]["digest"] == results[1]["digest"], "the ranks parted after the failed step"
    # placementd counted no failing step against its placements.
    jobs = json.loads(
        subprocess.run(
            [os.environ["PLACEMENTCTL_BIN"], "jobs", "--finished", "--json", "--socket", daemon.socket],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert [j["failed_steps"] for j in jobs] == [0, 0], jobs


# Rank 1's Adam runs out of memory after updating, under placementd's placements with the last op
# on cpu:1: both ranks undo their update (rank 0's succeeded) and retry the step on the last good
# placement, and the group trains as one that never tried those placements.
STEPS = 300
UPDATE_FAILS = r"""
STEPS = 300
import json, sys, time, torch, placement
from conftest import Mlp, batch
torch.manual_seed(0)
model = Mlp()
job = placement.attach("py-update-fails", model, (batch(0)[0][:4],), devices=["cpu:0", "cpu:1"],
                       socket=sys.argv[1], reconnect_interval_ms=100)
rank = job.stats()["rank"]
class FullDeviceAdam(torch.optim.Adam):
    failures = 0
    def step(self, closure=None):
        loss = super().step(closure)
        if rank == 1 and job.stats()["placement_id"] != 0 and job.placement[-1] == 1:
            FullDeviceAdam.failures += 1
            raise torch.OutOfMemoryError("injected: no room on rank 1")
        return loss
optimizer = FullDeviceAdam(job.parameters(), lr=1e-2)
def loss(out, y):
    time.sleep(0.005)  # a few milliseconds a step, as real models take: time for placementd's answers
    return ((out - y) ** 2).mean()
for step in range(STEPS):
    x, y = batch(step)
    share = slice(rank * 4, (rank + 1) * 4)
    job.step((x[share],), loss, optimizer, targets=y[share])
stats = job.stats()
job.detach()
torch.save([p.detach() for p in model.parameters()], sys.argv[2])
print(json.dumps({"rank": rank, "failures": FullDeviceAdam.failures, "steps": stats["steps"],
                  "retried": stats["retried_steps"], "undone": stats["undone_updates"]}))
"""


def test_an_update_that_fails_on_one_rank_is_undone_on_every_rank_and_retried(daemon, tmp_path):
    (tmp_path / "update_fails.py").write_text(UPDATE_FAILS)
    results = [
        json.loads(out.strip().splitlines()[-1])
        for out in run_ranks(
            tmp_path / "update_fails.py", lambda rank: [daemon.socket, str(tmp_path / f"rank{rank}.pt")], group_env()
        )
    ]
    assert results[1]["failures"] > 0, "no candidate put the last op on cpu:1\n" + daemon.log()
    assert results[0]["failures"] == 0
    for r in results:
        assert r["steps"] == STEPS, r
        assert r["undone"] == results[1]["failures"], r  # rank 0 undid its own, successful update
        assert r["retried"] == r["undone"], r
    # What the group trains without failures, in one process: each step the mean of the two half
    # batches' gradients (c10d sums them and scales by 1/2), then Adam.
    torch.manual_seed(0)
    model = Mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(STEPS):
        x, y = batch(step)
        halves = []
        for share in (slice(0, 4), slice(4, 8)):
            loss = ((model(x[share]) - y[share]) ** 2).mean()
            halves.append(torch.autograd.grad(loss, list(model.parameters())))
        for p, g0, g1 in zip(model.parameters(), *halves):
            p.grad = (g0 + g1) * 0.5
        optimizer.step()
        optimizer.zero_grad()
    for rank in range(2):
        for group, alone in zip(torch.load(tmp_path / f"rank{rank}.pt"), model.parameters()):
            assert torch.equal(group, alone.detach()), f"rank {rank}"
