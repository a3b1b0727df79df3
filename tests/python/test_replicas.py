"""A Python training loop under torchrun's environment trains as a data-parallel replica (the C++
job API's replica group, Gloo on 127.0.0.1): both ranks run placementd's placements at the same
steps and end with the same parameters."""

import os
import socket
import subprocess
import sys

SCRIPT = r"""
import hashlib, sys, torch, placement
from conftest import Mlp, batch
torch.manual_seed(int(sys.argv[1]))  # each rank its own initial weights: rank 0's must win
model = Mlp()
job = placement.attach("py-replicas", model, (batch(0)[0],), devices=["cpu:0", "cpu:1"], socket=sys.argv[2])
optimizer = torch.optim.Adam(job.parameters(), lr=1e-2)
rank, world = job.stats()["rank"], job.stats()["world_size"]
placements = []
for step in range(80):
    x, y = batch(step * world + rank)
    job.step((x,), lambda out, y: ((out - y) ** 2).mean(), optimizer, targets=y)
    placements.append(job.stats()["placement_id"])
job.detach()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(rank, world, digest, ",".join(map(str, placements)))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_python_replicas_follow_rank_zeros_placements_and_end_equal(daemon, tmp_path):
    (tmp_path / "replica.py").write_text(SCRIPT)
    port = free_port()
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ["PYTHONPATH"]]))
    ranks = [subprocess.Popen([sys.executable, str(tmp_path / "replica.py"), str(rank), daemon.socket],
                              env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(2)]
    results = []
    for p in ranks:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(out.split())
    assert [r[:2] for r in results] == [["0", "2"], ["1", "2"]]
    assert results[0][2] == results[1][2], "the replicas' parameters differ"
    assert results[0][3] == results[1][3], "the ranks ran different placements"
    assert len(set(results[0][3].split(","))) >= 2, "placementd swapped placements\n" + daemon.log()
