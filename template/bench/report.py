"""Run a benchmark and show it: a table, one sentence, and optionally every figure as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import drivers, harness
from bench.app_cost import app_cpu_us_per_request
from bench.model import Config, Measured
from bench.route import Route
from bench.verdict import verdict


def _cell(measured: Measured, figure: str, fmt: str) -> str:
    median, spread = measured.median(figure), measured.spread(figure)
    if median is None or spread is None:
        return "n/a"
    if spread[0] == spread[1]:
        return format(median, fmt)
    return f"{format(median, fmt)} ({format(spread[0], fmt)}-{format(spread[1], fmt)})"


def table(results: list[Measured], driver: drivers.Driver) -> Table:
    out = Table(title=f"median (min-max) of each configuration's rounds; driver: {driver.name}")
    for column in ("engine / loop / parser", "requests/s", "p50 ms", "p95 ms", "p99 ms",
                   "failed", "non-2xx", "server CPU µs/req", "server core busy"):
        out.add_column(column, justify="left" if column.startswith("engine") else "right")
    for m in results:
        out.add_row(
            m.config.label, _cell(m, "requests_per_second", ",.0f"), _cell(m, "p50_ms", ".2f"),
            _cell(m, "p95_ms", ".2f"), _cell(m, "p99_ms", ".2f"),
            str(sum(r.load.failed for r in m.rounds)),
            str(sum(r.load.non_2xx for r in m.rounds)),
            _cell(m, "cpu_us_per_request", ".1f"), _cell(m, "core_busy", ".0%"),
        )
    return out


def as_json(results: list[Measured], route: Route, driver: drivers.Driver,
            app_cost_us: float | None, sentence: str) -> dict[str, object]:
    return {
        "route": {"method": route.method, "path": route.path},
        "driver": driver.name,
        "app_cpu_us_per_request": app_cost_us,
        "verdict": sentence,
        "configurations": [
            {
                "engine": m.config.engine, "loop": m.config.loop, "http": m.config.http,
                "label": m.config.label, "saturated": m.saturated, "failed": m.failed,
                "median": {f: m.median(f) for f in ("requests_per_second", "p50_ms", "p95_ms",
                                                    "p99_ms", "cpu_us_per_request", "core_busy")},
                "rounds": [{**r.load.as_dict(), "server_cpu_s": r.server_cpu_s,
                            "cpu_us_per_request": r.cpu_us_per_request,
                            "core_busy": r.core_busy} for r in m.rounds],
            }
            for m in results
        ],
    }


def run_and_report(configs: list[Config], route: Route, driver: drivers.Driver,
                   skipped: list[str], *, connections: int, seconds: float, rounds: int,
                   warmup: float, target: str | None, json_file: Path | None) -> int:
    """Measure, print, write JSON; returns how many requests failed or were not 2xx."""
    console = Console(width=max(Console().width, 140))
    console.print(f"driver: {driver.name}" + (f" ({driver.note})" if driver.note else "")
                  + (f"; passed over: {'; '.join(skipped)}" if skipped else ""))
    options = {"connections": connections, "seconds": seconds, "rounds": rounds,
               "warmup": warmup}
    if target:
        results = harness.measure_target(target, route, driver, **options)
        app_cost = None
    else:
        results = harness.measure(configs, route, driver, **options)
        try:
            app_cost = app_cpu_us_per_request(route)
        except ValueError as error:  # the route fails in-process too: no share to report
            console.print(f"app alone: not measured ({error})")
            app_cost = None
    sentence = verdict(results, route, app_cost)
    console.print(table(results, driver))
    if app_cost is not None:
        console.print(f"app alone (in-process, no server): {app_cost:.1f} µs CPU per request")
    console.print(sentence)
    if json_file:
        json_file.write_text(json.dumps(as_json(results, route, driver, app_cost, sentence),
                                        indent=2))
    failed = sum(m.failed for m in results)
    if failed:
        console.print(f"[red]{failed} requests failed or were not 2xx.[/red]")
    return failed
