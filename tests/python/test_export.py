"""The Python SDK's default front end, torch.export: stock models in train mode (dropout on, batch
norm updating) attached to a real placementd on two logical CPU devices train bit for bit as
plain eager PyTorch does while placementd swaps their placements; a short last batch runs; the
outputs come back in the model's own structure; no DeprecationWarning."""

import os
import sys
import time
import warnings

import pytest
import torch
from torch.utils import _pytree as pytree

import placement

DEVICES = ["cpu:0", "cpu:1"]


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_models  # noqa: E402

# Every model issue #40 names: the project's test models, stock transformers models at small
# configs, torchvision's CNNs (GoogLeNet with its auxiliary heads: a namedtuple in train mode).
MODELS = {
    "mlp": make_models.MODELS["mlp"],
    "two_tower": make_models.MODELS["two_tower"],
    "bert_small": make_models.MODELS["bert_small"],
    "gnmt_small": make_models.MODELS["gnmt_small"],
    "hf_gpt2": make_models.MODELS["hf_gpt2"],
    "hf_bert": make_models.MODELS["hf_bert"],  # BertForMaskedLM
    "hf_llama": make_models.MODELS["hf_llama"],
    "resnet18": (make_models.MODELS["resnet18"][0], [[4, 3, 32, 32]], "float32"),
    "googlenet": (lambda: make_models.torchvision_model("googlenet", init_weights=False), [[2, 3, 64, 64]], "float32"),
    "mobilenet_v3_small": (lambda: make_models.torchvision_model("mobilenet_v3_small"), [[4, 3, 32, 32]], "float32"),
    "densenet121": (lambda: make_models.torchvision_model("densenet121"), [[4, 3, 32, 32]], "float32"),
}
# transformers' Llama exports a graph that PyTorch itself (ExportedProgram.module()) trains 1-2 ulp
# away from the eager module after a dozen steps (tests/models/export_models.py finds the same):
# its reference is that graph run by PyTorch, which is what any runtime of the export trains.
EXPORTED_REFERENCE = {"hf_llama"}


def batch(name, step, smaller=False):
    """The inputs of a step, drawn from a generator of its own; `smaller`: one example fewer."""
    _, shapes, dtype = MODELS[name]
    g = torch.Generator().manual_seed(2000 + step)
    shapes = [[shape[0] - smaller] + shape[1:] for shape in shapes]
    if dtype == "int64":
        return tuple(torch.randint(0, 100, shape, generator=g) for shape in shapes)
    return tuple(torch.randn(shape, generator=g) for shape in shapes)


def loss_of(outputs):
    """The floating outputs' t.float().pow(2).mean(), summed in the outputs' own order."""
    terms = [
        t.float().pow(2).mean() for t in pytree.tree_leaves(outputs) if torch.is_tensor(t) and t.is_floating_point()
    ]
    return sum(terms[1:], terms[0])


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]().train()


def plain(name, steps, last):
    model = build(name)
    if name in EXPORTED_REFERENCE:
        example = batch(name, 0)
        dynamic = tuple({0: torch.export.Dim.AUTO} for _ in example)  # as attach exports: the last batch is smaller
        model = torch.export.export(model, example, strict=False, dynamic_shapes=dynamic).module()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.manual_seed(1)
    losses = []
    for step in range(steps):
        loss = loss_of(model(*batch(name, step, smaller=step == last)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize("name", list(MODELS))
def test_models_train_bitwise_as_eager_pytorch_under_adam_while_placementd_swaps(daemon, name):
    torch.set_num_threads(1)  # as eager's run below: a reduction split over threads may round otherwise
    model = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        job = placement.attach(
            f"py-export-{name}", model, batch(name, 0), devices=DEVICES, socket=daemon.socket, reconnect_interval_ms=100
        )
    assert [p is q for p, q in zip(job.parameters(), model.parameters())] == [True] * len(list(model.parameters()))
    optimizer = torch.optim.Adam(job.parameters(), lr=1e-3)
    torch.manual_seed(1)
    # At least 20 steps, then on until placementd has swapped twice: bounded by time, not steps, since
    # the MLP's 400 steps can end before the daemon's second directive arrives.
    losses, steps, deadline = [], 20, time.monotonic() + 60
    while len(losses) < steps or (job.stats()["swaps"] < 2 and time.monotonic() < deadline):
        losses.append(job.step(batch(name, len(losses)), loss_of, optimizer).item())
    last = len(losses)
    losses.append(job.step(batch(name, last, smaller=True), loss_of, optimizer).item())  # a short last batch
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
    job = placement.attach(
        "py-structure",
        model,
        (x,),
        example_kwargs={"scale": torch.tensor(2.0), "double": True},
        devices=DEVICES,
        use_daemon=False,
    )
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


def test_an_attention_mask_that_masks_nothing_is_left_out():
    # transformers builds BERT's mask from aranges when export traces it (its eager forward, given
    # no attention_mask, passes none): all True, and on a GPU it keeps attention off FlashAttention.
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    model = transformers.BertForMaskedLM(config).train()
    kinds = [op["kind"] for op in placement.capture(model, (torch.randint(0, 100, (2, 16)),))["ops"]]
    assert kinds.count("aten::scaled_dot_product_attention") == 2
    assert "aten::arange" not in kinds and "aten::ge" not in kinds  # what built the mask is gone too

    class Masked(torch.nn.Module):
        def forward(self, q, scores):
            causal = torch.ones(4, 4, dtype=torch.bool).tril()  # a constant that masks something
            a = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=scores > 0)
            return a + torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=causal)

    program = torch.export.export(Masked(), (torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 4)), strict=False)
    placement._export._drop_masks_that_mask_nothing(program.graph_module)
    masks = [n.args[3] for n in program.graph.nodes if n.target is torch.ops.aten.scaled_dot_product_attention.default]
    assert len(masks) == 2 and all(isinstance(m, torch.fx.Node) for m in masks)  # an input's mask and a real one stay


def test_a_model_export_cannot_take_is_a_capture_error_that_says_what_to_do(capfd):
    class DataDependent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:  # Python control flow on a tensor's value
                return self.linear(x)
            return x

    with pytest.raises(placement.CaptureError, match="cannot export DataDependent.*frontend='torchscript'") as refused:
        placement.attach("py-refused", DataDependent(), (torch.randn(2, 4),), devices=DEVICES, use_daemon=False)
    # torch logs the graph it traced before it refuses: in the error's detail, not on the terminal.
    assert "def forward" in refused.value.detail and "aten.item" in refused.value.detail, refused.value.detail
    out, err = capfd.readouterr()
    assert "def forward" not in out + err, err


def test_the_torchscript_front_end_is_kept():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    job = placement.attach(
        "py-ts", model, (torch.randn(2, 4),), devices=DEVICES, use_daemon=False, frontend="torchscript"
    )
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


def test_a_namedtuple_output_comes_back_as_one():
    # torchvision's GoogLeNet in train mode returns GoogLeNetOutputs(logits, aux_logits2, aux_logits1).
    import torchvision

    def build():
        torch.manual_seed(0)
        return torchvision.models.googlenet(weights=None, init_weights=False, num_classes=10).train()

    x = torch.randn(2, 3, 64, 64)
    job = placement.attach("py-googlenet", build(), (x,), devices=DEVICES, use_daemon=False)
    eager = build()
    seen = []

    def loss(out):
        seen.append(out)
        return out.logits.pow(2).mean() + out.aux_logits1.pow(2).mean() + out.aux_logits2.pow(2).mean()

    torch.manual_seed(1)
    placed_loss = job.step((x,), loss, torch.optim.SGD(job.parameters(), lr=0.01))
    torch.manual_seed(1)
    eager_loss = loss(eager(x))
    assert type(seen[0]).__name__ == "GoogLeNetOutputs"
    assert torch.equal(placed_loss, eager_loss.detach())  # dropout masks drawn alike
