#!/usr/bin/env python3
"""Trains a stock Hugging Face transformers causal language model (GPT-2 or Llama, random weights)
with AdamW and a warm-up-then-cosine learning-rate schedule while placementd places it.

    python3 examples/python/train_hf.py --steps 300
    python3 examples/python/train_hf.py --model llama --steps 300 --devices cuda:0,cuda:1 --layers 12 --width 768

The model is the library's own class (GPT2LMHeadModel, LlamaForCausalLM) from a config: nothing is
downloaded. It is exported with torch.export in train mode (dropout on) and run op by op by
placementd's engine; its output comes back as transformers' CausalLMOutput. The text is synthetic:
each sequence steps through the vocabulary by a fixed stride, which the model learns.
"""

import math

import torch

import live_loop


def build(args):
    import transformers

    transformers.logging.set_verbosity_error()
    tokens = dict(vocab_size=args.vocab, pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False)
    if args.model == "gpt2":
        config = transformers.GPT2Config(
            n_embd=args.width, n_layer=args.layers, n_head=args.heads, n_positions=args.context, **tokens
        )
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(
        hidden_size=args.width,
        intermediate_size=4 * args.width,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.context,
        **tokens,
    )
    return transformers.LlamaForCausalLM(config)


def run():
    p = live_loop.parser(
        "Train a stock transformers causal LM (GPT-2 or Llama config, random weights) on "
        "synthetic text with AdamW and a learning-rate schedule while placementd places it.",
        job="hf-example",
    )
    p.add_argument("--model", choices=("gpt2", "llama"), default="gpt2", help="the architecture (default gpt2)")
    live_loop.language_model_options(p, batch=8, context=128, vocab=1024, width=256, heads=4, layers=4)
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="steps of linear learning-rate warm-up before the cosine decay (default: a tenth of --steps)",
    )
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW's weight decay (default 0.01)")
    args = p.parse_args()
    live_loop.check_language_model_options(p, args)
    if args.batch < 2:
        p.error("--batch must be at least 2 (torch.export specializes a batch of 1)")
    warmup = max(1, args.steps // 10) if args.warmup is None else args.warmup
    if not 0 <= warmup < args.steps:
        p.error(f"--warmup {warmup} is not from 0 to --steps {args.steps} - 1")
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise ValueError("this example needs transformers: pip install transformers") from None

    torch.manual_seed(args.seed)
    model = build(args).train()
    batch = live_loop.synthetic_text(args)

    def loss(output, target):  # output: transformers' CausalLMOutput, rebuilt from the exported program
        return torch.nn.functional.cross_entropy(output.logits.reshape(-1, args.vocab), target.reshape(-1))

    def schedule(step):  # linear warm-up, then cosine decay to a tenth
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    def optimizer(parameters):
        return torch.optim.AdamW(parameters, lr=args.lr, weight_decay=args.weight_decay)

    live_loop.train(
        args,
        model,
        batch(0)[0],
        batch,
        loss,
        make_optimizer=optimizer,
        make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, schedule),
    )


if __name__ == "__main__":
    live_loop.main(live_loop.program_name(), run)
