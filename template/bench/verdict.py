"""The one sentence a benchmark ends with: how far apart, and what it costs."""

from __future__ import annotations

from bench.model import Measured
from bench.route import Route


def verdict(results: list[Measured], route: Route, app_cost_us: float | None) -> str:
    """One sentence: how far apart the engines are here, and what share is the server's."""
    ranked = sorted((m for m in results if m.median("requests_per_second")),
                    key=lambda m: m.median("requests_per_second") or 0, reverse=True)
    if not ranked:
        return "No configuration answered."
    unsaturated = [m.config.label for m in ranked if m.saturated is False]
    floor = (f" The driver could not saturate the server for {', '.join(unsaturated)} (its "
             "core was not kept busy: the driver or the route's own waiting capped the rate); "
             "these numbers are a floor, and CPU µs per request is the figure to compare."
             if unsaturated else "")
    if len(ranked) < 2:
        return f"{ranked[0].config.label}: {ranked[0].median('requests_per_second'):,.0f} "\
               f"requests/s on {route.path}.{floor}"
    best, worst = ranked[0], ranked[-1]
    ratio = (best.median("requests_per_second") or 0) / (worst.median("requests_per_second") or 1)
    sentence = f"{best.config.label} is {ratio:.2f}x {worst.config.label} on {route.path}"
    best_cpu, worst_cpu = best.median("cpu_us_per_request"), worst.median("cpu_us_per_request")
    if best_cpu and worst_cpu:
        dearer_cpu = max(best_cpu, worst_cpu)
        if app_cost_us:
            share = max(0.0, dearer_cpu - app_cost_us) / dearer_cpu
            sentence += (f"; the server is at most {share:.0%} of this route's cost "
                         f"({dearer_cpu:.1f} µs CPU per request, {app_cost_us:.1f} of them "
                         "the app's own)")
        difference = abs(worst_cpu - best_cpu)
        if best_cpu <= worst_cpu:
            sentence += (f"; switching to {best.config.label} saves {difference:.1f} µs of "
                         f"{worst_cpu:.1f} µs CPU per request")
        else:
            sentence += (f"; but it uses {difference:.1f} µs more CPU per request "
                         f"({best_cpu:.1f} against {worst_cpu:.1f} µs): faster here is not "
                         "cheaper")
    return sentence + "." + floor
