#!/usr/bin/env python3
"""Writes two_tower_mlp.json: a hand-built OpGraph of a two-tower MLP (batch 64, hidden 1024).

Synthetic on purpose: it exists so the control plane can be exercised before TorchScript capture
(issue #3) produces graphs of real models. Shapes, output bytes and parameter bytes follow from the
layer sizes; it carries no measured profile. Run: python3 make_two_tower.py > two_tower_mlp.json
"""

import json

BATCH, IN, HIDDEN, OUT, LAYERS = 64, 512, 1024, 10, 4
F32 = 4
ops, edges = [], []


def op(name, kind, shape, params=0, pinned=None):
    entry = {
        "id": len(ops),
        "name": name,
        "kind": kind,
        "outputs": [{"shape": shape, "dtype": "float32", "bytes": F32 * eval("*".join(map(str, shape)))}],
        "parameter_bytes": params,
    }
    if pinned:
        entry["pinned"] = pinned
    ops.append(entry)
    return entry["id"]


def edge(src, dst):
    edges.append([src, dst, ops[src]["outputs"][0]["bytes"]])


inp = op("input", "prim::input", [BATCH, IN], pinned="cpu")
tails = []
for tower in ("left", "right"):
    prev, width = inp, IN
    for layer in range(LAYERS):
        lin = op(f"{tower}.layer.{layer}.linear", "aten::linear", [BATCH, HIDDEN], F32 * (width * HIDDEN + HIDDEN))
        edge(prev, lin)
        act = op(f"{tower}.layer.{layer}.relu", "aten::relu", [BATCH, HIDDEN])
        edge(lin, act)
        prev, width = act, HIDDEN
    tails.append(prev)
cat = op("head.cat", "aten::cat", [BATCH, 2 * HIDDEN])
for t in tails:
    edge(t, cat)
logits = op("head.linear", "aten::linear", [BATCH, OUT], F32 * (2 * HIDDEN * OUT + OUT))
edge(cat, logits)
loss = op("loss", "aten::cross_entropy_loss", [1])
edge(logits, loss)

print(json.dumps({"name": "two_tower_mlp", "ops": ops, "edges": edges}, indent=1))
