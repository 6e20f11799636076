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

Engine = Literal["uvicorn", "granian", "gunicorn", "hypercorn"]
PythonVersion = tuple[int, int]

PYTHON_VERSIONS: tuple[str, ...] = ("3.11", "3.12", "3.13", "3.14", "3.15")
AUTO = "auto"
# The framework under the app (the `framework` answer), and the Pythons it runs on here:
# FastAPI, or notslowapi (FastAPI's API, a Starlette of its own; docs/engines.md).
FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "fastapi": PYTHON_VERSIONS,
    "notslowapi": PYTHON_VERSIONS,
}


@dataclass(frozen=True)
class DatabaseSpec:
    """A database the project can be built with (the `database` answer): SQLAlchemy's
    asyncio engine over one driver, and the loops that driver cannot run on, measured
    (docs/database.md)."""

    name: str
    driver: str  # the driver's module (a dependency of the project)
    scheme: str  # the URL's start, SQLAlchemy's dialect+driver
    default_url: str
    # loop -> why the driver cannot run on it, in the user's terms (the refusal)
    refused_loops: dict[str, str] = field(default_factory=dict)


NO_DATABASE = "none"
# SQLAlchemy's asyncio extension drives its drivers through asyncio's API.
NOT_ON_TRIO = ("SQLAlchemy's asyncio engine and {driver} need an asyncio event loop, and "
               "trio is not one")
DATABASES: dict[str, DatabaseSpec] = {
    spec.name: spec
    for spec in (
        DatabaseSpec(NO_DATABASE, "", "", ""),
        DatabaseSpec("sqlite", "aiosqlite", "sqlite+aiosqlite",
                     "sqlite+aiosqlite:///data/app.db",
                     refused_loops={"trio": NOT_ON_TRIO.format(driver="aiosqlite")}),
        DatabaseSpec("postgresql", "asyncpg", "postgresql+asyncpg",
                     "postgresql+asyncpg://app@127.0.0.1:5432/app",
                     refused_loops={
                         "trio": NOT_ON_TRIO.format(driver="asyncpg"),
                         "rloop": "asyncpg cannot connect on rloop: rloop's transports refuse "
                         "the change of protocol its connect makes (NotImplementedError)",
                     }),
    )
}


@dataclass(frozen=True)
class EngineSpec:
    """What an engine does differently from the others (measured, see docs/engines.md)."""

    name: Engine
    summary: str
    # The parser it always uses, where WEBSERVER_HTTP has no choice under it (granian's,
    # in Rust); empty when it takes parsers (HTTP_PARSERS says which).
    own_parser: str = ""
    # What `auto` resolves to: the first installed of these (the engine's own auto).
    http_auto: tuple[str, ...] = ()
    # Cleartext HTTP/2 with any parser; else only with a parser that carries it (zttp).
    http2_any_parser: bool = False

    @property
    def parsers(self) -> tuple[str, ...]:
        """The parsers WEBSERVER_HTTP may name under this engine, besides auto."""
        return tuple(name for name, spec in HTTP_PARSERS.items() if self.name in spec.engine_values)

    @property
    def parser_choice(self) -> bool:
        return bool(self.parsers)


ENGINE_SPECS: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec("uvicorn", "Python, with a parser in C, Zig or Python",
                   http_auto=("httptools", "h11")),
        EngineSpec("granian", "Rust (hyper), its workers supervised in Rust",
                   own_parser="hyper", http2_any_parser=True),
        EngineSpec("gunicorn", "its native asgi worker under gunicorn's arbiter",
                   http_auto=("h1c", "python"), http2_any_parser=True),
        EngineSpec("hypercorn", "Python (h11, h2; aioquic for HTTP/3)",
                   own_parser="h11", http2_any_parser=True),
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
    # An asyncio event loop; else (trio) the template's layers take their own branch
    # for it, which tests/test_other_libraries.py runs in every project.
    asyncio: bool = True
    # engine -> the value that engine's own `loop=` option takes for this loop
    engine_values: dict[str, str] = field(default_factory=dict)
    # engine -> why it is refused, in the user's terms (the refusal's sentence)
    refused_briefly: dict[str, str] = field(default_factory=dict)
    # engine -> the measured reason behind it, with the engine's own option names
    # (docs/engines.md, "Evidence")
    refused_because: dict[str, str] = field(default_factory=dict)
    # engine -> what was run to accept it (docs/engines.md, "Evidence")
    verified: dict[str, str] = field(default_factory=dict)


GUNICORN_BRIEFLY = "gunicorn's asgi worker runs asyncio or uvloop only"
GUNICORN_LOOPS = ("gunicorn 27's asgi_loop takes auto, asyncio or uvloop only: "
                  "`--asgi-loop {loop}`, or a module:callable factory, stops it with "
                  "`Invalid ASGI loop`")
# What accepting a pair took (docs/engines.md, "Evidence"): the project's own tests on
# it, WEBSERVER_LOOP set to the loop: `pytest tests/test_boot.py tests/test_drain.py
# tests/test_dev_reload.py -k ENGINE`.
PASSED = ("the project's boot, request-set (Range and WebSockets included), two-worker, "
          "drain (saturation included) and dev-reload tests pass ({where})")
ON_313 = PASSED.format(where="Python 3.13 and 3.15.0, uvicorn 0.54 and 0.55, "
                             "granian 2.8.9, gunicorn 27.0.1")
ON_HYPERCORN = PASSED.format(where="Python 3.13, Hypercorn 0.18.0")
ON_TRIO = (PASSED.format(where="Python 3.13, Hypercorn 0.18.0, trio 0.35.0")
           + "; so do its limits, restarts and TLS tests (HTTP/3 included)")
HYPERCORN_BRIEFLY = "the template runs Hypercorn on asyncio, uvloop or trio"
ASYNCIO_ONLY = "{engine} runs asyncio event loops only, and trio is not one"

LOOPS: dict[str, LoopSpec] = {
    spec.name: spec
    for spec in (
        LoopSpec(
            "asyncio",
            "asyncio",
            "the standard library's selector loop",
            engine_values={"uvicorn": "asyncio", "granian": "asyncio",
                           "gunicorn": "asyncio", "hypercorn": "asyncio"},
            verified={"uvicorn": ON_313, "granian": ON_313, "gunicorn": ON_313,
                      "hypercorn": ON_HYPERCORN},
        ),
        LoopSpec(
            "uvloop",
            "uvloop",
            "libuv through Cython",
            engine_values={"uvicorn": "uvloop", "granian": "uvloop", "gunicorn": "uvloop",
                           "hypercorn": "uvloop"},
            verified={"uvicorn": ON_313, "granian": ON_313, "gunicorn": ON_313,
                      "hypercorn": ON_HYPERCORN},
        ),
        LoopSpec(
            "rloop",
            "rloop",
            "Rust, from the granian authors",
            engine_values={"granian": "rloop"},
            verified={"granian": ON_313},
            refused_briefly={
                "uvicorn": "uvicorn on rloop loses WebSocket connections and requests at "
                "shutdown",
                "gunicorn": GUNICORN_BRIEFLY,
                "hypercorn": "Hypercorn cannot listen on rloop",
            },
            refused_because={
                "hypercorn": "Hypercorn 0.18 served on rloop 0.5 fails with EBADF: rloop "
                "detaches the socket handed to create_server(sock=...)",
                "uvicorn": "uvicorn 0.55 on rloop 0.5 (as `rloop:new_event_loop`) serves "
                "HTTP, but never answers a WebSocket handshake (the client times out), "
                "and SIGTERM then waits on that connection until killed (uvicorn 0.54 "
                "also lost 5-49 of ~900 requests sent before SIGTERM)",
                "gunicorn": GUNICORN_LOOPS.format(loop="rloop"),
            },
        ),
        LoopSpec(
            "zuvloop",
            "zuvloop",
            "Zig, wheels for CPython 3.14+ only",
            min_python=(3, 14),
            engine_values={"uvicorn": "zuvloop"},
            verified={"uvicorn": PASSED.format(where="Python 3.14.8 and 3.15.0, uvicorn "
                                                     "0.54 and 0.55, zuvloop 0.0.17")},
            refused_briefly={
                "granian": "granian runs its own list of loops (asyncio, uvloop, rloop), "
                "which zuvloop is not on",
                "gunicorn": GUNICORN_BRIEFLY,
                "hypercorn": HYPERCORN_BRIEFLY,
            },
            refused_because={
                "hypercorn": "Hypercorn 0.18's worker classes are asyncio, uvloop and "
                "trio; zuvloop was not tried under it",
                "granian": "granian 2.8.9's loop option takes asyncio, uvloop, rloop "
                "and winloop; another loop goes only in its private registry "
                "(granian._loops), which is patching granian",
                "gunicorn": GUNICORN_LOOPS.format(loop="zuvloop"),
            },
        ),
        LoopSpec(
            "trio",
            "trio",
            "structured concurrency, not asyncio; FastAPI runs on it through AnyIO",
            asyncio=False,
            engine_values={"hypercorn": "trio"},
            verified={"hypercorn": ON_TRIO},
            refused_briefly={
                "uvicorn": ASYNCIO_ONLY.format(engine="uvicorn"),
                "granian": ASYNCIO_ONLY.format(engine="granian"),
                "gunicorn": GUNICORN_BRIEFLY,
            },
            refused_because={
                "uvicorn": "uvicorn 0.55's loop option takes asyncio event loops only "
                "(LOOP_FACTORIES: none, auto, asyncio, uvloop, zuvloop, or a factory of "
                "an asyncio loop); trio has no asyncio loop to give it",
                "granian": "granian 2.8.9's loop option takes asyncio, uvloop, rloop "
                "and winloop, all asyncio loops",
                "gunicorn": GUNICORN_LOOPS.format(loop="trio"),
            },
        ),
    )
}
LOOP_POLICIES: tuple[str, ...] = (AUTO, *LOOPS)
WHY_REFUSED = "why: `make engines`, or docs/engines.md"  # where the measured reasons are

# `auto` is resolved here, never by the engine (granian's own auto picks rloop first):
# the fastest loop the engine accepts on this Python and has installed, as measured
# with `bench engines --loop all` (docs/engines.md): zuvloop (uvicorn, 3.14+), then
# uvloop, then asyncio. rloop measured no faster than uvloop on granian.
AUTO_PREFERENCE: tuple[str, ...] = ("zuvloop", "uvloop", "asyncio")


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


def framework_refusal(framework: str, python: PythonVersion) -> str | None:
    """Why a project cannot be built on `framework` under `python`, or None."""
    if framework not in FRAMEWORKS:
        return f"Unknown framework {framework!r}: choose {_one_of(tuple(FRAMEWORKS))}"
    if version_text(python) not in FRAMEWORKS[framework]:
        return (f"{framework} does not run on Python {version_text(python)} here: choose "
                f"Python {_one_of(FRAMEWORKS[framework])}, or the fastapi framework")
    return None


def database_refusal(database: str, loops_: tuple[str, ...]) -> str | None:
    """Why a project on `database` cannot serve one of `loops_` (one sentence), or None."""
    spec = DATABASES[database]
    refused = [loop for loop in loops_ if loop in spec.refused_loops]
    if not refused:
        return None
    loop = refused[0]
    runs = _one_of([name for name in LOOPS if name not in spec.refused_loops])
    return (f"{database} cannot be served on {loop}: {spec.refused_loops[loop]}; a project "
            f"with {database} serves {runs} (why: docs/database.md).")


def database_loops(database: str, served: tuple[str, ...]) -> tuple[str, ...]:
    """The served loops the database's driver runs on."""
    refused = DATABASES[database].refused_loops
    return tuple(loop for loop in served if loop not in refused)


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
        return f"{loop} needs the {_one_of(others)} engine: {spec.refused_briefly[engine]}"
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
    return (f"{reason}; on Python {version_text(python)} {engine} accepts {accepted} "
            f"({WHY_REFUSED}).")


def auto_choices(engine: str, python: PythonVersion,
                 served: tuple[str, ...] = tuple(LOOPS)) -> tuple[str, ...]:
    """The loops `auto` may pick for `engine` on `python`, best first: the preferences
    the engine runs there and the project serves (installed or not)."""
    allowed = engine_loops(engine, python)
    return tuple(name for name in AUTO_PREFERENCE if name in allowed and name in served)


def resolve(engine: str, loop: str, python: PythonVersion | None = None,
            served: tuple[str, ...] = tuple(LOOPS)) -> str:
    """The concrete loop to run: `auto` becomes the first installed preference among the
    loops the project serves (asyncio when it serves none of them)."""
    if loop != AUTO:
        return loop
    choices = auto_choices(engine, python or python_version(), served)
    return next((name for name in choices if is_installed(name)), "asyncio")


def names(listed: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """'uvicorn, granian' (a setting) or a list (a Copier answer) -> the names."""
    if isinstance(listed, str):
        listed = listed.strip().strip("[]").split(",")
    return tuple(name.strip().strip("'\"") for name in listed if name.strip())


def served_refusal(engine: str, loop: str, engines: tuple[str, ...],
                   served_loops: tuple[str, ...], python: PythonVersion | None = None,
                   ) -> str | None:
    """Why the project does not serve `engine` on `loop` (one sentence), or None. The
    project's answers say what it serves and its tests run (served_engines,
    served_loops); WEBSERVER_SERVED_ENGINES and _LOOPS change it on one machine.
    `auto` needs a served loop the engine runs on `python` (this interpreter's)."""
    python = python or python_version()
    unknown = next((name for name in engines if name not in ENGINES), None)
    if unknown or not engines:
        return (f"WEBSERVER_SERVED_ENGINES names {unknown!r}, not an engine: list some of "
                f"{', '.join(ENGINES)}." if unknown else
                "WEBSERVER_SERVED_ENGINES is empty: list the engines this project serves.")
    unknown = next((name for name in served_loops if name not in LOOPS), None)
    if unknown or not served_loops:
        return (f"WEBSERVER_SERVED_LOOPS names {unknown!r}, not a loop: list some of "
                f"{', '.join(LOOPS)}." if unknown else
                "WEBSERVER_SERVED_LOOPS is empty: list the loops this project serves.")
    if engine not in engines:
        return _not_served("engine", engine, engines)
    if loop != AUTO and loop not in served_loops:
        return _not_served("loop", loop, served_loops)
    if loop == AUTO and resolve(engine, AUTO, python, served_loops) not in served_loops:
        runs = ", ".join(name for name in engine_loops(engine, python)[1:])
        return (f"none of the loops this project serves ({', '.join(served_loops)}) runs "
                f"under {engine} on Python {version_text(python)}, which takes {runs}: add "
                f"one to WEBSERVER_SERVED_LOOPS, or to the answer served_loops.")
    return None


def _not_served(kind: str, name: str, served: tuple[str, ...]) -> str:
    question = f"served_{kind}s"
    wider = ", ".join((*served, name))
    return (f"this project does not serve the {kind} {name} (it serves {', '.join(served)}): "
            f"add it to WEBSERVER_{question.upper()} to run it here, or to the project's "
            f"answers to serve and test it everywhere: "
            f"`copier update --trust --defaults --data '{question}=[{wider}]'`.")


def served_pairs(engines: tuple[str, ...], served_loops: tuple[str, ...],
                 python: PythonVersion) -> list[tuple[str, str]]:
    """Every engine x loop pair the project serves and the matrix accepts on `python`."""
    return [(engine, loop) for engine in ENGINES if engine in engines
            for loop in engine_loops(engine, python)[1:] if loop in served_loops]


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
class ParserSpec:
    """An HTTP parser WEBSERVER_HTTP can name, and the engines that take it (granian
    parses in Rust and takes none)."""

    name: str
    module: str  # must import for the parser to be usable
    summary: str
    # engine -> the value that engine's own parser option takes for this parser
    engine_values: dict[str, str]
    http2: bool = False  # carries cleartext HTTP/2 itself (see EngineSpec.http2_any_parser)


HTTP_PARSERS: dict[str, ParserSpec] = {
    spec.name: spec
    for spec in (
        ParserSpec("httptools", "httptools", "llhttp through Cython",
                   {"uvicorn": "httptools"}),
        ParserSpec("h11", "h11", "pure Python", {"uvicorn": "h11"}),
        ParserSpec("zttp", "zttp", "Zig; HTTP/1.1 and cleartext HTTP/2", {"uvicorn": "zttp"},
                   http2=True),
        # gunicorn's `fast`: the gunicorn-h1c package, published as source only, so not a
        # dependency (building it needs a C compiler the slim image lacks).
        ParserSpec("h1c", "gunicorn_h1c", "picohttpparser through C (gunicorn-h1c, "
                   "not installed by default)", {"gunicorn": "fast"}),
        ParserSpec("python", "gunicorn", "gunicorn's own, pure Python", {"gunicorn": "python"}),
    )
}
HTTP_POLICIES: tuple[str, ...] = (AUTO, *HTTP_PARSERS)


def http_refusal(engine: str, http: str, http2: bool = False) -> str | None:
    """Why `engine` cannot use parser `http` (with HTTP/2 or not), or None."""
    if http not in HTTP_POLICIES:
        return f"Unknown HTTP parser {http!r}: choose {_one_of(HTTP_POLICIES)}."
    spec = ENGINE_SPECS[engine]
    if http != AUTO and http not in spec.parsers:
        takers = [name for name in ENGINES if name in HTTP_PARSERS[http].engine_values]
        if not spec.parser_choice:
            return (
                f"{engine} parses HTTP itself ({spec.own_parser}) and has no parser "
                f"choice; leave the parser at auto, or use {_one_of(takers)} for {http}."
            )
        return (f"{http} is a parser of {_one_of(takers)}, not of {engine}: "
                f"{engine} takes {_one_of([AUTO, *spec.parsers])}.")
    if http2 and not spec.http2_any_parser and (http == AUTO or not HTTP_PARSERS[http].http2):
        capable = [name for name in spec.parsers if HTTP_PARSERS[name].http2]
        anyway = [name for name in ENGINES if ENGINE_SPECS[name].http2_any_parser]
        return (
            f"HTTP/2 under {engine} needs the {_one_of(capable)} parser "
            f"(the parser is {http}); {_one_of(anyway)} serve HTTP/2 with any parser."
        )
    return None


def http_availability_refusal(engine: str, http: str, http2: bool = False) -> str | None:
    reason = http_refusal(engine, http, http2)
    if reason or http == AUTO or importable(HTTP_PARSERS[http].module):
        return reason
    package = HTTP_PARSERS[http].module.replace("_", "-")
    return (f"the {http} parser is not installed in this environment (install the "
            f"{package} package).")


def resolve_http(engine: str, http: str = AUTO) -> str:
    """The parser that serves: the one named, or `auto`'s first installed choice."""
    spec = ENGINE_SPECS[engine]
    if not spec.parser_choice:
        return spec.own_parser
    if http != AUTO:
        return http
    return next(name for name in spec.http_auto if importable(HTTP_PARSERS[name].module))


def http_engine_value(engine: str, http: str) -> str:
    """What to pass as the engine's own parser option for a resolved parser."""
    return HTTP_PARSERS[http].engine_values[engine]


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
                                "it with WEBSERVER_WORKERS",
                     "gunicorn": "gunicorn's asgi worker runs one event-loop thread and "
                                 "ignores threads (it warns); scale it with "
                                 "WEBSERVER_WORKERS",
                     "hypercorn": "Hypercorn runs each worker on one event-loop thread; "
                                  "scale it with WEBSERVER_WORKERS"}, inactive=1),
        FeatureSpec("backlog", {"uvicorn": "backlog", "granian": "backlog",
                                "gunicorn": "backlog",
                                "hypercorn": "the launcher's listener (serving/engines/"
                                             "hypercorn/workers.py)"}),
        FeatureSpec("max_concurrency",
                    {"uvicorn": "limit_concurrency (503 past the cap)",
                     "granian": "backpressure (requests past the cap wait)"},
                    {"gunicorn": "gunicorn's asgi worker caps neither connections nor "
                                 "requests (worker_connections is read by its gthread and "
                                 "gevent workers only)",
                     "hypercorn": "Hypercorn caps neither connections nor requests"},
                    inactive=0),
        FeatureSpec("keepalive_timeout",
                    {"uvicorn": "timeout_keep_alive",
                     "granian": "http1_settings.header_read_timeout (also bounds the time "
                                "to send a request's headers)",
                     "gunicorn": "keepalive",
                     "hypercorn": "keep_alive_timeout (also bounds the time to send a "
                                  "request's head)"}),
        FeatureSpec("header_timeout",
                    {"uvicorn": "the project's protocol (serving/engines/uvicorn/protocols.py) "
                                "closes a head not complete in time",
                     "granian": "http1_settings.header_read_timeout, one timer with "
                                "WEBSERVER_KEEPALIVE_TIMEOUT (from the last response): "
                                "the larger of the two",
                     "gunicorn": "the project's asgi worker (serving/engines/gunicorn/worker.py) "
                                 "closes a head not complete in time",
                     "hypercorn": "keep_alive_timeout, one timer with "
                                  "WEBSERVER_KEEPALIVE_TIMEOUT (from the connection's start "
                                  "or last response): the larger of the two"}),
        FeatureSpec("max_header_size",
                    {"uvicorn": "the launcher's protocol: 431 past it (zttp stops at its "
                                "own 16 KiB)",
                     "granian": "http1_settings.max_buffer_size: 431 past it (above "
                                "16 KiB, a head arriving at once may pass up to 1.5x)",
                     "gunicorn": "the launcher's asgi worker: 431 past it (its own "
                                 "limits on each line stay: 414 for a request line "
                                 "past limit_request_line)",
                     "hypercorn": "h11_max_incomplete_size and h2_max_header_list_size"}),
        FeatureSpec("websockets", {"uvicorn": "ws='none' when false",
                                   "granian": "websockets",
                                   "gunicorn": "the launcher's layer refusing the upgrade "
                                               "when false (its asgi worker has no "
                                               "switch)",
                                   "hypercorn": "the launcher's layer refusing the upgrade "
                                                "when false (Hypercorn has no switch)"},
                    inactive=True),
        FeatureSpec("ws_ping_interval", {"uvicorn": "ws_ping_interval, 20 s pong timeout",
                                         "hypercorn": "websocket_ping_interval"},
                    {"granian": "granian sends no WebSocket pings",
                     "gunicorn": "gunicorn's asgi worker sends no WebSocket pings (it "
                                 "answers the client's)"}, inactive=0),
        FeatureSpec("worker_max_requests",
                    {"uvicorn": "limit_max_requests + limit_max_requests_jitter (a tenth), "
                                "workers replaced by the launcher's supervisor",
                     "gunicorn": "max_requests + max_requests_jitter (a tenth), workers "
                                 "replaced by its arbiter",
                     "hypercorn": "the launcher's worker counts requests (+ up to a tenth, "
                                  "jitter), its supervisor replaces it"},
                    {"granian": "granian cannot recycle a worker by request count; "
                                "WEBSERVER_WORKER_LIFETIME and WEBSERVER_WORKER_MAX_MEMORY "
                                "recycle it by age and by memory"}, inactive=0),
        FeatureSpec("worker_lifetime", {"granian": "workers_lifetime"},
                    {"uvicorn": "uvicorn cannot recycle a worker by age; "
                                "WEBSERVER_WORKER_MAX_REQUESTS recycles it by request count",
                     "gunicorn": "gunicorn cannot recycle a worker by age; "
                                 "WEBSERVER_WORKER_MAX_REQUESTS recycles it by request "
                                 "count",
                     "hypercorn": "Hypercorn cannot recycle a worker by age; "
                                  "WEBSERVER_WORKER_MAX_REQUESTS recycles it by request "
                                  "count"},
                    inactive=0,
                    floor={"granian": (60, "granian recycles a worker after 60 seconds "
                                           "at the soonest")}),
        FeatureSpec("worker_max_memory", {"granian": "workers_max_rss"},
                    {"uvicorn": "uvicorn does not watch its workers' memory; "
                                "WEBSERVER_WORKER_MAX_REQUESTS recycles them by request "
                                "count",
                     "gunicorn": "gunicorn does not watch its workers' memory; "
                                 "WEBSERVER_WORKER_MAX_REQUESTS recycles them by request "
                                 "count",
                     "hypercorn": "Hypercorn does not watch its workers' memory; "
                                  "WEBSERVER_WORKER_MAX_REQUESTS recycles them by request "
                                  "count"}, inactive=0),
        FeatureSpec("respawn_failed_workers",
                    {"uvicorn": "the launcher's supervisor (uvicorn's, with respawning made "
                                "a choice)", "granian": "respawn_failed_workers",
                     "gunicorn": "its arbiter, which always respawns; when false the "
                                 "launcher's child_exit hook stops it",
                     "hypercorn": "the launcher's supervisor (serving/engines/hypercorn/"
                                  "workers.py)"}),
        FeatureSpec("access_log", {"uvicorn": "the app's access log middleware (uvicorn's "
                                              "own off)",
                                   "granian": "the app's access log middleware (granian's "
                                              "own off)",
                                   "gunicorn": "the app's access log middleware "
                                               "(gunicorn's own off)",
                                   "hypercorn": "the app's access log middleware "
                                                "(Hypercorn's own off)"}),
        FeatureSpec("log_format", {"uvicorn": "log_config, its formatters the app's",
                                   "granian": "log_dictconfig, its formatters the app's",
                                   "gunicorn": "logger_class, its handlers' formatter "
                                               "the app's",
                                   "hypercorn": "errorlog, its handler's formatter the "
                                                "app's (json)"}),
        FeatureSpec("metrics", {"uvicorn": "the app's metrics layer; the launcher's "
                                           "listener",
                                "granian": "the app's metrics layer; the launcher's "
                                           "listener",
                                "gunicorn": "the app's metrics layer; the launcher's "
                                            "listener",
                                "hypercorn": "the app's metrics layer; the launcher's "
                                             "listener"}),
        FeatureSpec("graceful_timeout", {"uvicorn": "timeout_graceful_shutdown",
                                         "granian": "workers_kill_timeout",
                                         "gunicorn": "graceful_timeout",
                                         "hypercorn": "graceful_timeout"}),
        FeatureSpec("tls_certfile", {"uvicorn": "ssl_certfile", "granian": "ssl_cert",
                                     "gunicorn": "certfile", "hypercorn": "certfile"},
                    inactive=""),
        FeatureSpec("tls_keyfile", {"uvicorn": "ssl_keyfile", "granian": "ssl_key",
                                    "gunicorn": "keyfile", "hypercorn": "keyfile"},
                    inactive=""),
        FeatureSpec("http2", {"uvicorn": "http2, with the zttp parser",
                              "granian": "http='auto' (HTTP/1 pinned when false)",
                              "gunicorn": "http_protocols='h2,h1' + http2_cleartext='both': "
                                          "h2c to peers in WEBSERVER_TRUSTED_PROXIES only "
                                          "(its forwarded_allow_ips)",
                              "hypercorn": "alpn_protocols h2 over TLS (its cleartext "
                                           "h2c is always on)"}, inactive=False),
        FeatureSpec("h2c_upgrade", {"gunicorn": "http2_cleartext='both' (the upgrade "
                                                "ignored when false)",
                                    "hypercorn": "its own (ignored when false, "
                                                 "serving/engines/hypercorn/protocols.py)"},
                    {"uvicorn": "uvicorn serves a request asking to upgrade to h2c as "
                                "HTTP/1.1",
                     "granian": "granian serves a request asking to upgrade to h2c as "
                                "HTTP/1.1"}, inactive=False),
        FeatureSpec("http3", {"hypercorn": "quic_bind on the same port (UDP), with its "
                                           "alt-svc header"},
                    {"uvicorn": "uvicorn has no HTTP/3",
                     "granian": "granian's HTTP/3 is not released (granian #550)",
                     "gunicorn": "gunicorn has no HTTP/3"}, inactive=False),
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
    def shown(given: object) -> object:
        return str(given).lower() if isinstance(given, bool) else given

    return (
        f"{env}={shown(value)} cannot be honoured by {engine}: "
        f"{spec.refused_because[engine]}; use {_one_of(list(spec.honoured_by))}, or set "
        f"{env}={shown(spec.inactive)}."
    )
