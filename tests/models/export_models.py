#!/usr/bin/env python3
"""Exports test models with torch.export at test time, in train mode, with an eager reference run.

    export_models.py [--no-reference] OUT_DIR [NAME ...]

For each model (make_models.py's constructors, built after torch.manual_seed(0), in train mode:
dropout on, batch norm updating its statistics) writes:
  OUT_DIR/NAME.pt2             torch.export.export(model, inputs, strict=False) with a dynamic batch
                               dimension (Dim.AUTO), saved with torch.export.save
  OUT_DIR/NAME.json            {"inputs": [[shape...], ...], "dtype": ...} as make_models.py writes
  OUT_DIR/NAME.reference.json  and NAME.reference.bin: the inputs, and plain eager PyTorch trained
                               by the recipe below from the same weights: every step's loss (the
                               float32's bits), and the parameters and buffers at the end. Where the
                               exported graph, run by PyTorch itself, does not train bit for bit as
                               the eager module does ("reference": "exported program"), that run
                               is the reference instead: the graph is what any runtime of the .pt2
                               trains

The recipe, which tests/unit/sdk/torch/export_frontend_test.cpp repeats through placementd's engine,
on one thread (reductions split over threads may round differently): torch.manual_seed(1) draws the inputs (randn, or randint(0, 100) for token ids); torch.manual_seed(2)
before 20 steps of SGD (lr 0.01, foreach=False: param.add_(grad, alpha=-lr), which LibTorch's SGD
does too); the last step runs a batch one smaller (a short last batch of an epoch). The loss is the
sum over the outputs' floating tensors, in pytree order, of t.float().pow(2).mean().

--no-reference writes the .pt2 and .json alone (scripts/run.sh's example models). Without names,
the models the unit tests use are exported, the damaged files the error tests read
(broken_*.pt2; hf_gpt2_float64_embedding.pt2, its embedding's output recorded as float64), and
hf_gpt2 exported on the meta device (hf_gpt2_meta.pt2: shapes, no weights).
"""

import copy
import io
import json
import os
import struct
import sys
import zipfile

import warnings

import torch
from torch.utils import _pytree as pytree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402

# nn.LSTM re-flattens its weights in forward(), which export reports as attributes assigned while
# exporting; the exported lstm op reads the registered parameters all the same (the C++ test trains
# GNMT bit for bit), so the warning says nothing to a user of these files.
warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights.* were assigned during export")

# name: (constructor, input shapes, dtype); batch >= 2 so that the last batch can be one smaller.
MODELS = {
    "mlp": make_models.MODELS["mlp"],
    "two_tower": make_models.MODELS["two_tower"],
    "bert_small": make_models.MODELS["bert_small"],
    "gnmt_small": make_models.MODELS["gnmt_small"],
    "resnet18": (make_models.MODELS["resnet18"][0], [[4, 3, 64, 64]], "float32"),
    "mobilenet_v3_small": (lambda: make_models.torchvision_model("mobilenet_v3_small"), [[4, 3, 64, 64]], "float32"),
    # Without its auxiliary heads: in train mode they come back in a namedtuple that
    # torch.export.save cannot write unregistered (the Python SDK registers it; test_export.py).
    "googlenet": (
        lambda: make_models.torchvision_model("googlenet", aux_logits=False, init_weights=False),
        [[2, 3, 64, 64]],
        "float32",
    ),
    "densenet121": (lambda: make_models.torchvision_model("densenet121"), [[4, 3, 32, 32]], "float32"),
    "hf_gpt2": make_models.MODELS["hf_gpt2"],
    "hf_bert": make_models.MODELS["hf_bert"],
    "hf_llama": make_models.MODELS["hf_llama"],
    # The example jobs' models (scripts/run.sh), exported without a reference run (--no-reference).
    "gnmt_example": make_models.MODELS["gnmt_example"],
    "inception_example": make_models.MODELS["inception_example"],
}
SMALL = [name for name in MODELS if not name.endswith("_example")]
STEPS = 20


class WithCond(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.linear(t), lambda t: t.clone(), (x,))


def inputs_for(shapes, dtype):
    if dtype == "int64":
        return tuple(torch.randint(0, 100, shape) for shape in shapes)
    return tuple(torch.randn(shape) for shape in shapes)


def loss_of(outputs):
    terms = [
        t.float().pow(2).mean()
        for t in pytree.tree_leaves(outputs)
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    return loss


def float_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def export(name, out_dir, reference=True):
    # One thread: a reduction split over threads may round differently, and the C++ test that
    # repeats this run must get the same bits on any machine.
    torch.set_num_threads(1)
    build, shapes, dtype = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    reference = copy.deepcopy(model)
    torch.manual_seed(1)
    inputs = inputs_for(shapes, dtype)
    program = make_models.export_program(model, inputs, os.path.join(out_dir, name + ".pt2"))
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"inputs": shapes, "dtype": dtype}, f)
    if not reference:
        return

    last = tuple(x[: x.shape[0] - 1] for x in inputs)

    def train(module):
        torch.manual_seed(2)
        sgd = torch.optim.SGD(module.parameters(), lr=0.01, foreach=False)
        losses = []
        for step in range(STEPS):
            sgd.zero_grad()
            loss = loss_of(module(*(inputs if step < STEPS - 1 else last)))
            loss.backward()
            sgd.step()
            losses.append(float_bits(loss.item()))
        return losses

    # The exported graph run by PyTorch itself (ExportedProgram.module()), from the same weights:
    # where it does not match the eager module bit for bit, torch.export recorded other ops than
    # eager runs (a library may take another path while exporting), and that graph is what any
    # runtime of the .pt2 trains.
    exported = program.module()
    exported_losses = train(exported)
    losses = train(reference)
    if exported_losses != losses:
        reference, losses = exported, exported_losses
        source = "exported program"
    else:
        source = "eager"

    blob = io.BytesIO()

    def put(tensor):
        offset = blob.tell()
        data = tensor.detach().contiguous().cpu().reshape(-1)
        shape = list(tensor.shape)
        blob.write(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        return {
            "shape": shape,
            "dtype": str(data.dtype).replace("torch.", ""),
            "offset": offset,
            "bytes": blob.tell() - offset,
        }

    record = {
        "steps": STEPS,
        "reference": source,
        "inputs": [put(x) for x in inputs],
        "last_inputs": [put(x) for x in last],
        "losses": losses,
        "parameters": {n: put(p) for n, p in reference.named_parameters()},
        "buffers": {n: put(b) for n, b in reference.named_buffers()},
    }
    with open(os.path.join(out_dir, name + ".reference.bin"), "wb") as f:
        f.write(blob.getvalue())
    with open(os.path.join(out_dir, name + ".reference.json"), "w") as f:
        json.dump(record, f)


def rewrite(source, target, change, record="models/model.json"):
    """A copy of a .pt2 with one JSON record (by default the program) changed by `change`."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith(record):
                data = json.dumps(change(json.loads(data))).encode()
            zout.writestr(item, data)


def broken(out_dir):
    good = os.path.join(out_dir, "mlp.pt2")

    def newer_schema(program):
        program["schema_version"]["major"] += 1
        return program

    def unknown_op(program):
        for node in program["graph_module"]["graph"]["nodes"]:
            if node["target"] == "torch.ops.aten.relu.default":
                node["target"] = "torch.ops.aten.no_such_op.default"
                return program
        raise SystemExit("mlp has no relu to rename")

    def weight_past_its_payload(config):
        meta = config["config"]["layer1.weight"]["tensor_meta"]
        meta["strides"][0] = {"as_int": 2**62}  # the last element far beyond the stored bytes
        return config

    # The token embedding has no meta kernel in a C++ process: at the recorded example, capture
    # takes its output as recorded instead of running it, float64 in this copy.
    def embedding_recorded_float64(program):
        graph = program["graph_module"]["graph"]
        for node in graph["nodes"]:
            if node["target"] == "torch.ops.aten.embedding.default":
                graph["tensor_values"][node["outputs"][0]["as_tensor"]["name"]]["dtype"] = 8  # DOUBLE
                return program
        raise SystemExit("hf_gpt2 has no embedding")

    rewrite(
        os.path.join(out_dir, "hf_gpt2.pt2"),
        os.path.join(out_dir, "hf_gpt2_float64_embedding.pt2"),
        embedding_recorded_float64,
    )
    rewrite(
        good,
        os.path.join(out_dir, "broken_weight.pt2"),
        weight_past_its_payload,
        record="data/weights/model_weights_config.json",
    )
    rewrite(good, os.path.join(out_dir, "broken_schema.pt2"), newer_schema)
    rewrite(good, os.path.join(out_dir, "broken_op.pt2"), unknown_op)
    with open(good, "rb") as f:
        data = f.read()
    with open(os.path.join(out_dir, "broken_truncated.pt2"), "wb") as f:
        f.write(data[: len(data) // 2])
    torch.manual_seed(0)
    program = torch.export.export(WithCond(), (torch.randn(2, 4),), strict=False)
    torch.export.save(program, os.path.join(out_dir, "broken_cond.pt2"))


def on_meta(out_dir):
    """hf_gpt2 built and exported on the meta device: a .pt2 with shapes and no weights."""
    build, shapes, _ = MODELS["hf_gpt2"]
    with torch.device("meta"):
        model = build().train()
        inputs = tuple(torch.randint(0, 100, shape) for shape in shapes)
    torch.export.save(torch.export.export(model, inputs, strict=False), os.path.join(out_dir, "hf_gpt2_meta.pt2"))


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if args else 2)
    reference = True
    if args[0] == "--no-reference":
        reference, args = False, args[1:]
    if not args:
        sys.exit(__doc__)
    out_dir, names = args[0], args[1:] or SMALL
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown model {name}; known: {', '.join(MODELS)}")
    for name in names:
        export(name, out_dir, reference)
        print(f"{out_dir}/{name}.pt2")
    if not args[1:]:
        broken(out_dir)
        on_meta(out_dir)


if __name__ == "__main__":
    main()
