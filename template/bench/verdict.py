"""What a run says: each figure's median and interval, each configuration against the
reference, and the sentences that follow from the intervals (stats.py's rule)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench import stats
from bench.model import FIGURES, Run
from bench.route import Route
from bench.stats import Call, Estimate


@dataclass
class Compared:
    """A configuration against the reference, from the rounds both have a figure in:
    per-round ratios, their median and interval, and each side's median CPU µs per
    request over those same rounds (what a CPU ratio is turned into µs with)."""

    index: int
    ratios: dict[str, list[float]]
    estimates: dict[str, Estimate | None]
    calls: dict[str, Call]
    cpu_us: tuple[float, float] | None = None  # (this, the reference): medians, same rounds


@dataclass
class Summary:
    run: Run
    own: dict[int, dict[str, Estimate | None]] = field(default_factory=dict)
    compared: list[Compared] = field(default_factory=list)

    def label(self, index: int) -> str:
        return self.run.configs[index].label

    def median(self, index: int, figure: str) -> float | None:
        values = self.run.values(index, figure)
        return statistics.median(values) if values else None


def summarize(run: Run) -> Summary:
    summary = Summary(run)
    for index in range(len(run.configs)):
        summary.own[index] = {f: stats.median_interval(run.values(index, f)) for f in FIGURES}
        if index == run.reference or len(run.configs) < 2:
            continue
        ratios = {f: run.ratios(index, f) for f in FIGURES}
        estimates = {f: stats.median_interval(ratios[f]) for f in FIGURES}
        calls = {f: stats.call(estimates[f], run.threshold) for f in FIGURES}
        pairs = run.pairs(index, "cpu_us_per_request")
        cpu_us = (statistics.median(mine for mine, _ in pairs),
                  statistics.median(theirs for _, theirs in pairs)) if pairs else None
        summary.compared.append(Compared(index, ratios, estimates, calls, cpu_us))
    return summary


def interval(estimate: Estimate, what: str = "") -> str:
    """'1.08x the requests/s (95 % CI 1.06-1.10)'."""
    return f"{estimate.median:.2f}x{what} (95 % CI {estimate.low:.2f}-{estimate.high:.2f})"


def speed_sentence(mine: str, reference: str, path: str, ratio: Estimate | None, call: Call,
                   threshold: float) -> str:
    if ratio is None:
        return f"{mine} against {reference} on {path}: no requests/s to compare."
    if call is Call.HIGHER:
        return (f"{mine} is faster than {reference} on {path}: "
                f"{interval(ratio, ' the requests/s')}.")
    if call is Call.LOWER:
        return (f"{reference} is faster than {mine} on {path}: "
                f"{interval(ratio.inverse(), ' the requests/s')}.")
    if call is Call.SAME:
        return (f"{mine} and {reference}: no measurable difference in requests/s on {path}: "
                f"{interval(ratio)}, within ±{threshold:.0%}.")
    return (f"{mine} against {reference} on {path}: {ratio.median:.2f}x the requests/s, but "
            f"{undecided(ratio, threshold)}.")


def saved_text(ratio: Estimate, of_us: float | None) -> str:
    """', 8.0 µs less a request (95 % CI 6.9-9.1) of 114.1 µs, ...': a CPU ratio (the
    cheaper side over the dearer) and its interval, in µs of the dearer side's median
    over the same rounds. One computation: 0.93x of 114.1 µs is 8.0 µs less."""
    if not of_us:
        return ""
    saved, low, high = ((1 - value) * of_us for value in (ratio.median, ratio.high, ratio.low))
    return (f", {saved:.1f} µs less a request (95 % CI {low:.1f}-{high:.1f}) of {of_us:.1f} µs "
            f"(the median of the same {ratio.n} rounds)")


def cpu_sentence(mine: str, reference: str, ratio: Estimate | None, call: Call,
                 threshold: float, cpu_us: tuple[float, float] | None = None) -> str:
    """`ratio`: this configuration's CPU per request over the reference's; `cpu_us`:
    (this, the reference)'s medians over the rounds the ratio comes from."""
    if ratio is None:
        return "CPU per request: not measured."
    if call is Call.LOWER:
        return (f"{mine} costs less CPU per request than {reference}: {interval(ratio)}"
                f"{saved_text(ratio, cpu_us and cpu_us[1])}.")
    if call is Call.HIGHER:
        cheaper = ratio.inverse()
        return (f"{reference} costs less CPU per request than {mine}: "
                f"{interval(cheaper)}{saved_text(cheaper, cpu_us and cpu_us[0])}.")
    if call is Call.SAME:
        return (f"No measurable difference in CPU per request: {interval(ratio)}, "
                f"within ±{threshold:.0%}.")
    return (f"{mine} against {reference}: {ratio.median:.2f}x the CPU per request, but "
            f"{undecided(ratio, threshold)}.")


def undecided(ratio: Estimate, threshold: float) -> str:
    """Why an interval decides nothing."""
    if ratio.n < stats.MIN_ROUNDS:
        return f"{ratio.n} rounds are too few to decide (at least {stats.MIN_ROUNDS})"
    return (f"its 95 % CI {ratio.low:.2f}-{ratio.high:.2f} straddles the ±{threshold:.0%} "
            "threshold: too noisy to decide")


def advice(run: Run) -> str:
    """How to get a decision when an interval straddles the threshold."""
    set_aside = len(run.rounds) - len(run.kept)
    quiet = (f"; {set_aside} of {len(run.rounds)} rounds were set aside because a core was "
             "taken away" if set_aside else "")
    longer = max(60, round(2 * run.duration))
    return (f"For a decision: a longer run (--duration {longer}, more rounds), or a quieter "
            f"machine (nothing else running, no other VM on the host){quiet}.")


def verdict(summary: Summary, route: Route, app_cost_us: float | None) -> list[str]:
    """The sentences a run ends with: each configuration against the reference, for
    requests/s and for CPU per request, then what the server's share of the cost is."""
    run = summary.run
    if run.rounds and not run.kept:
        return [f"All {len(run.rounds)} rounds were set aside: the server's or the driver's "
                "core was taken away in each (see the warning). Nothing can be said about the "
                "engines until the machine is quieter: stop other work, or run where no "
                "other process or VM shares the cores."]
    answered = [i for i in range(len(run.configs)) if summary.own[i]["requests_per_second"]]
    if not answered:
        return ["No configuration answered."]
    lines: list[str] = []
    if len(run.configs) == 1:
        own = summary.own[0]["requests_per_second"]
        assert own is not None
        spread = (f"95 % CI {own.low:,.0f}-{own.high:,.0f}" if own.n >= stats.MIN_ROUNDS
                  else f"{own.n} rounds, too few for an interval")
        lines.append(f"{summary.label(0)}: {own.median:,.0f} requests/s ({spread}) on "
                     f"{route.path}.")
    reference = summary.label(run.reference)
    for compared in summary.compared:
        mine = summary.label(compared.index)
        lines.append(speed_sentence(mine, reference, route.path,
                                    compared.estimates["requests_per_second"],
                                    compared.calls["requests_per_second"], run.threshold))
        lines.append(cpu_sentence(mine, reference, compared.estimates["cpu_us_per_request"],
                                  compared.calls["cpu_us_per_request"], run.threshold,
                                  compared.cpu_us))
    if any(Call.UNDECIDED in c.calls.values() for c in summary.compared):
        lines.append(advice(run))
    cpu_us = {i: c for i in answered if (c := summary.median(i, "cpu_us_per_request"))}
    if app_cost_us and cpu_us:
        lines.append(server_share(summary, cpu_us, app_cost_us))
    unsaturated = [summary.label(i) for i in answered if run.saturated(i) is False]
    if unsaturated:
        lines.append(f"The driver could not saturate the server for {', '.join(unsaturated)} "
                     "(its core was not kept busy: the driver or the route's own waiting "
                     "capped the rate); these numbers are a floor, and CPU µs per request is "
                     "the figure to compare.")
    return lines


def server_share(summary: Summary, cpu_us: dict[int, float], app_cost_us: float) -> str:
    """The server's part of the route's cost, at most, named by configuration: it
    depends on which server's CPU per request it is read against (`cpu_us`, by index),
    so the dearest and the cheapest are both given when they differ."""

    def share(index: int) -> str:
        return f"{max(0.0, cpu_us[index] - app_cost_us) / cpu_us[index]:.0%}"

    dearest, cheapest = max(cpu_us, key=cpu_us.__getitem__), min(cpu_us, key=cpu_us.__getitem__)
    said = (f"The app alone (in-process, no server) costs {app_cost_us:.1f} µs CPU per request: "
            f"the server is at most {share(dearest)} of this route's cost on "
            f"{summary.label(dearest)}")
    if dearest == cheapest:
        return f"{said} ({cpu_us[dearest]:.1f} µs)."
    return (f"{said}, the dearest here ({cpu_us[dearest]:.1f} µs), and at most "
            f"{share(cheapest)} on {summary.label(cheapest)}, the cheapest "
            f"({cpu_us[cheapest]:.1f} µs).")


def warnings(summary: Summary) -> list[str]:
    """What made this run less trustworthy: rounds set aside, unstable or outlying
    ratios (pyperf's and hyperfine's warnings, for pairs of slices)."""
    run = summary.run
    notes = []
    set_aside = [reason for r in run.rounds for reason in r.set_aside]
    if set_aside:
        by_reason: dict[str, int] = {}
        for reason in set_aside:
            kind = reason.split(" ", 2)[0]  # "server" or "driver"
            by_reason[kind] = by_reason.get(kind, 0) + 1
        kinds = ", ".join(f"{count} slices: the {kind}'s core was taken away"
                          for kind, count in by_reason.items())
        notes.append(f"{len(run.rounds) - len(run.kept)} of {len(run.rounds)} rounds set aside "
                     f"({kinds}; steal time or other processes, from /proc/stat).")
    for compared in summary.compared:
        ratios = compared.ratios["requests_per_second"]
        spread = stats.spread(ratios)
        if spread is not None and spread > stats.UNSTABLE:
            notes.append(f"{summary.label(compared.index)}: the per-round ratios are unstable "
                         f"(they spread ±{spread:.0%}): the machine's speed changed within "
                         "rounds.")
        outlying = stats.outliers(ratios)
        if outlying:
            notes.append(f"{summary.label(compared.index)}: {outlying} of {len(ratios)} "
                         "per-round ratios are outliers (the median and its interval resist "
                         "them; many mean the machine was disturbed at times).")
    return notes
