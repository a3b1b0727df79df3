#!/usr/bin/env python3
"""Traces the test and benchmark models to TorchScript, or exports them, at test time (no weights
are committed).

    make_models.py [--device DEVICE] [--format torchscript|export|both] OUT_DIR [NAME ...]

For each model, built in train mode (dropout on, batch norm updating its statistics: what a
training job runs), writes OUT_DIR/NAME.pt (torch.jit.trace with random weights; --format
torchscript, the default), OUT_DIR/NAME.pt2 (torch.export.export(model, inputs, strict=False) with
a dynamic batch dimension, saved with torch.export.save; --format export), or both, and
OUT_DIR/NAME.json ({"inputs": [[shape...], ...], "dtype": "float32"|"int64"}). Without names, the
small models used by the unit tests are made. export_models.py exports the ones the export tests
train, with an eager reference run. Needs torch, torchvision and transformers: the project's environment
(.venv/bin/python, made by scripts/install-deps.sh), whose torch is the LibTorch the build links.

The hf_* models are Hugging Face transformers (BERT masked LM, GPT-2, a Llama-style decoder) at
small configs, built from their config classes with random weights (nothing is downloaded).
Traced, they return a dict ({"logits": ...}), as transformers' models do.

--device (default cpu) traces on that device, e.g. cuda:0: a trace records the device of the
tensors it creates (an LSTM's zero state, a transformer's positions), so a model traced on the CPU
cannot run as a plain module on a GPU. The weights are saved on that device too.

--device meta builds and traces the model on PyTorch's meta device: shapes without weights or
values. The file is small whatever the model's size, and placementctl capture records its ops'
shapes and work without computing them (it cannot profile it). Models with convolutions do not
trace there (PyTorch 2.11's meta convolution fails under the tracer): trace those on the CPU.

The recurrent models are written with one module per layer (a traced nn.LSTM(num_layers=4) is one
fused op), and GNMT also in an unrolled variant (one LSTMCell call per layer and time step), which
is what the papers' TensorFlow graphs were.
"""

import argparse
import json
import os
import warnings

# torch.jit.trace/script/save warn that TorchScript is deprecated (PyTorch 2.11) on every call:
# TorchScript is the format placementd captures, so the warning says nothing new here.
warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated", category=DeprecationWarning)

import torch
from torch import nn
from torch.export import Dim


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(32, 64)
        self.act = nn.ReLU()
        self.layer2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.layer2(self.act(self.layer1(x)))


class TwoTower(nn.Module):
    def __init__(self, width=64, depth=3):
        super().__init__()
        self.left = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)])
        self.right = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(depth)])
        self.head = nn.Linear(2 * width, 10)

    def forward(self, x):
        return self.head(torch.cat([self.left(x), self.right(x)], dim=1))


class Attention(nn.Module):
    """Content-based (Luong dot) attention over the encoder states."""

    def forward(self, query, keys):
        scores = torch.bmm(query, keys.transpose(1, 2))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights, keys)


class Gnmt(nn.Module):
    """GNMT-style encoder-decoder: an embedding, `layers` LSTM layers each way (one module per
    layer, residual connections from the third layer on), attention, and a softmax projection."""

    def __init__(self, vocab=1000, hidden=256, layers=4, unrolled=False):
        super().__init__()
        self.unrolled = unrolled
        self.embed_src = nn.Embedding(vocab, hidden)
        self.embed_tgt = nn.Embedding(vocab, hidden)
        cell = nn.LSTMCell if unrolled else (lambda i, h: nn.LSTM(i, h, batch_first=True))
        self.encoder = nn.ModuleList([cell(hidden, hidden) for _ in range(layers)])
        self.decoder = nn.ModuleList([cell(2 * hidden if i == 0 else hidden, hidden) for i in range(layers)])
        self.attention = Attention()
        self.project = nn.Linear(hidden, vocab)

    def run_layer(self, layer, x):
        if not self.unrolled:
            return layer(x)[0]
        batch, steps, _ = x.shape
        h = x.new_zeros(batch, layer.hidden_size)
        c = x.new_zeros(batch, layer.hidden_size)
        outputs = []
        for t in range(steps):
            h, c = layer(x[:, t, :], (h, c))
            outputs.append(h)
        return torch.stack(outputs, dim=1)

    def forward(self, src, tgt):
        x = self.embed_src(src)
        for i, layer in enumerate(self.encoder):
            y = self.run_layer(layer, x)
            x = x + y if i >= 2 else y
        keys = x
        y = self.embed_tgt(tgt)
        context = self.attention(y, keys)
        y = torch.cat([y, context], dim=2)
        for i, layer in enumerate(self.decoder):
            z = self.run_layer(layer, y)
            y = y + z if i >= 2 else z
        return self.project(y)


class RnnLm(nn.Module):
    """LSTM language model, one module per layer."""

    def __init__(self, vocab=1000, hidden=256, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([nn.LSTM(hidden, hidden, batch_first=True) for _ in range(layers)])
        self.project = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)[0]
        return self.project(x)


class Bert(nn.Module):
    """A BERT-style encoder: token + position embeddings, `layers` transformer layers."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, seq=128):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, batch_first=True, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0)
        x = self.norm(self.tokens(tokens) + self.positions(positions))
        return torch.tanh(self.pool(self.encoder(x)[:, 0]))


class BertMlm(Bert):
    """BERT pre-training's masked-LM shape: the encoder, then a transform (linear, GELU, layer norm)
    and logits over the whole vocabulary for every token."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, seq=384):
        super().__init__(vocab, hidden, layers, heads, seq)
        self.transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0)
        x = self.norm(self.tokens(tokens) + self.positions(positions))
        return self.decoder(self.transform(self.encoder(x)))


class InceptionBlock(nn.Module):
    """Four parallel branches (1x1; 1x1-3x3; 1x1-5x5; pool-1x1) concatenated, as in GoogLeNet."""

    def __init__(self, cin, c):
        super().__init__()
        self.b1 = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU())
        self.b3 = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.b5 = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU(), nn.Conv2d(c, c, 5, padding=2), nn.ReLU())
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(cin, c, 1), nn.ReLU())

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.pool(x)], 1)


class InceptionNet(nn.Module):
    """A small Inception-style CNN for 32x32 images: a stem and three inception blocks."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.block1 = InceptionBlock(32, 16)
        self.block2 = InceptionBlock(64, 32)
        self.reduce = nn.MaxPool2d(2)
        self.block3 = InceptionBlock(128, 32)
        self.head = nn.Linear(128, classes)

    def forward(self, x):
        x = self.block3(self.reduce(self.block2(self.block1(self.stem(x)))))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class WithControlFlow(nn.Module):
    """Data-dependent control flow: scripted, it keeps a prim::If that capture must refuse."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        if bool(x.sum() > 0):
            return self.linear(x)
        return x


def torchvision_model(name, **kwargs):
    import torchvision

    return getattr(torchvision.models, name)(weights=None, **kwargs)


def hf_model(name):
    """A transformers model at a small config (or GPT-2 XL's), random weights, in its default (SDPA)
    attention."""
    import transformers

    transformers.logging.set_verbosity_error()
    vocab, tokens = 128, dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            pad_token_id=0,
        )
        return transformers.BertForMaskedLM(config)
    if name == "gpt2_xl":  # GPT-2 XL's shape: 48 layers, hidden 1600, 25 heads, 1.56e9 parameters
        config = transformers.GPT2Config(
            vocab_size=50257, n_embd=1600, n_layer=48, n_head=25, n_positions=1024, use_cache=False
        )
        return transformers.GPT2LMHeadModel(config)
    if name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False, **tokens
        )
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
        **tokens,
    )
    return transformers.LlamaForCausalLM(config)


# name: (constructor, input shapes, input dtype)
MODELS = {
    "mlp": (Mlp, [[8, 32]], "float32"),
    "two_tower": (TwoTower, [[8, 64]], "float32"),
    "gnmt_small": (lambda: Gnmt(vocab=100, hidden=32, layers=4), [[2, 6], [2, 5]], "int64"),
    "gnmt_small_unrolled": (lambda: Gnmt(vocab=100, hidden=32, layers=4, unrolled=True), [[2, 6], [2, 5]], "int64"),
    "rnnlm_small": (lambda: RnnLm(vocab=100, hidden=32), [[2, 8]], "int64"),
    "bert_small": (lambda: Bert(vocab=100, hidden=32, layers=2, heads=2, seq=16), [[2, 16]], "int64"),
    "resnet18": (lambda: torchvision_model("resnet18"), [[1, 3, 64, 64]], "float32"),
    "control_flow": (WithControlFlow, [[2, 4]], "float32"),
    "hf_bert": (lambda: hf_model("bert"), [[2, 16]], "int64"),
    "hf_gpt2": (lambda: hf_model("gpt2"), [[2, 16]], "int64"),
    "hf_llama": (lambda: hf_model("llama"), [[2, 16]], "int64"),
    # The example jobs' models (examples/train_gnmt, examples/train_inception).
    "gnmt_example": (lambda: Gnmt(vocab=1000, hidden=128, layers=4), [[16, 20], [16, 20]], "int64"),
    "inception_example": (InceptionNet, [[16, 3, 32, 32]], "float32"),
    # The benchmark models at the papers' sizes (made on demand, not by the unit tests).
    "inception_v3": (
        lambda: torchvision_model("inception_v3", aux_logits=False, init_weights=False),
        [[1, 3, 299, 299]],
        "float32",
    ),
    "resnet50": (lambda: torchvision_model("resnet50"), [[1, 3, 224, 224]], "float32"),
    "gnmt4": (lambda: Gnmt(vocab=32000, hidden=1024, layers=4), [[1, 40], [1, 40]], "int64"),
    "gnmt4_unrolled": (lambda: Gnmt(vocab=32000, hidden=1024, layers=4, unrolled=True), [[1, 40], [1, 40]], "int64"),
    "rnnlm": (lambda: RnnLm(vocab=10000, hidden=2048, layers=2), [[1, 40]], "int64"),
    "bert_base": (lambda: Bert(), [[1, 128]], "int64"),
    # GPU-bound batches for the engine overhead on a GPU (issue #3; scripts/gpu-run.sh).
    "inception_v3_bs32": (
        lambda: torchvision_model("inception_v3", aux_logits=False, init_weights=False),
        [[32, 3, 299, 299]],
        "float32",
    ),
    "resnet50_bs64": (lambda: torchvision_model("resnet50"), [[64, 3, 224, 224]], "float32"),
    "gnmt4_bs256": (lambda: Gnmt(vocab=32000, hidden=1024, layers=4), [[256, 40], [256, 40]], "int64"),
    # The cost model's H100 calibration points (issue #17): BERT-base pre-training, bs 24, seq 384.
    "bert_base_mlm_bs24": (lambda: BertMlm(), [[24, 384]], "int64"),
    # The papers' models at the papers' batch sizes, for the cost model (tests/data/graphs/papers,
    # scripts/make-graph-data.sh --papers): with inception_v3, inception_v3_bs32 and resnet50_bs64.
    "gnmt4_bs128": (lambda: Gnmt(vocab=32000, hidden=1024, layers=4), [[128, 50], [128, 50]], "int64"),
    "gnmt4_unrolled_bs128": (
        lambda: Gnmt(vocab=32000, hidden=1024, layers=4, unrolled=True),
        [[128, 50], [128, 50]],
        "int64",
    ),
    "gnmt8_bs256": (lambda: Gnmt(vocab=32000, hidden=1024, layers=8), [[256, 50], [256, 50]], "int64"),
    "gnmt8_unrolled_bs256": (
        lambda: Gnmt(vocab=32000, hidden=1024, layers=8, unrolled=True),
        [[256, 50], [256, 50]],
        "int64",
    ),
    "rnnlm_bs64": (lambda: RnnLm(vocab=10000, hidden=2048, layers=2), [[64, 40]], "int64"),
    "bert_large_mlm_bs24": (lambda: BertMlm(hidden=1024, layers=24, heads=16), [[24, 384]], "int64"),
    # Two that do not fit one 80 GiB GPU with Adam: placement is needed at all.
    "gnmt8_vocab1m_bs256": (lambda: Gnmt(vocab=1000000, hidden=1024, layers=8), [[256, 50], [256, 50]], "int64"),
    "gpt2_xl_bs8": (lambda: hf_model("gpt2_xl"), [[8, 1024]], "int64"),
}
SMALL = [
    "mlp",
    "two_tower",
    "gnmt_small",
    "gnmt_small_unrolled",
    "rnnlm_small",
    "bert_small",
    "resnet18",
    "control_flow",
    "gnmt_example",
    "inception_example",
    "hf_bert",
    "hf_gpt2",
    "hf_llama",
]
SCRIPTED = {"control_flow"}


def export_program(model, inputs, path):
    """torch.export's training IR of `model` (strict=False: the module's Python runs as it is) with
    the batch dimension of every input dynamic, saved to `path`. An example batch of 1 leaves it
    static: export specialises sizes 0 and 1."""
    dynamic = tuple({0: Dim.AUTO} if x.shape[0] > 1 else None for x in inputs)
    program = torch.export.export(model, inputs, strict=False, dynamic_shapes=dynamic)
    torch.export.save(program, path)
    return program


def make(name, out_dir, device="cpu", formats=("torchscript",)):
    build, shapes, dtype = MODELS[name]
    torch.manual_seed(0)
    if device == "meta":
        # Built on the meta device, weights are never allocated: a model far larger than this
        # machine's memory traces in seconds.
        with torch.device("meta"):
            model = build().train()
    else:
        model = build().train().to(device)
    if dtype == "int64":
        inputs = tuple(torch.randint(0, 100, shape, device=device) for shape in shapes)
    else:
        inputs = tuple(torch.randn(shape, device=device) for shape in shapes)
    written = []
    if "export" in formats and name not in SCRIPTED:
        written.append(os.path.join(out_dir, name + ".pt2"))
        export_program(model, inputs, written[-1])
    if "torchscript" in formats or name in SCRIPTED:
        # Traced with autograd on, as for training: inference-only fast paths (the fused
        # transformer layer) would hide the ops we want to place.
        if name in SCRIPTED:
            compiled = torch.jit.script(model)
        elif name.startswith(("hf_", "gpt2_xl")):
            # transformers checks shapes and masks in Python; traced, those checks become constants
            # for these input shapes, which is what capture wants, so their TracerWarnings are
            # noise here. strict=False: the output is a dict.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                compiled = torch.jit.trace(model, inputs, check_trace=False, strict=False)
        else:
            compiled = torch.jit.trace(model, inputs, check_trace=False)
        written.append(os.path.join(out_dir, name + ".pt"))
        compiled.save(written[-1])
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"inputs": shapes, "dtype": dtype}, f)
    return written


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [--device DEVICE] [--format FORMAT] OUT_DIR [NAME ...]",
    )
    parser.add_argument("--device", default="cpu", help="where the models are built and traced (default cpu)")
    parser.add_argument(
        "--format",
        choices=["torchscript", "export", "both"],
        default="torchscript",
        help="NAME.pt (torchscript, the default), NAME.pt2 (export) or both; a model with "
        "data-dependent control flow (control_flow) is scripted whatever is asked",
    )
    parser.add_argument("out_dir", metavar="OUT_DIR")
    parser.add_argument("names", metavar="NAME", nargs="*", help=f"default: {' '.join(SMALL)}")
    args = parser.parse_args()
    names = args.names or SMALL
    for name in names:
        if name not in MODELS:
            parser.error(f"unknown model {name}; known: {', '.join(MODELS)}")
    formats = ("torchscript", "export") if args.format == "both" else (args.format,)
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        for path in make(name, args.out_dir, args.device, formats):
            print(path)


if __name__ == "__main__":
    main()
