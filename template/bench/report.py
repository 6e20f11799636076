"""Show a run: a table, warnings, the verdict's sentences, and every figure as JSON.
Nothing here measures (harness.py does; verdict.py works out what the figures say)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bench import drivers, stats
from bench.route import Route
from bench.stats import Estimate
from bench.verdict import Summary


def estimate_text(estimate: Estimate | None, fmt: str, suffix: str = "") -> str:
    """'1.07x (1.06-1.08)'; signed figures '+2.1 (+1.2 to +3.4)'."""
    if estimate is None:
        return "n/a"
    if estimate.n < stats.MIN_ROUNDS:  # too few rounds for an interval worth printing
        return f"{format(estimate.median, fmt)}{suffix} ({estimate.n} rounds)"
    low, high = format(estimate.low, fmt), format(estimate.high, fmt)
    between = " to " if fmt.startswith("+") else "-"
    return f"{format(estimate.median, fmt)}{suffix} ({low}{between}{high})"


def _median(summary: Summary, index: int, figure: str, fmt: str) -> str:
    value = summary.median(index, figure)
    return "n/a" if value is None else format(value, fmt)


def table(summary: Summary, driver: drivers.Driver) -> Table:
    run = summary.run
    out = Table(title=f"medians (95 % CI) over {len(run.kept)} rounds of {run.slice_seconds:g} s "
                      f"slices; driver: {driver.name}")
    columns = ("engine / loop / parser", "requests/s", "vs reference", "server CPU µs/req",
               "vs reference", "p50 / p99 ms", "core busy", "failed + non-2xx")
    for column in columns:
        out.add_column(column, justify="left" if column.startswith("engine") else "right")
    compared = {c.index: c for c in summary.compared}
    for index, config in enumerate(run.configs):
        own = summary.own[index]
        versus = compared.get(index)
        reference = "reference" if len(run.configs) > 1 else ""
        out.add_row(
            config.label, estimate_text(own["requests_per_second"], ",.0f"),
            estimate_text(versus.estimates["requests_per_second"], ".2f", "x") if versus
            else reference,
            estimate_text(own["cpu_us_per_request"], ".1f"),
            estimate_text(versus.estimates["cpu_us_per_request"], ".2f", "x") if versus
            else reference,
            f"{_median(summary, index, 'p50_ms', '.2f')} / "
            f"{_median(summary, index, 'p99_ms', '.2f')}",
            _median(summary, index, "core_busy", ".0%"), str(run.failed(index)),
        )
    return out


def as_json(summary: Summary, route: Route, driver: drivers.Driver,
            app_cost_us: float | None, sentences: list[str],
            notes: list[str]) -> dict[str, object]:
    run = summary.run
    compared = {c.index: c for c in summary.compared}

    def figures(index: int) -> dict[str, object]:
        own = {f: (e.as_dict() if (e := summary.own[index][f]) else None)
               for f in summary.own[index]}
        versus = compared.get(index)
        return {
            **own,
            "median": {f: summary.median(index, f) for f in (
                "requests_per_second", "cpu_us_per_request", "p50_ms", "p95_ms", "p99_ms",
                "core_busy")},
            "vs_reference": None if versus is None else {
                f: {**(e.as_dict() if (e := versus.estimates[f]) else {}),
                    "call": versus.calls[f].value, "ratios": versus.ratios[f]}
                for f in versus.estimates},
            # Each side's median CPU µs per request over the rounds of the ratios above:
            # the µs a CPU ratio is read in.
            "cpu_us_same_rounds": None if versus is None else versus.cpu_us,
        }

    return {
        "route": {"method": route.method, "path": route.path},
        "driver": driver.name,
        "method": {
            "statistic": "median of per-round values and of per-round ratios to the reference",
            "interval": "percentile bootstrap over rounds", "confidence": stats.CONFIDENCE,
            "resamples": stats.RESAMPLES, "seed": stats.SEED, "threshold": run.threshold,
            "min_rounds": stats.MIN_ROUNDS,
        },
        "slice_seconds": run.slice_seconds,
        "rounds": len(run.rounds), "rounds_kept": len(run.kept),
        "reference": run.configs[run.reference].label,
        "app_cpu_us_per_request": app_cost_us,
        "verdict": sentences,
        "warnings": notes,
        "configurations": [
            {
                "engine": config.engine, "loop": config.loop, "http": config.http,
                "label": config.label, "reference": index == run.reference,
                "saturated": run.saturated(index), "failed": run.failed(index),
                **figures(index),
                "slices": [{**r.slices[index].as_dict(), "round": number,
                            "position": r.order.index(index)}
                           for number, r in enumerate(run.rounds) if index in r.slices],
            }
            for index, config in enumerate(run.configs)
        ],
    }


def render(console: Console, summary: Summary, driver: drivers.Driver,
           app_cost_us: float | None, sentences: list[str], notes: list[str]) -> None:
    run = summary.run
    console.print(table(summary, driver))
    if app_cost_us is not None:
        console.print(f"app alone (in-process, no server): {app_cost_us:.1f} µs CPU per request")
    for note in notes:
        console.print(f"[yellow]warning:[/yellow] {note}", highlight=False)
    for sentence in sentences:
        console.print(sentence, highlight=False)
    failed = sum(run.failed(i) for i in range(len(run.configs)))
    if failed:
        console.print(f"[red]{failed} requests failed or were not 2xx.[/red]")
