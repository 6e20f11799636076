"""What a benchmark measures: configurations, rounds and their figures.

Server CPU per request (user + system time of the server's process tree over the
counted window, divided by the responses) is the figure that stays steady on a noisy
machine; requests/s is only meaningful when the server kept its core busy, which the
saturation check reports.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from app.core import loops
from bench import drivers

SATURATED = 0.85  # share of the server's core below which rates are only a floor


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


@dataclass
class Round:
    load: drivers.LoadResult
    server_cpu_s: float | None

    @property
    def cpu_us_per_request(self) -> float | None:
        if self.server_cpu_s is None or not self.load.requests:
            return None
        return self.server_cpu_s / self.load.requests * 1e6

    @property
    def core_busy(self) -> float | None:
        return None if self.server_cpu_s is None else self.server_cpu_s / self.load.seconds

    def figure(self, name: str) -> float | None:
        """A figure of this round by name: its own, or its load result's."""
        source = self if name in ("cpu_us_per_request", "core_busy") else self.load
        return getattr(source, name)


@dataclass
class Measured:
    config: Config
    rounds: list[Round] = field(default_factory=list)

    def median(self, figure: str) -> float | None:
        values = [v for r in self.rounds if (v := r.figure(figure)) is not None]
        return statistics.median(values) if values else None

    def spread(self, figure: str) -> tuple[float, float] | None:
        values = [v for r in self.rounds if (v := r.figure(figure)) is not None]
        return (min(values), max(values)) if values else None

    @property
    def failed(self) -> int:
        return sum(r.load.failed + r.load.non_2xx for r in self.rounds)

    @property
    def saturated(self) -> bool | None:
        busy = self.median("core_busy")
        return None if busy is None else busy >= SATURATED


def configs_for(engines: list[str], loop_names: list[str], parsers: list[str],
                skip_refused: bool = False, workers: int = 1) -> list[Config]:
    """Every asked-for engine x loop x parser the matrix allows on this Python.

    With `skip_refused` (no engine named), a loop only some engines run is measured on
    those; otherwise a refused pair stops the bench with the matrix's sentence.
    """
    python = loops.python_version()
    chosen = []
    for engine in engines:
        allowed = [name for name in loops.engine_loops(engine, python)
                   if name == loops.AUTO or loops.is_installed(name)]
        wanted = allowed[1:] if loop_names == ["all"] else loop_names
        for loop in wanted:
            reason = loops.availability_refusal(engine, loop)
            if reason and skip_refused and loops.refusal_reason(engine, loop, python):
                continue
            if reason:
                raise ValueError(reason)
            for http in parsers if loops.ENGINE_SPECS[engine].parser_choice else [loops.AUTO]:
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
