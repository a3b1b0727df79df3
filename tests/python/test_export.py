"""The Python SDK's default front end, torch.export: stock models in train mode (dropout on, batch
norm updating) attached to a real placementd on two logical CPU devices train bit for bit as
plain eager PyTorch does while placementd swaps their placements; a short last batch runs; the
outputs come back in the model's own structure; no DeprecationWarning."""

import warnings

import pytest
import torch

import placement

DEVICES = ["cpu:0", "cpu:1"]


def gpt2():
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return transformers.GPT2LMHeadModel(config)


def resnet18():
    import torchvision

    return torchvision.models.resnet18(weights=None, num_classes=10)


def tokens(step, batch_size=4):
    g = torch.Generator().manual_seed(2000 + step)
    return torch.randint(0, 128, (batch_size, 16), generator=g)


def images(step, batch_size=4):
    g = torch.Generator().manual_seed(3000 + step)
    return torch.randn(batch_size, 3, 32, 32, generator=g)


MODELS = {
    # name: (constructor, batch of a step, loss of the model's own output structure)
    "gpt2": (gpt2, tokens, lambda out: out.logits.float().pow(2).mean()),
    "resnet18": (resnet18, images, lambda out: out.pow(2).mean()),
}


def plain(name, steps, last):
    build, data, loss_of = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.manual_seed(1)
    losses = []
    for step in range(steps):
        x = data(step, 3 if step == last else 4)
        loss = loss_of(model(x))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize("name", list(MODELS))
def test_stock_models_train_bitwise_as_eager_pytorch_while_placementd_swaps(daemon, name):
    build, data, loss_of = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        job = placement.attach(f"py-export-{name}", model, (data(0),), devices=DEVICES, socket=daemon.socket,
                               reconnect_interval_ms=100)
    assert [p is q for p, q in zip(job.parameters(), model.parameters())] == [True] * len(list(model.parameters()))
    optimizer = torch.optim.Adam(job.parameters(), lr=1e-3)
    torch.manual_seed(1)
    losses, steps = [], 60
    while len(losses) < steps or (job.stats()["swaps"] < 2 and len(losses) < 400):
        step = len(losses)
        losses.append(job.step((data(step),), loss_of, optimizer).item())
    last = len(losses)
    losses.append(job.step((data(last, 3),), loss_of, optimizer).item())  # a short last batch
    stats = job.stats()
    job.detach()
    assert stats["swaps"] >= 2, daemon.log()
    reference, eager = plain(name, len(losses), last)
    assert losses == reference  # bit for bit
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        assert torch.equal(p.detach(), q.detach()), n
    for (n, b), c in zip(model.named_buffers(), eager.buffers()):
        assert torch.equal(b, c), n  # batch norm's statistics and num_batches_tracked


def test_outputs_keep_the_models_structure_and_kwargs_are_taken():
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 4)
            self.b = torch.nn.Linear(8, 2)

        def forward(self, x, *, scale, double=False):
            return {"a": self.a(x) * scale * (2 if double else 1), "rest": (self.b(x) / x.shape[0],)}

    torch.manual_seed(0)
    model = Pair()
    x = torch.randn(5, 8)
    job = placement.attach("py-structure", model, (x,), example_kwargs={"scale": torch.tensor(2.0), "double": True},
                           devices=DEVICES, use_daemon=False)
    seen = []

    def loss(out):
        seen.append(out)
        return out["a"].sum() + out["rest"][0].sum()

    optimizer = torch.optim.SGD(job.parameters(), lr=0.1)
    torch.manual_seed(0)
    plain = Pair()
    expected = plain(x, scale=torch.tensor(2.0), double=True)
    job.step((x,), loss, optimizer, kwargs={"scale": torch.tensor(2.0), "double": True})
    out = seen[0]
    assert set(out) == {"a", "rest"} and isinstance(out["rest"], tuple)
    # A symbolic size divides as a Python number would (a wrapped number), a flag stays exported.
    assert torch.equal(out["a"], expected["a"]) and torch.equal(out["rest"][0], expected["rest"][0])
    job.step((x[:3],), loss, optimizer, kwargs={"scale": torch.tensor(2.0), "double": True})
    assert seen[1]["a"].shape == (3, 4)
    with pytest.raises(ValueError, match="exported with True"):
        job.step((x,), loss, optimizer, kwargs={"scale": torch.tensor(2.0), "double": False})


def test_a_model_export_cannot_take_is_a_capture_error_that_says_what_to_do():
    class DataDependent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:  # Python control flow on a tensor's value
                return self.linear(x)
            return x

    with pytest.raises(placement.CaptureError, match="cannot export DataDependent.*frontend='torchscript'"):
        placement.attach("py-refused", DataDependent(), (torch.randn(2, 4),), devices=DEVICES, use_daemon=False)


def test_the_torchscript_front_end_is_kept():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    job = placement.attach("py-ts", model, (torch.randn(2, 4),), devices=DEVICES, use_daemon=False,
                           frontend="torchscript")
    assert isinstance(job.module, torch.jit.ScriptModule)
    with pytest.raises(ValueError, match="frontend is 'export' or 'torchscript'"):
        placement.attach("py-bad", model, (torch.randn(2, 4),), use_daemon=False, frontend="onnx")


def test_torch_cond_is_refused_not_run_wrongly():
    class WithCond(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: self.linear(t), lambda t: t.clone(), (x,))

    with pytest.raises(placement.CaptureError, match="cond.*control flow cannot be placed op by op"):
        placement.attach("py-cond", WithCond(), (torch.randn(2, 4),), devices=DEVICES, use_daemon=False)
