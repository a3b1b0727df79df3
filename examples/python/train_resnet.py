#!/usr/bin/env python3
"""Trains torchvision's ResNet-18 on synthetic ImageNet-shaped batches while placementd places it.

    python3 examples/python/train_resnet.py --steps 300
    python3 examples/python/train_resnet.py --steps 300 --devices cuda:0,cuda:1,cpu --batch 64

The batches are random images with random labels: the point is the step time placementd measures,
not what the model learns. --no-daemon trains the same steps without placementd, bit for bit the
same on one device (compare --losses files).
"""

import torch
import torchvision

import live_loop


def run():
    p = live_loop.parser(
        "Train ResNet-18 (torchvision) on synthetic batches while placementd places it.", job="resnet18-example"
    )
    p.add_argument("--batch", type=live_loop.positive, default=32, help="images per batch (default 32)")
    p.add_argument(
        "--image-size", type=live_loop.positive, default=224, help="height and width of the images (default 224)"
    )
    p.add_argument("--classes", type=live_loop.positive, default=1000, help="classes (default 1000)")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=args.classes)
    shape = (args.batch, 3, args.image_size, args.image_size)

    def batch(step):
        # Drawn on the CPU from a generator of the step's own, as a data loader hands them over:
        # the same in every run, wherever placementd puts the model.
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        return (torch.randn(shape, generator=g),), torch.randint(args.classes, (args.batch,), generator=g)

    live_loop.train(args, model, batch(0)[0], batch, torch.nn.functional.cross_entropy)


if __name__ == "__main__":
    live_loop.main(live_loop.program_name(), run)
