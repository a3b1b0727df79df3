"""Residence from Python: a model whose training state (parameters, gradients, Adam's two moments)
is more than its compute device may hold trains there, bit for bit as plain eager PyTorch trains it
(losses, parameters, buffers and Adam's state; dropout on, batch norm updating), under each plan of
where its tensors live. Two logical CPU devices: cpu:0 runs every op, with a memory limit below the
model's parameters + gradients + Adam state, and cpu:1 is the host."""

import os
import sys

import pytest
import torch

import placement

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_models  # noqa: E402

STEPS = 4
# One sequence of 16 tokens: at these small configs the activations of a longer batch would
# outweigh the weights, as they do not in the models this is for.
MODELS = {
    "hf_gpt2": (make_models.MODELS["hf_gpt2"][0], [[1, 16]], "int64"),
    "hf_bert": (make_models.MODELS["hf_bert"][0], [[1, 16]], "int64"),
    "hf_llama": (make_models.MODELS["hf_llama"][0], [[1, 16]], "int64"),
    "resnet18": (make_models.MODELS["resnet18"][0], [[2, 3, 32, 32]], "float32"),
}
# The modules whose children are the blocks a recompute checkpoints one by one.
STACKS = {
    "hf_gpt2": ["transformer.h"],
    "hf_bert": ["bert.encoder.layer"],
    "hf_llama": ["model.layers"],
    "resnet18": ["layer1", "layer2", "layer3", "layer4"],
}
# transformers' Llama exports a graph that PyTorch itself trains 1-2 ulp away from the eager
# module after a dozen steps (test_export.py): its reference is that graph run by PyTorch.
EXPORTED_REFERENCE = {"hf_llama"}


def batch(name, step):
    _, shapes, dtype = MODELS[name]
    g = torch.Generator().manual_seed(3000 + step)
    if dtype == "int64":
        return tuple(torch.randint(0, 100, shape, generator=g) for shape in shapes)
    return tuple(torch.randn(shape, generator=g) for shape in shapes)


def loss_of(outputs):
    leaves = outputs.values() if isinstance(outputs, dict) else (outputs if isinstance(outputs, tuple) else (outputs,))
    terms = [t.float().pow(2).mean() for t in leaves if torch.is_tensor(t) and t.is_floating_point()]
    return sum(terms[1:], terms[0])


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]().train()


def batch_norms(model):
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


def plans(name, model):
    """The residence plans the engine issue names, as attach() takes them. Each leaves the compute
    device less than the model's training state: what does not live on the host streams there, and
    the activation plans keep Adam's state on the host too."""
    names = [n for n, _ in model.named_parameters()]
    keep_batch_norms = {n: "keep" for n in batch_norms(model)}  # their statistics move on: never rerun
    checkpointed = {f"{stack}.*": "recompute" for stack in STACKS[name]}  # each block on its own
    on_host = {"": ("cpu:1", "persist")}
    return {
        "all_homed_away": {"parameters": {"": ("cpu:1", "stream")}},
        "optimizer_only": {"parameters": on_host},
        "half_the_layers": {"parameters": {n: ("cpu:1", "stream") for n in names[: len(names) // 2]}},
        "activations_offloaded": {"parameters": on_host, "activations": {"": ("offload", "cpu:1")}},
        "activations_recomputed": {"parameters": on_host, "activations": {**checkpointed, **keep_batch_norms}},
    }


def state_bytes(model):
    """Parameters, gradients and Adam's two moments."""
    return 4 * sum(p.numel() * p.element_size() for p in model.parameters())


def adam(parameters):
    return torch.optim.Adam(parameters, lr=1e-3)


def eager(name, steps, make_optimizer=adam):
    model = build(name)
    if name in EXPORTED_REFERENCE:
        example = batch(name, 0)
        dynamic = tuple({0: torch.export.Dim.AUTO} for _ in example)
        model = torch.export.export(model, example, strict=False, dynamic_shapes=dynamic).module()
    optimizer = make_optimizer(list(model.parameters()))
    torch.manual_seed(1)
    losses = []
    for step in range(steps):
        loss = loss_of(model(*batch(name, step)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, model, optimizer


_EAGER = {}


def eager_once(name):
    if name not in _EAGER:
        _EAGER[name] = eager(name, STEPS)
    return _EAGER[name]


@pytest.mark.parametrize("name", list(MODELS))
def test_each_plan_trains_bitwise_as_eager_pytorch_within_a_limit_the_model_does_not_fit(name):
    torch.set_num_threads(1)
    reference_losses, reference, reference_optimizer = eager_once(name)
    limit = state_bytes(reference) - 1
    for plan, residence in plans(name, build(name)).items():
        model = build(name)
        job = placement.attach(
            f"residence-{name}",
            model,
            batch(name, 0),
            devices=["cpu:0", "cpu:1"],
            use_daemon=False,
            memory_limit_bytes=[limit, 0],
            residence=residence,
        )
        optimizer = torch.optim.Adam(job.parameters(), lr=1e-3)
        torch.manual_seed(1)
        losses, peak = [], 0
        for step in range(STEPS):
            losses.append(job.step(batch(name, step), loss_of, optimizer).item())
            peak = max(peak, job.stats()["peak_bytes"][0])
        where = f"{name} under {plan}"
        assert losses == reference_losses, where  # bit for bit
        for (n, p), q in zip(model.named_parameters(), reference.parameters()):
            assert torch.equal(p.detach(), q.detach()), f"{where}: parameter {n}"
        for (n, b), c in zip(model.named_buffers(), reference.buffers()):
            assert torch.equal(b, c), f"{where}: buffer {n}"
        for p, q in zip(job.parameters(), reference.parameters()):
            mine, theirs = optimizer.state[p], reference_optimizer.state[q]
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(mine[key], theirs[key]), f"{where}: Adam's {key}"
        assert 0 < peak <= limit, f"{where}: cpu:0 held {peak} bytes at its peak, limit {limit}"
        activity = job.residence_activity()
        if "activations" in residence:
            assert activity["activations_evicted"] > 0, where
        else:
            assert activity["proxies"] > 0, where
        # What lives on the host was updated there while the backward went on.
        assert job.stats()["overlapped_updates"] > 0, where


class _MyAdam(torch.optim.Adam):
    """A subclass: job.step cannot know its step() updates each parameter alone."""


@pytest.mark.parametrize(
    "make, overlapped",
    [
        (lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, fused=True), True),
        (lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True), True),
        (
            lambda ps: torch.optim.RMSprop(
                [{"params": ps[:3], "lr": 1e-4}, {"params": ps[3:]}], lr=1e-3, momentum=0.5, centered=True
            ),
            True,
        ),
        (lambda ps: _MyAdam(ps, lr=1e-3), False),
    ],
    ids=["adamw-fused", "sgd-nesterov", "rmsprop-two-groups", "adam-subclass"],
)
def test_the_update_of_what_lives_on_the_host_runs_during_the_backward_bitwise_as_one_step(make, overlapped):
    """Each parameter homed on the host is updated as soon as its gradient is there, by the
    optimizer's own class and its group's options, while the backward goes on: the training is the
    eager loop's, bit for bit, with one optimizer.step() after each backward (the fused CPU kernel
    in both where the optimizer asks for it). An optimizer job.step cannot split updates once, after
    the backward."""
    torch.set_num_threads(1)
    name = "hf_gpt2"
    reference_losses, reference, reference_optimizer = eager(name, STEPS, make)
    model = build(name)
    job = placement.attach(
        "overlapped",
        model,
        batch(name, 0),
        devices=["cpu:0", "cpu:1"],
        use_daemon=False,
        residence={"parameters": {"": ("cpu:1", "stream")}},
    )
    optimizer = make(job.parameters())
    torch.manual_seed(1)
    losses = [job.step(batch(name, step), loss_of, optimizer).item() for step in range(STEPS)]
    assert losses == reference_losses
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(p.detach(), q.detach()), f"parameter {n}"
    for p, q in zip(job.parameters(), reference.parameters()):
        mine, theirs = optimizer.state[p], reference_optimizer.state[q]
        assert mine.keys() == theirs.keys()
        for key in mine:
            assert torch.equal(torch.as_tensor(mine[key]), torch.as_tensor(theirs[key])), key
    for group, theirs in zip(optimizer.param_groups, reference_optimizer.param_groups):
        assert len(group["params"]) == len(theirs["params"]), "a group kept its parameters"
    updated = job.stats()["overlapped_updates"]
    proxies = job.residence_activity()["proxies"]
    assert updated == (STEPS * proxies if overlapped else 0)


def test_the_model_without_a_plan_does_not_fit_that_limit_and_is_refused_before_its_first_step():
    """Its parameters and gradients fit, Adam's moments would not: the first step is refused before
    it runs (nothing trained, no state made), naming the device, the state and the limit."""
    model = build("hf_gpt2")
    limit = state_bytes(model) - 1
    job = placement.attach(
        "residence-none",
        model,
        batch("hf_gpt2", 0),
        devices=["cpu:0", "cpu:1"],
        use_daemon=False,
        memory_limit_bytes=[limit, 0],
    )
    before = [p.detach().clone() for p in job.parameters()]
    optimizer = torch.optim.Adam(job.parameters(), lr=1e-3)
    adam_bytes = 2 * sum(p.numel() * p.element_size() for p in job.parameters())
    with pytest.raises(
        torch.OutOfMemoryError,
        match=rf"out of memory on cpu:0 \(its memory limit\), refused before the step ran: .*the "
        rf"optimizer's first update {adam_bytes} bytes of state.* against its limit {limit}",
    ):
        job.step(batch("hf_gpt2", 0), loss_of, optimizer)
    assert job.stats()["steps"] == 0 and not optimizer.state
    assert all(torch.equal(p, q) for p, q in zip(job.parameters(), before))


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.Adam(ps, lr=1e-3),
        lambda ps: torch.optim.Adam(ps, lr=1e-3, amsgrad=True),
        lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True),
        lambda ps: torch.optim.SGD(ps, lr=1e-3),
        lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
        lambda ps: torch.optim.Adagrad(ps, lr=1e-3),
        lambda ps: torch.optim.RMSprop(ps, lr=1e-3, momentum=0.9, centered=True),
    ],
    ids=["adam", "adam_amsgrad", "adamw_foreach", "sgd", "sgd_momentum", "adagrad", "rmsprop"],
)
def test_the_state_an_optimizer_is_expected_to_make_is_the_state_it_makes(make):
    """What a memory limit holds a placement to before the first update (placement._optimizers._expected_state_bytes)
    is, per parameter, the bytes of the tensors shaped like it that the update leaves in its state."""
    model = build("hf_gpt2")
    params = list(model.parameters())
    left_out = params.pop()
    optimizer = make(params)
    expected = [placement._optimizers._expected_state_bytes(optimizer, p) for p in params]
    assert placement._optimizers._expected_state_bytes(optimizer, left_out) == 0
    loss_of(model(*batch("hf_gpt2", 0))).backward()
    optimizer.step()
    for p, bytes_ in zip(params, expected):
        kept = sum(
            t.numel() * t.element_size()
            for t in optimizer.state.get(p, {}).values()
            if torch.is_tensor(t) and t.shape == p.shape
        )
        assert bytes_ == kept


def test_an_optimizer_of_another_class_cannot_tell_its_state():
    class Mine(torch.optim.Adam):
        pass

    model = build("hf_gpt2")
    assert placement._optimizers._expected_state_bytes(Mine(model.parameters()), next(model.parameters())) is None
    assert (
        placement._optimizers._expected_state_bytes(torch.optim.LBFGS(model.parameters()), next(model.parameters()))
        is None
    )


def test_bad_residence_rules_are_errors_that_name_the_rule():
    model = build("hf_gpt2")
    example = batch("hf_gpt2", 0)
    with pytest.raises(ValueError, match=r"residence parameters\[''\]: 'cuda:7' is not one of the job's devices"):
        placement.attach("bad", model, example, use_daemon=False, residence={"parameters": {"": "cuda:7"}})
    with pytest.raises(ValueError, match=r"fetch is 'persist' or 'stream', not 'sometimes'"):
        placement.attach(
            "bad", model, example, use_daemon=False, residence={"parameters": {"": ("cpu:1", "sometimes")}}
        )
    with pytest.raises(ValueError, match=r"residence activations\['transformer'\]: 'keep', 'recompute'"):
        placement.attach("bad", model, example, use_daemon=False, residence={"activations": {"transformer": "drop"}})
    with pytest.raises(ValueError, match="keys 'parameters' and 'activations'"):
        placement.attach("bad", model, example, use_daemon=False, residence={"params": {}})
