"""The engine x loop x Python matrix: the one table of what can run with what.

The Copier questions, the settings, the launcher, the CLI, the docs table and the
tests all read this module. It is plain Python with no third-party imports, because
the template's Copier extension loads this very file before any dependency exists.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from typing import Literal

Engine = Literal["uvicorn", "granian"]
PythonVersion = tuple[int, int]

PYTHON_VERSIONS: tuple[str, ...] = ("3.11", "3.12", "3.13", "3.14")
AUTO = "auto"


@dataclass(frozen=True)
class EngineSpec:
    """What an engine does differently from the other (measured, see docs/engines.md)."""

    name: Engine
    parser_choice: bool  # takes an HTTP parser (WEBSERVER_HTTP)


ENGINE_SPECS: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec("uvicorn", parser_choice=True),
        EngineSpec("granian", parser_choice=False),
    )
}
ENGINES: tuple[Engine, ...] = tuple(ENGINE_SPECS)  # type: ignore[assignment]


@dataclass(frozen=True)
class LoopSpec:
    """One event loop: where it comes from and which engines can drive it."""

    name: str
    module: str  # must import for the loop to be usable; its classes live under it
    summary: str
    min_python: PythonVersion = (3, 11)
    # engine -> the value that engine's own `loop=` option takes for this loop
    engine_values: dict[str, str] = field(default_factory=dict)
    # engine -> why it is refused (a measured reason, quoted in the refusal)
    refused_because: dict[str, str] = field(default_factory=dict)


LOOPS: dict[str, LoopSpec] = {
    spec.name: spec
    for spec in (
        LoopSpec(
            "asyncio",
            "asyncio",
            "the standard library's selector loop",
            engine_values={"uvicorn": "asyncio", "granian": "asyncio"},
        ),
        LoopSpec(
            "uvloop",
            "uvloop",
            "libuv through Cython",
            engine_values={"uvicorn": "uvloop", "granian": "uvloop"},
        ),
        LoopSpec(
            "rloop",
            "rloop",
            "Rust, from the granian authors",
            engine_values={"granian": "rloop"},
            refused_because={
                "uvicorn": "under uvicorn, HTTP works but the WebSocket upgrade fails "
                "because rloop's transport cannot switch protocol "
                "(measured with uvicorn 0.54 and rloop 0.5)",
            },
        ),
        LoopSpec(
            "zuvloop",
            "zuvloop",
            "Zig, wheels for CPython 3.14+ only",
            min_python=(3, 14),
            engine_values={"uvicorn": "zuvloop"},
            refused_because={
                "granian": "granian 2.8 has no zuvloop choice "
                "(its loops are asyncio, uvloop and rloop)",
            },
        ),
    )
}
LOOP_POLICIES: tuple[str, ...] = (AUTO, *LOOPS)

# `auto` is resolved here, never by the engine: granian's own auto picks rloop first,
# so handing it "auto" would make the two engines run different loops.
AUTO_PREFERENCE: tuple[str, ...] = ("uvloop", "asyncio")


def python_version(text: str | None = None) -> PythonVersion:
    """'3.13' -> (3, 13); None -> the running interpreter."""
    if text is None:
        return sys.version_info[:2]
    major, minor = str(text).split(".")[:2]
    return int(major), int(minor)


def version_text(version: PythonVersion) -> str:
    return f"{version[0]}.{version[1]}"


def importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def is_installed(loop: str) -> bool:
    return importable(LOOPS[loop].module)


def engine_loops(engine: str, python: PythonVersion) -> tuple[str, ...]:
    """The loops `engine` can run on `python`, `auto` first."""
    allowed = [
        spec.name
        for spec in LOOPS.values()
        if engine in spec.engine_values and python >= spec.min_python
    ]
    return (AUTO, *allowed)


def _one_of(values: tuple[str, ...] | list[str]) -> str:
    values = list(values)
    if len(values) == 1:
        return values[0]
    return ", ".join(values[:-1]) + " or " + values[-1]


def refusal_reason(engine: str, loop: str, python: PythonVersion) -> str | None:
    """Why `engine` cannot run `loop` on `python`, without the list of what it can."""
    if engine not in ENGINES:
        return f"Unknown engine {engine!r}: choose {_one_of(ENGINES)}"
    if loop not in LOOP_POLICIES:
        return f"Unknown loop {loop!r}: choose {_one_of(LOOP_POLICIES)}"
    if loop == AUTO:
        return None
    spec = LOOPS[loop]
    if engine not in spec.engine_values:
        others = [e for e in ENGINES if e in spec.engine_values]
        return f"{loop} needs the {_one_of(others)} engine: {spec.refused_because[engine]}"
    if python < spec.min_python:
        return f"{loop} needs Python {version_text(spec.min_python)} or newer ({spec.summary})"
    return None


def refusal(engine: str, loop: str, python: PythonVersion) -> str | None:
    """Why `engine` cannot run `loop` on `python` (one sentence), or None when it can.

    Installation is not checked here: this is the rule the Copier questions apply
    before any package exists. `availability_refusal` adds the installed check.
    """
    reason = refusal_reason(engine, loop, python)
    if reason is None or engine not in ENGINES:
        return reason and f"{reason}."
    accepted = _one_of(engine_loops(engine, python))
    return f"{reason}; on Python {version_text(python)} {engine} accepts {accepted}."


def resolve(engine: str, loop: str, python: PythonVersion | None = None) -> str:
    """The concrete loop to run: `auto` becomes the first installed preference."""
    if loop != AUTO:
        return loop
    python = python or python_version()
    allowed = engine_loops(engine, python)
    return next(
        name for name in AUTO_PREFERENCE if name in allowed and is_installed(name)
    )


def availability_refusal(engine: str, loop: str) -> str | None:
    """`refusal` for this interpreter, plus: is the chosen loop installed here?"""
    python = python_version()
    reason = refusal(engine, loop, python)
    if reason or loop == AUTO or is_installed(loop):
        return reason
    usable = [name for name in engine_loops(engine, python) if name == AUTO or is_installed(name)]
    return (
        f"{loop} is not installed in this environment "
        f"(install the {LOOPS[loop].module} package); here {engine} can run {_one_of(usable)}."
    )


def engine_value(engine: str, loop: str) -> str:
    """What to pass as `loop=` to the engine for a resolved, allowed loop."""
    return LOOPS[loop].engine_values[engine]


@dataclass(frozen=True)
class MatrixCell:
    python: str
    engine: str
    loop: str
    refusal: str | None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def matrix(pythons: tuple[str, ...] = PYTHON_VERSIONS) -> list[MatrixCell]:
    """Every python x engine x loop policy, with its verdict."""
    return [
        MatrixCell(py, engine, loop, refusal(engine, loop, python_version(py)))
        for py in pythons
        for engine in ENGINES
        for loop in LOOP_POLICIES
    ]


@dataclass(frozen=True)
class ParserSpec:
    """An HTTP parser uvicorn can use (granian parses in Rust and has no choice)."""

    name: str
    module: str
    http2: bool = False


HTTP_PARSERS: dict[str, ParserSpec] = {
    spec.name: spec
    for spec in (
        ParserSpec("httptools", "httptools"),  # llhttp through Cython
        ParserSpec("h11", "h11"),  # pure Python
        ParserSpec("zttp", "zttp", http2=True),  # Zig; HTTP/1.1 and cleartext HTTP/2
    )
}
HTTP_POLICIES: tuple[str, ...] = (AUTO, *HTTP_PARSERS)
PARSER_ENGINE = next(name for name, spec in ENGINE_SPECS.items() if spec.parser_choice)
GRANIAN_HTTP = "hyper"
# uvicorn's own `auto`, kept as is: httptools when installed, else h11; never zttp.
HTTP_AUTO_PREFERENCE: tuple[str, ...] = ("httptools", "h11")


def http_refusal(engine: str, http: str, http2: bool = False) -> str | None:
    """Why `engine` cannot use parser `http` (with HTTP/2 or not), or None."""
    if http not in HTTP_POLICIES:
        return f"Unknown HTTP parser {http!r}: choose {_one_of(HTTP_POLICIES)}."
    if not ENGINE_SPECS[engine].parser_choice and http != AUTO:
        return (
            f"{engine} parses HTTP itself (Rust, {GRANIAN_HTTP}) and has no parser choice; "
            f"leave the parser at auto, or use {PARSER_ENGINE} for {http}."
        )
    if http2 and ENGINE_SPECS[engine].parser_choice and (
        http == AUTO or not HTTP_PARSERS[http].http2
    ):
        capable = [spec.name for spec in HTTP_PARSERS.values() if spec.http2]
        return (
            f"HTTP/2 under {engine} needs the {_one_of(capable)} parser "
            f"(the parser is {http}); granian serves HTTP/2 with no parser choice."
        )
    return None


def http_availability_refusal(engine: str, http: str, http2: bool = False) -> str | None:
    reason = http_refusal(engine, http, http2)
    if reason or http == AUTO or importable(HTTP_PARSERS[http].module):
        return reason
    return f"the {http} parser is not installed in this environment (install the {http} package)."


def resolve_http(engine: str, http: str = AUTO) -> str:
    if not ENGINE_SPECS[engine].parser_choice:
        return GRANIAN_HTTP
    if http != AUTO:
        return http
    return next(
        name for name in HTTP_AUTO_PREFERENCE if importable(HTTP_PARSERS[name].module)
    )


@dataclass(frozen=True)
class FeatureSpec:
    """How each engine honours a setting (app/core/setting_specs.py), or why it cannot."""

    setting: str
    # engine -> the engine's own option that carries the setting
    honoured_by: dict[str, str]
    # engine -> why it cannot (a measured reason, quoted in the refusal)
    refused_because: dict[str, str] = field(default_factory=dict)
    inactive: object = None  # the value that asks nothing of the engine
    # engine -> the least value it accepts (besides `inactive`), and why
    floor: dict[str, tuple[int, str]] = field(default_factory=dict)


FEATURES: dict[str, FeatureSpec] = {
    spec.setting: spec
    for spec in (
        FeatureSpec("threads", {"granian": "runtime_threads"},
                    {"uvicorn": "uvicorn runs each worker on one event-loop thread; scale "
                                "it with WEBSERVER_WORKERS"}, inactive=1),
        FeatureSpec("backlog", {"uvicorn": "backlog", "granian": "backlog"}),
        FeatureSpec("max_concurrency",
                    {"uvicorn": "limit_concurrency (503 past the cap)",
                     "granian": "backpressure (requests past the cap wait)"}, inactive=0),
        FeatureSpec("keepalive_timeout",
                    {"uvicorn": "timeout_keep_alive",
                     "granian": "http1_settings.header_read_timeout (also bounds the time "
                                "to send a request's headers)"}),
        FeatureSpec("websockets", {"uvicorn": "ws='none' when false",
                                   "granian": "websockets"}),
        FeatureSpec("ws_ping_interval", {"uvicorn": "ws_ping_interval, 20 s pong timeout"},
                    {"granian": "granian sends no WebSocket pings"}, inactive=0),
        FeatureSpec("worker_max_requests",
                    {"uvicorn": "limit_max_requests + limit_max_requests_jitter (10 %), "
                                "workers replaced by the launcher's supervisor"},
                    {"granian": "granian 2.8 cannot recycle a worker by request count; "
                                "WEBSERVER_WORKER_LIFETIME and WEBSERVER_WORKER_MAX_MEMORY "
                                "recycle it by age and by memory"}, inactive=0),
        FeatureSpec("worker_lifetime", {"granian": "workers_lifetime"},
                    {"uvicorn": "uvicorn cannot recycle a worker by age; "
                                "WEBSERVER_WORKER_MAX_REQUESTS recycles it by request count"},
                    inactive=0,
                    floor={"granian": (60, "granian recycles a worker after 60 seconds "
                                           "at the soonest")}),
        FeatureSpec("worker_max_memory", {"granian": "workers_max_rss"},
                    {"uvicorn": "uvicorn does not watch its workers' memory; "
                                "WEBSERVER_WORKER_MAX_REQUESTS recycles them by request "
                                "count"}, inactive=0),
        FeatureSpec("respawn_failed_workers",
                    {"uvicorn": "the launcher's supervisor (uvicorn's, with respawning made "
                                "a choice)", "granian": "respawn_failed_workers"}),
        FeatureSpec("access_log", {"uvicorn": "the app's access log middleware (uvicorn's "
                                              "own off)",
                                   "granian": "the app's access log middleware (granian's "
                                              "own off)"}),
        FeatureSpec("graceful_timeout", {"uvicorn": "timeout_graceful_shutdown",
                                         "granian": "workers_kill_timeout"}),
    )
}


def feature_refusal(engine: str, setting: str, value: object) -> str | None:
    """Why `engine` cannot honour `setting` at `value` (one sentence), or None."""
    spec = FEATURES.get(setting)
    if spec is None or value == spec.inactive:
        return None
    env = f"WEBSERVER_{setting.upper()}"
    if engine in spec.honoured_by:
        least, why = spec.floor.get(engine, (None, ""))
        if least is not None and isinstance(value, int) and value < least:
            return f"{env}={value} is refused: {why}."
        return None
    shown = str(value).lower() if isinstance(value, bool) else value
    return (
        f"{env}={shown} cannot be honoured by {engine}: {spec.refused_because[engine]}; "
        f"use {_one_of(list(spec.honoured_by))}, or set {env}={spec.inactive}."
    )
