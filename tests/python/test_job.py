"""The Python SDK against a real placementd on two logical CPU devices: training is bitwise what it
is without placementd, swaps move Adam's state with the parameters, a failing loss function or a
dead daemon costs the job nothing."""

import io
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import torch

import placement
from conftest import Daemon, Mlp, batch, mse_to

DEVICES = ["cpu:0", "cpu:1"]


def start(name, socket=None, use_daemon=True, **options):
    torch.manual_seed(0)
    model = Mlp()
    job = placement.attach(
        name,
        model,
        (batch(0)[0],),
        devices=DEVICES,
        socket=socket,
        use_daemon=use_daemon,
        reconnect_interval_ms=100,
        **options,
    )
    return model, job, torch.optim.Adam(job.parameters(), lr=1e-2)


def plain_losses(steps, skip=(), foreach=None):
    """The same loop in plain PyTorch, no placement at all."""
    torch.manual_seed(0)
    model = Mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=foreach)
    losses = []
    for i in range(steps):
        x, y = batch(i)
        if i in skip:
            continue
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def train_until_swapped(job, optimizer, swaps, min_steps=60, seconds=30):
    """Trains until the job has swapped placements `swaps` times (placementd answers while the job
    trains; this model's steps are far shorter than a policy step, so the bound is time)."""
    losses = []
    deadline = time.monotonic() + seconds
    while len(losses) < min_steps or (job.stats()["swaps"] < swaps and time.monotonic() < deadline):
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    return losses


def test_training_with_placementd_swapping_is_bitwise_training_without_it(daemon):
    model, job, optimizer = start("py-bitwise", daemon.socket)
    assert [p is q for p, q in zip(job.parameters(), model.parameters())] == [True] * 6, (
        "the job trains the module's own parameter tensors"
    )
    losses = train_until_swapped(job, optimizer, swaps=3)
    stats = job.stats()
    summary = job.summary()
    job.detach()
    assert stats["swaps"] >= 3, daemon.log()
    assert summary["daemon"]["connected"] and summary["daemon"]["attaches"] == 1
    reference, parameters = plain_losses(len(losses))
    assert losses == reference  # bit for bit: float equality, no tolerance
    for p, q in zip(model.parameters(), parameters):
        assert torch.equal(p.detach(), q)
    saved = io.BytesIO()
    torch.save(model.state_dict(), saved)  # the module's own state, wherever placementd put it
    saved.seek(0)
    for (name, value), p in zip(torch.load(saved).items(), model.parameters()):
        assert torch.equal(value, p.detach()), name


def test_the_summary_says_what_the_job_got_and_a_short_job_hears_so_at_attach(daemon):
    # The fixture's exploration needs 13 placements x 4 steps: 40 expected steps cannot see it end.
    with pytest.warns(UserWarning, match="at least 52 steps .* expects 40: .* ends while exploring"):
        _, job, optimizer = start("py-summary", daemon.socket, expected_steps=40)
    started = time.monotonic()
    losses = train_until_swapped(job, optimizer, swaps=2, min_steps=40)
    wall = time.monotonic() - started
    during = job.summary()
    view = during["placementd"]
    assert view is not None, during["placementd_error"]
    assert during["notices"] and "ends while exploring" in during["notices"][0]
    assert 0 < view["steps"] <= len(losses)  # reports go up in the background
    assert 0 < view["job_s"] <= wall
    batches = view["steps"] - view["failed_steps"]
    assert view["realized_speedup"] == pytest.approx(view["start_mean_step_time_s"] * batches / view["job_s"])
    # Its interval needs six measured steps of the start: two come from profiling (3 steps, 1 of
    # warm-up), the rest only from trials against the start, which the candidates' times decide.
    if view["realized_speedup_interval"] is not None:
        low, high = view["realized_speedup_interval"]
        assert low <= view["realized_speedup"] <= high
    text = str(during)
    for label in ("realized speed-up", "best vs start", "time off the best", "placement in force", "exploration"):
        assert f"\n{label} " in text, text
    job.detach()
    after = job.summary()
    assert after["placementd"]["state"] == "detached", after["placementd_error"]
    assert after["daemon"]["detached"] is not None
    ended = "finished after" if after["placementd"]["exploration_finished"] else "unfinished when the job detached"
    assert ended in str(after), str(after)


def test_the_summary_of_a_job_without_placementd_says_why_it_has_no_view():
    _, job, optimizer = start("py-alone", use_daemon=False)
    x, y = batch(0)
    job.step((x,), mse_to(y), optimizer)
    summary = job.summary()
    assert summary["placementd"] is None and summary["placementd_error"]
    assert "placementd" in str(summary) and "no view of the job" in str(summary)


def test_a_swap_moves_adams_state_with_its_parameters(daemon):
    model, job, optimizer = start("py-adam", daemon.socket)
    x, y = batch(0)
    job.step((x,), mse_to(y), optimizer)
    before = {n: optimizer.state[p]["exp_avg"] for n, p in model.named_parameters()}
    steps_before = {n: optimizer.state[p]["step"] for n, p in model.named_parameters()}
    train_until_swapped(job, optimizer, swaps=3)
    job.detach()
    assert job.stats()["swaps"] >= 3, daemon.log()
    moved = [n for n, p in model.named_parameters() if optimizer.state[p]["exp_avg"] is not before[n]]
    assert moved, f"no state tensor was replaced by a copy over {job.stats()['swaps']} swaps"
    for n, p in model.named_parameters():
        state = optimizer.state[p]
        assert state["exp_avg"].device == p.device and state["exp_avg_sq"].device == p.device
        assert state["step"] is steps_before[n] or state["step"].device.type == "cpu", "the step count stays on the CPU"
    assert job.stats()["migrated_bytes"] > 0


def test_targets_reach_the_loss_function_on_the_device_of_the_output(daemon):
    _, job, optimizer = start("py-targets", daemon.socket)
    devices = []

    def loss(out, y, weight):
        devices.extend((y.device, weight.device, out.device))
        return ((out - y) ** 2 * weight).mean()  # weight 1: the same loss, bit for bit

    losses = []
    deadline = time.monotonic() + 30
    while len(losses) < 60 or (job.stats()["swaps"] < 2 and time.monotonic() < deadline):
        x, y = batch(len(losses))
        losses.append(job.step((x,), loss, optimizer, targets=(y, torch.ones(8, 4))).item())
    job.detach()
    assert job.stats()["swaps"] >= 2, daemon.log()
    assert len(set(devices)) == 1  # logical CPU devices are one physical device; a GPU run checks cuda
    assert losses == plain_losses(len(losses))[0]


def test_a_loss_function_that_raises_reaches_the_caller_and_the_job_trains_on(daemon):
    """Under placementd's placements. Ctrl-C's KeyboardInterrupt ends the step at once: the loss
    function is called once and nothing is retried or blamed on the placement. So does the loss
    function's own bug: the outputs it gets are where the job's own placement puts them (one
    physical CPU), so the same call fails there too. (A full device is the placement's: the test
    below.) Either way the job trains on and the failed step changes nothing."""
    _, job, optimizer = start("py-raise", daemon.socket)
    losses, skipped, calls = [], set(), {}
    deadline = time.monotonic() + 30
    raising = [KeyboardInterrupt(), ValueError("the loss function's own bug")]
    i = 0
    while len(losses) < 60 or (raising and time.monotonic() < deadline):
        x, y = batch(i)
        if raising and i >= 10 and job.stats()["placement_id"] != 0:
            error = raising.pop(0)

            def broken(out):
                calls[type(error)] = calls.get(type(error), 0) + 1
                raise error

            before = job.stats()["retried_steps"]
            with pytest.raises(type(error)):
                job.step((x,), broken, optimizer)
            retried = job.stats()["retried_steps"] - before
            assert retried == calls[type(error)] - 1, "one retry a call after the first"
            skipped.add(i)
        else:
            losses.append(job.step((x,), mse_to(y), optimizer).item())
        i += 1
    view = job.summary()["placementd"]
    job.detach()
    assert not raising, f"placementd's placements never came: {daemon.log()}"
    assert calls[KeyboardInterrupt] == 1, "an interrupt is not retried"
    assert calls[ValueError] == 1, "the user's own error is not retried"
    assert view["failed_steps"] == 0, "nothing was blamed on placementd's placements"
    reference, _ = plain_losses(i, skip=skipped)
    assert losses == reference, "the failed steps changed nothing: no update, no lost state"


class NormedMlp(torch.nn.Module):
    """Batch norm's running statistics and dropout's masks: what a step changes besides parameters."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.norm = torch.nn.BatchNorm1d(64)
        self.drop = torch.nn.Dropout(0.3)
        self.c = torch.nn.Linear(64, 4)

    def forward(self, x):
        return self.c(self.drop(torch.relu(self.norm(self.a(x)))))


def test_a_step_retried_after_a_candidate_runs_out_of_memory_changes_buffers_and_dropout_once(daemon):
    torch.manual_seed(0)
    model = NormedMlp()
    job = placement.attach(
        "py-retry", model, (batch(0)[0],), devices=DEVICES, socket=daemon.socket, reconnect_interval_ms=100
    )
    optimizer = torch.optim.Adam(job.parameters(), lr=1e-2)

    def loss_fn(y):
        def loss(out):
            # The loss runs where the placement put the model's last op: cpu:1 is "full".
            if job.stats()["placement_id"] != 0 and job.placement[-1] == 1:
                raise torch.OutOfMemoryError("injected: cpu:1 is full")
            return ((out - y) ** 2).mean()

        return loss

    torch.manual_seed(1)  # dropout's masks from here on
    losses = []
    deadline = time.monotonic() + 30
    while len(losses) < 40 or (job.stats()["retried_steps"] == 0 and time.monotonic() < deadline):
        x, y = batch(len(losses))
        losses.append(job.step((x,), loss_fn(y), optimizer).item())
    stats = job.stats()
    job.detach()
    assert stats["retried_steps"] > 0, f"no candidate put the last op on cpu:1: {daemon.log()}"
    assert stats["steps"] == len(losses)

    torch.manual_seed(0)
    plain = NormedMlp()
    plain_optimizer = torch.optim.Adam(plain.parameters(), lr=1e-2)
    torch.manual_seed(1)
    reference = []
    for i in range(len(losses)):
        x, y = batch(i)
        loss = ((plain(x) - y) ** 2).mean()
        loss.backward()
        plain_optimizer.step()
        plain_optimizer.zero_grad()
        reference.append(loss.item())
    assert losses == reference
    for (name, p), q in zip(model.named_parameters(), plain.parameters()):
        assert torch.equal(p.detach(), q.detach()), name
    for (name, b), c in zip(model.named_buffers(), plain.buffers()):
        assert torch.equal(b, c), f"{name}: {b} vs {c}"  # num_batches_tracked counts each batch once


def test_an_update_that_fails_under_a_candidate_is_undone_and_each_batch_trains_once(daemon):
    """A foreach Adam that runs out of memory after updating (values, moments, `step` tensors and
    the state a first step creates all changed) under placementd's placements with the last op on
    cpu:1: the update is undone and the step runs again on the last good placement, so training
    is bit for bit a plain loop's."""
    model, job, _ = start("py-update", daemon.socket)

    class FullDeviceAdam(torch.optim.Adam):
        failures = 0

        def step(self, closure=None):
            loss = super().step(closure)
            if job.stats()["placement_id"] != 0 and job.placement[-1] == 1:
                FullDeviceAdam.failures += 1
                raise torch.OutOfMemoryError("injected: no room for Adam's temporaries")
            return loss

    optimizer = FullDeviceAdam(job.parameters(), lr=1e-2, foreach=True)
    losses = []
    deadline = time.monotonic() + 30
    while len(losses) < 60 or (FullDeviceAdam.failures == 0 and time.monotonic() < deadline):
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    stats = job.stats()
    job.detach()
    assert FullDeviceAdam.failures > 0, f"no candidate put the last op on cpu:1: {daemon.log()}"
    assert stats["undone_updates"] == FullDeviceAdam.failures
    assert stats["retried_steps"] == stats["undone_updates"]
    assert stats["guarded_updates"] >= stats["undone_updates"]
    assert stats["steps"] == len(losses)
    reference, parameters = plain_losses(len(losses), foreach=True)
    assert losses == reference
    for p, q in zip(model.parameters(), parameters):
        assert torch.equal(p.detach(), q)


def test_an_update_during_the_backward_that_fails_under_a_candidate_is_undone_and_each_batch_trains_once(
    daemon, monkeypatch
):
    """Every parameter lives on cpu:0: under placementd's candidates that run ops on cpu:1, those
    ops read it through a copy there and it is updated on cpu:0 while the backward goes on, in
    batches saved first. Every other such batch runs out of memory after updating: every batch of
    that step is put back and the step runs again on the last good placement, so training is bit
    for bit a plain loop's."""
    model, job, optimizer = start(
        "py-overlap", daemon.socket, profile_steps=0, residence={"parameters": {"": ("cpu:0", "stream")}}
    )
    step_parameters = placement._optimizers._TorchOptim.step_parameters
    calls = []

    def half_fail(opt, parameters):
        step_parameters(opt, parameters)
        calls.append(len(parameters))
        if len(calls) % 2 == 0:
            raise torch.OutOfMemoryError("injected: no room on the host")

    monkeypatch.setattr(placement._optimizers._TorchOptim, "step_parameters", staticmethod(half_fail))
    losses = []
    deadline = time.monotonic() + 30
    while len(losses) < 60 or (len(calls) < 2 and time.monotonic() < deadline):
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    stats = job.stats()
    job.detach()
    failures = len(calls) // 2
    assert failures > 0, f"no candidate ran an op on cpu:1: {daemon.log()}"
    assert stats["undone_updates"] >= failures  # a failed step's own batch, and those before it
    assert stats["retried_steps"] >= failures
    assert stats["steps"] == len(losses)
    reference, parameters = plain_losses(len(losses))
    assert losses == reference
    for p, q in zip(model.parameters(), parameters):
        assert torch.equal(p.detach(), q)


def test_the_job_trains_on_when_placementd_is_killed_and_attaches_again_when_it_is_back(daemon):
    _, job, optimizer = start("py-kill", daemon.socket)
    losses = train_until_swapped(job, optimizer, swaps=1)
    daemon.kill()
    started = time.monotonic()
    for _ in range(200):
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    assert time.monotonic() - started < 20, "steps waited for the dead daemon"
    deadline = time.monotonic() + 10  # the job's connection thread notices the closed socket
    while job.daemon()["connected"] and time.monotonic() < deadline:
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    assert not job.daemon()["connected"]
    daemon.start()
    deadline = time.monotonic() + 30
    while job.daemon()["attaches"] < 2 and time.monotonic() < deadline:
        x, y = batch(len(losses))
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    assert job.daemon()["attaches"] == 2, daemon.log()
    job.detach()
    reference, _ = plain_losses(len(losses))
    assert losses == reference


def test_without_placementd_the_job_is_the_plain_loop():
    model, job, optimizer = start("py-alone", use_daemon=False)
    losses = []
    for i in range(50):
        x, y = batch(i)
        losses.append(job.step((x,), mse_to(y), optimizer).item())
    reference, parameters = plain_losses(50)
    assert losses == reference
    assert all(torch.equal(p.detach(), q) for p, q in zip(model.parameters(), parameters))
    assert job.stats()["reason"] == "own" and job.stats()["swaps"] == 0


def test_bad_arguments_are_python_errors_that_say_what_is_wrong():
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        placement.attach("bad", object(), (torch.zeros(1),), use_daemon=False)
    model, job, optimizer = start("py-bad", use_daemon=False)
    with pytest.raises(TypeError, match=r"inputs\[0\] is a str, not a torch.Tensor"):
        job.step(("text",), mse_to(torch.zeros(8, 4)), optimizer)
    with pytest.raises(TypeError, match="the loss function returned a float"):
        job.step((batch(0)[0],), lambda out: 1.0, optimizer)
    with pytest.raises(ValueError, match="cuda:7|device"):
        placement.attach("bad-device", Mlp(), (batch(0)[0],), devices=["cuda:7"], use_daemon=False)
    with pytest.raises(ValueError, match="cuda_collectives is 'auto', 'nccl' or 'gloo', not 'mpi'"):
        placement.attach("bad-collectives", Mlp(), (batch(0)[0],), cuda_collectives="mpi", use_daemon=False)


def test_capture_returns_the_graph_placementctl_reads(tmp_path):
    path = tmp_path / "mlp.graph.json"
    graph = placement.capture(Mlp(), (batch(0)[0],), name="mlp", path=str(path))
    assert graph["name"] == "mlp"
    kinds = [op["kind"] for op in graph["ops"]]
    assert kinds.count("aten::linear") == 3, kinds
    assert path.read_text().startswith("{")


def test_an_import_beside_another_torch_release_says_what_to_rebuild():
    # `pip install -U torch` under an installed placement: its extension, compiled against the torch
    # it was built with, failed to load with an undefined symbol that named neither.
    from placement._build_info import TORCH_VERSION

    code = "import torch; torch.__version__ = '2.99.0'; import placement"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert f"placement was built against torch {TORCH_VERSION}, and this environment has torch 2.99.0" in result.stderr
    assert "pip install --no-build-isolation --force-reinstall --no-deps" in result.stderr
    # A build of the same release (another patch, another CUDA) imports.
    release = ".".join(TORCH_VERSION.split(".")[:2])
    same = f"import torch; torch.__version__ = '{release}.7+cu999'; import placement"
    assert subprocess.run([sys.executable, "-c", same], capture_output=True, text=True).returncode == 0


def test_the_pinned_pool_takes_placementds_budget_and_a_job_may_only_lower_it():
    with tempfile.TemporaryDirectory(prefix="pdpy.", dir="/tmp") as directory:
        d = Daemon(directory)
        with open(d.config, "a") as f:
            f.write("[memory]\nhost_pinned_bytes = 33554432\n")
        d.start()
        try:
            for asked, budget in ((0, 32 << 20), (8 << 20, 8 << 20), (64 << 20, 32 << 20)):
                model = Mlp()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                job = placement.attach(f"pinned-{asked}", model, batch(0)[0], socket=d.socket, host_pinned_bytes=asked)
                x, y = batch(1)
                job.step(x, mse_to(y), optimizer)
                stats = job.stats()
                job.detach()
                assert stats["pinned_limit_bytes"] == budget, (asked, stats)
                assert stats["pinned_bytes"] <= budget and stats["pinned_refusals"] == 0
        finally:
            d.kill(signal.SIGTERM)
    # Without placementd: the job's own figure, else a quarter of the machine's memory.
    alone = placement.attach("pinned-alone", Mlp(), batch(0)[0], use_daemon=False, host_pinned_bytes=5 << 20)
    assert alone.stats()["pinned_limit_bytes"] == 5 << 20
    alone = placement.attach("pinned-default", Mlp(), batch(0)[0], use_daemon=False)
    assert alone.stats()["pinned_limit_bytes"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    with pytest.raises(ValueError, match="host_pinned_bytes must be >= 0"):
        placement.attach("pinned-negative", Mlp(), batch(0)[0], use_daemon=False, host_pinned_bytes=-1)
