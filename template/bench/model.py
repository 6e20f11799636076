"""What a benchmark measures: configurations, slices, rounds, and the figures of each.

A slice is one configuration under load for a few seconds; a round is one slice of each
configuration, back to back, the order rotating from round to round. Figures compared
between configurations are per-round ratios, so a slow spell falls on both sides; rounds
whose server or driver cores were taken away (machine.py) are replaced. Server CPU per
request (the process tree's user + system time over the responses) moves less than
requests/s on a noisy machine; requests/s is the server's speed only when the server
kept its core busy, which the saturation check reports.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from app.core import loops
from app.core.settings import served
from bench import drivers, stats
from bench.machine import Shares
from bench.route import Route

SATURATED = 0.85  # share of the server's core below which rates are only a floor
FIGURES = ("requests_per_second", "cpu_us_per_request")


@dataclass(frozen=True)
class Launch:
    """How the harness starts a server: `python -m <module> serve ...` with `env` added,
    ready once `ready` answers 200."""

    module: str = "cli"
    env: tuple[tuple[str, str], ...] = ()
    ready: Route = field(default_factory=Route)  # /health/


@dataclass(frozen=True)
class Config:
    engine: str
    loop: str
    http: str = loops.AUTO
    workers: int = 1
    target: str | None = None  # a running server measured as it is

    @property
    def label(self) -> str:
        if self.target:
            return self.target
        parser = loops.resolve_http(self.engine, self.http)
        workers = f" / {self.workers} workers" if self.workers > 1 else ""
        return f"{self.engine} / {loops.resolve(self.engine, self.loop)} / {parser}{workers}"

    def launch(self) -> Launch:
        """The project's own launcher serving the project's app."""
        return Launch()


@dataclass
class Slice:
    load: drivers.LoadResult
    server_cpu_s: float | None
    server_core: Shares | None = None
    driver_cores: Shares | None = None
    set_aside: str | None = None  # why this slice's core(s) were not its own

    @property
    def requests_per_second(self) -> float | None:
        return self.load.requests_per_second if self.load.requests else None

    @property
    def cpu_us_per_request(self) -> float | None:
        if self.server_cpu_s is None or not self.load.requests:
            return None
        return self.server_cpu_s / self.load.requests * 1e6

    @property
    def core_busy(self) -> float | None:
        if self.server_cpu_s is None or not self.load.seconds:
            return None
        return self.server_cpu_s / self.load.seconds

    def figure(self, name: str) -> float | None:
        """A figure of this slice by name: its own, or its load result's."""
        return getattr(self if hasattr(type(self), name) else self.load, name)

    def as_dict(self) -> dict[str, object]:
        return {**self.load.as_dict(), "server_cpu_s": self.server_cpu_s,
                "cpu_us_per_request": self.cpu_us_per_request, "core_busy": self.core_busy,
                "server_core": self.server_core and self.server_core.as_dict(),
                "driver_cores": self.driver_cores and self.driver_cores.as_dict(),
                "set_aside": self.set_aside}


@dataclass
class Round:
    """One slice of each configuration, in `order` (indexes into the run's configs)."""

    order: list[int]
    slices: dict[int, Slice] = field(default_factory=dict)

    @property
    def set_aside(self) -> list[str]:
        return [s.set_aside for s in self.slices.values() if s.set_aside]


@dataclass
class Run:
    configs: list[Config]
    reference: int  # index of the configuration the others are compared with
    slice_seconds: float
    duration: float = 0.0  # counted seconds asked for, per configuration
    rounds: list[Round] = field(default_factory=list)
    threshold: float = stats.THRESHOLD

    @property
    def kept(self) -> list[Round]:
        return [r for r in self.rounds if not r.set_aside]

    def values(self, index: int, figure: str) -> list[float]:
        """A configuration's figure, one value per kept round."""
        return [v for r in self.kept if (v := r.slices[index].figure(figure)) is not None]

    def pairs(self, index: int, figure: str) -> list[tuple[float, float]]:
        """(this configuration's figure, the reference's) in each kept round that has
        both: the rounds every comparison with the reference is made from."""
        pairs = []
        for r in self.kept:
            mine = r.slices[index].figure(figure)
            theirs = r.slices[self.reference].figure(figure)
            if mine is not None and theirs:
                pairs.append((mine, theirs))
        return pairs

    def ratios(self, index: int, figure: str) -> list[float]:
        """A configuration's figure over the reference's, one ratio per kept round."""
        return [mine / theirs for mine, theirs in self.pairs(index, figure)]

    def failed(self, index: int) -> int:
        return sum(r.slices[index].load.failed + r.slices[index].load.non_2xx
                   for r in self.rounds if index in r.slices)

    def saturated(self, index: int) -> bool | None:
        busy = self.values(index, "core_busy")
        return None if not busy else statistics.median(busy) >= SATURATED


def configs_for(engines: list[str], loop_names: list[str], parsers: list[str],
                skip_refused: bool = False, workers: int = 1,
                serving: tuple[tuple[str, ...], tuple[str, ...]] | None = None) -> list[Config]:
    """Every asked-for engine x loop x parser the matrix allows on this Python.

    With `skip_refused` (no engine named), a loop only some engines run is measured on
    those; otherwise a refused pair stops the bench with the matrix's sentence.
    `serving`: the engines and loops served, when not this project's settings.
    """
    python = loops.python_version()
    engines_served, loops_served = serving or served()
    chosen = []
    for engine in engines:
        allowed = [name for name in loops.engine_loops(engine, python)
                   if name == loops.AUTO or loops.is_installed(name)]
        wanted = ([name for name in allowed[1:] if name in loops_served]
                  if loop_names == ["all"] else loop_names)
        for loop in wanted:
            if skip_refused and loops.refusal_reason(engine, loop, python):
                continue
            reason = (loops.availability_refusal(engine, loop)
                      or loops.served_refusal(engine, loop, engines_served, loops_served))
            if reason:
                raise ValueError(reason)
            # Each engine gets the asked parsers it takes (unknown names get refused).
            takes = [http for http in parsers if http == loops.AUTO
                     or http not in loops.HTTP_PARSERS
                     or http in loops.ENGINE_SPECS[engine].parsers]
            for http in takes or [loops.AUTO]:
                reason = loops.http_availability_refusal(engine, http)
                if reason:
                    raise ValueError(reason)
                config = Config(engine, loop, http, workers)
                if config not in chosen:
                    chosen.append(config)
    if not chosen:
        raise ValueError(f"no engine runs {', '.join(loop_names)} on this Python; "
                         f"`engines` lists what each accepts.")
    return chosen
