"""What the Python benchmarks share: their command-line checks and the interval they give ratios."""

import argparse
import statistics


def positive(text):
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def interval(values, rng, resamples=10000):
    """The 95% bootstrap interval of the mean of `values` (pairs of windows)."""
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(resamples))
    return means[int(0.025 * resamples) - 1], means[int(0.975 * resamples) - 1]
