#!/usr/bin/env python3
"""Trains a small decoder-only transformer language model while placementd places it.

    python3 examples/python/train_lm.py --steps 300
    python3 examples/python/train_lm.py --steps 300 --devices cuda:0,cuda:1 --layers 12 --width 768

The text is synthetic: each sequence follows a rule (every token a fixed step after the one before,
modulo the vocabulary) the model can learn, so the loss falls from log(vocab) as it trains.
"""

import math

import torch
from torch import nn

import live_loop


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP, spelled out (no fused kernels) so every matmul is an
    op placementd can place."""

    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.head_width = width // heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.register_buffer("future", torch.triu(torch.ones(context, context, dtype=torch.bool), 1), persistent=False)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, self.head_width).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_width)
        scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):
    def __init__(self, vocab, width, heads, layers, context):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*(Block(width, heads, context) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("position_ids", torch.arange(context), persistent=False)

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(self.position_ids[: tokens.shape[1]])
        return self.head(self.norm(self.blocks(x)))


def run():
    p = live_loop.parser(
        "Train a small transformer language model on synthetic text while placementd places it.", job="lm-example"
    )
    live_loop.language_model_options(p, batch=16, context=128, vocab=512, width=256, heads=4, layers=4)
    args = p.parse_args()
    live_loop.check_language_model_options(p, args)

    torch.manual_seed(args.seed)
    model = LanguageModel(args.vocab, args.width, args.heads, args.layers, args.context)
    batch = live_loop.synthetic_text(args)

    def loss(logits, target):
        return nn.functional.cross_entropy(logits.reshape(-1, args.vocab), target.reshape(-1))

    live_loop.train(args, model, batch(0)[0], batch, loss)


if __name__ == "__main__":
    live_loop.main(live_loop.program_name(), run)
