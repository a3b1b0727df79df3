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
    p = live_loop.parser("Train a small transformer language model on synthetic text while placementd places it.",
                         job="lm-example")
    p.add_argument("--batch", type=live_loop.positive, default=16, help="sequences per batch (default 16)")
    p.add_argument("--context", type=live_loop.positive, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--vocab", type=live_loop.positive, default=512, help="vocabulary size (default 512)")
    p.add_argument("--width", type=live_loop.positive, default=256, help="model width (default 256)")
    p.add_argument("--heads", type=live_loop.positive, default=4, help="attention heads (default 4)")
    p.add_argument("--layers", type=live_loop.positive, default=4, help="transformer blocks (default 4)")
    args = p.parse_args()
    if args.width % args.heads:
        p.error(f"--width {args.width} is not a multiple of --heads {args.heads}")

    torch.manual_seed(args.seed)
    model = LanguageModel(args.vocab, args.width, args.heads, args.layers, args.context)

    def batch(step):
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        start = torch.randint(args.vocab, (args.batch, 1), generator=g)
        stride = torch.randint(1, 8, (args.batch, 1), generator=g)
        text = (start + stride * torch.arange(args.context + 1)) % args.vocab
        return (text[:, :-1],), text[:, 1:]  # predict each next token

    def loss(logits, target):
        return nn.functional.cross_entropy(logits.reshape(-1, args.vocab), target.reshape(-1))

    live_loop.train(args, model, batch(0)[0], batch, loss)


if __name__ == "__main__":
    live_loop.main(live_loop.program_name(), run)
