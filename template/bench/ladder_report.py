"""The ladder's figures and its tables (bench/ladder.py says what the rungs are).

Every figure comes from the same rounds, each rung one slice a round, the first rotating;
served, a slice whose core was taken away is left out with every pair it is in. A rung
has its CPU time per request (the median of its slices), its ratio to bare FastAPI set
up the same way (the median of per-round ratios), and its step (the median of per-round
differences from the rung below: what that one change costs), each with its interval.
Per-round figures hold on a machine whose speed drifts, where lowest-of-N trials do not.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from bench import stats
from bench.model import Run
from bench.report import estimate_text
from bench.stats import Estimate


@dataclass(frozen=True)
class RungFigures:
    name: str
    cost: Estimate | None  # CPU microseconds per request
    ratio: Estimate | None  # to the reference rung, per round
    step: Estimate | None  # microseconds over the rung below, per round


def figures(names: Sequence[str], rounds: Sequence[Sequence[float | None]],
            reference: int) -> list[RungFigures]:
    """`rounds[r][i]`: rung i's CPU microseconds per request in round r (None: no responses)."""
    result = []
    for index, name in enumerate(names):
        own = [values[index] for values in rounds if values[index] is not None]
        ratios = [values[index] / values[reference] for values in rounds
                  if values[index] is not None and values[reference]]
        steps = [values[index] - values[index - 1] for values in rounds if index > 0
                 and values[index] is not None and values[index - 1] is not None]
        result.append(RungFigures(name, stats.median_interval(own),  # type: ignore[arg-type]
                                  stats.median_interval(ratios),
                                  stats.median_interval(steps)))  # type: ignore[arg-type]
    return result


def served_rounds(run: Run) -> list[list[float | None]]:
    """The server CPU microseconds per request of each rung, per round; None for a slice set
    aside (its server's or its driver's core was taken away). A round of 14 rungs
    lasts 14 s: on a shared machine few are whole, so a pair of rungs is compared in
    every round where both its slices were kept, not only in whole rounds."""
    return [[None if (taken := this.slices[index]).set_aside else taken.cpu_us_per_request
             for index in range(len(run.configs))] for this in run.rounds]


def pairs_counted(run: Run) -> int:
    """The fewest rounds in which a rung's slice was kept with the baseline's, or with
    the rung below's: the ladder stops when this reaches the rounds asked for."""
    rounds = served_rounds(run)
    fewest = len(rounds)
    for index in range(len(run.configs)):
        for other in {run.reference, max(0, index - 1)} - {index}:
            fewest = min(fewest, sum(1 for values in rounds
                                     if values[index] is not None and values[other] is not None))
    return fewest


def core_busy(run: Run, index: int) -> str:
    """The median share of its core a rung's server kept busy, over its kept slices."""
    busy = [value for this in run.rounds if not (taken := this.slices[index]).set_aside
            and (value := taken.core_busy) is not None]
    return f"{statistics.median(busy):.0%}" if busy else "n/a"


def slices_kept(run: Run) -> tuple[int, int]:
    every = [piece for this in run.rounds for piece in this.slices.values()]
    return sum(1 for piece in every if not piece.set_aside), len(every)


def table(title: str, rows: list[RungFigures], reference: str,
          busy: Sequence[str] | None = None) -> Table:
    out = Table(title=title)
    columns = ["rung", "µs CPU/request", f"vs {reference}", "step µs"]
    for column in [*columns, *(["core busy"] if busy else [])]:
        out.add_column(column, justify="left" if column == "rung" else "right")
    for index, row in enumerate(rows):
        step = "" if index == 0 else estimate_text(row.step, "+.1f")
        out.add_row(row.name, estimate_text(row.cost, ".1f"),
                    estimate_text(row.ratio, ".3f", "x"), step,
                    *([busy[index]] if busy else []))
    return out


def print_ladder(console: Console, title: str, rows: list[RungFigures], reference: str,
                 busy: Sequence[str] | None = None) -> None:
    console.print(table(title, rows, reference, busy))
    top = rows[-1]
    if top.ratio is not None and top.name != reference:  # (--rung may climb none above it)
        console.print(f"{top.name}: {estimate_text(top.ratio, '.3f', 'x')} {reference}, "
                      f"from the same {top.ratio.n} rounds.", highlight=False)
