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
    summary: str
    parser_choice: bool  # takes an HTTP parser (WEBSERVER_HTTP)
    ws_pings: bool  # can send WebSocket pings (WEBSERVER_WS_PING_INTERVAL)
    pathsend: bool  # advertises http.response.pathsend


ENGINE_SPECS: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec("uvicorn", "Python + C", parser_choice=True, ws_pings=True, pathsend=False),
        EngineSpec("granian", "Rust", parser_choice=False, ws_pings=False, pathsend=True),
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
    summary: str
    http2: bool = False


HTTP_PARSERS: dict[str, ParserSpec] = {
    spec.name: spec
    for spec in (
        ParserSpec("httptools", "httptools", "llhttp through Cython"),
        ParserSpec("h11", "h11", "pure Python"),
        ParserSpec("zttp", "zttp", "Zig; HTTP/1.1 and cleartext HTTP/2", http2=True),
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


def ws_ping_refusal(engine: str, interval: float) -> str | None:
    """WebSocket pings are off by default so both engines behave alike."""
    if interval > 0 and not ENGINE_SPECS[engine].ws_pings:
        pingers = _one_of([name for name, spec in ENGINE_SPECS.items() if spec.ws_pings])
        return (
            f"{engine} sends no WebSocket pings, so a ping interval cannot be honoured: "
            f"set WEBSERVER_WS_PING_INTERVAL=0 or use {pingers}."
        )
    return None
