"""Medians with confidence intervals, and the call an interval supports.

The interval is the percentile bootstrap of the median (Efron): RESAMPLES resamples of
the rounds, with replacement, seeded so the same figures always give the same interval.
A figure compared between two servers is the median of per-round ratios. The call
follows criterion.rs: a difference only when the whole interval lies beyond THRESHOLD,
"no measurable difference" when it lies within, undecided when it straddles it.
THRESHOLD is symmetric in ratio: within it means between 1/(1 + it) and 1 + it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 20  # any fixed value: it makes the interval a function of the figures alone
THRESHOLD = 0.03  # ratios within it either way are "no measurable difference"
MIN_ROUNDS = 6  # fewer rounds than this decide nothing, however narrow their interval
UNSTABLE = 0.10  # ratios spread wider than this (interquartile): warn, as pyperf does


@dataclass(frozen=True)
class Estimate:
    """A median and its confidence interval, over `n` values."""

    median: float
    low: float
    high: float
    n: int

    def inverse(self) -> Estimate:
        """The same estimate for the ratio the other way round (B/A for A/B)."""
        return Estimate(1 / self.median, 1 / self.high, 1 / self.low, self.n)

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


class Call(Enum):
    HIGHER = "higher"  # the whole interval above 1 + threshold
    LOWER = "lower"  # the whole interval below 1 / (1 + threshold)
    SAME = "no measurable difference"  # the whole interval within the threshold
    UNDECIDED = "undecided"  # the interval straddles the threshold, or too few rounds


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE,
                    resamples: int = RESAMPLES, seed: int = SEED) -> Estimate | None:
    """The median of `values` with its percentile-bootstrap confidence interval."""
    if not values:
        return None
    ordered = sorted(values)
    generator = random.Random(seed)
    count = len(ordered)
    medians = sorted(statistics.median(generator.choices(ordered, k=count))
                     for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = medians[math.floor(tail * (resamples - 1))]
    high = medians[math.ceil((1 - tail) * (resamples - 1))]
    return Estimate(statistics.median(ordered), low, high, count)


def call(ratio: Estimate | None, threshold: float = THRESHOLD) -> Call:
    """What an interval of a ratio (A/B) supports, at a noise threshold."""
    if ratio is None or ratio.n < MIN_ROUNDS:
        return Call.UNDECIDED
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    if ratio.low > upper:
        return Call.HIGHER
    if ratio.high < lower:
        return Call.LOWER
    if lower <= ratio.low and ratio.high <= upper:
        return Call.SAME
    return Call.UNDECIDED


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def spread(ratios: Sequence[float]) -> float | None:
    """Half the interquartile range of ratios, as a fraction of their median."""
    if len(ratios) < 4:
        return None
    q1, q2, q3 = quartiles(ratios)
    return (q3 - q1) / 2 / q2


def outliers(ratios: Sequence[float]) -> int:
    """How many ratios lie beyond Tukey's fences (1.5 interquartile ranges past the
    quartiles, on a log scale so that 2x and 0.5x are as far from 1): hyperfine and
    criterion.rs warn about such values, which come from the machine, not the code."""
    if len(ratios) < 4:
        return 0
    logs = [math.log(ratio) for ratio in ratios]
    q1, _, q3 = quartiles(logs)
    fence = 1.5 * (q3 - q1)
    return sum(1 for value in logs if value < q1 - fence or value > q3 + fence)
