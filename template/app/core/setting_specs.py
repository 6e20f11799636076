"""Every setting, declared once: name, type, default, bounds, group and one line of help.

The Settings model (settings.py), the `serve` options and their help, `.env.example`,
docs/settings.md, what the launcher hands its workers, and the words refusing a value
out of bounds (at start and in the Copier questions) are all derived from SETTINGS.
Which engine honours which setting, and how, is in app/core/loops.py (FEATURES). Plain
Python with no third-party imports: the template's Copier extension loads this file
before anything is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ENV_PREFIX = "WEBSERVER_"


@dataclass(frozen=True)
class Answer:
    """A default that is a Copier answer (app/core/answers.py holds the project's)."""

    question: str


@dataclass(frozen=True)
class SettingSpec:
    name: str
    kind: type  # str, int, float or bool
    default: object  # a value, or an Answer
    help: str  # what it controls, one line, no final period
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # fixed choices; the matrix checks engine, loop, http
    group: str = ""  # given by the Group heading above it in SETTINGS, not by hand

    @property
    def env(self) -> str:
        return f"{ENV_PREFIX}{self.name.upper()}"

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_for(self, answers: dict[str, object]) -> object:
        if isinstance(self.default, Answer):
            answer = answers[self.default.question]
            if isinstance(answer, list | tuple):  # a multiple-choice answer
                return ",".join(answer)
            return self.kind(answer)
        return self.default

    def text(self, value: object) -> str:
        """A value as the environment and `.env` spell it."""
        return str(value).lower() if self.kind is bool else str(value)

    def accepts(self) -> str:
        """What a valid value looks like, for help and refusals."""
        if self.choices:
            return " | ".join(self.choices)
        if self.kind is bool:
            return "true | false"
        if self.kind is str:
            return ""
        def number(value: float) -> str:
            return str(int(value)) if self.kind is int else f"{value:g}"

        if self.minimum is not None and self.maximum is not None:
            return f"{number(self.minimum)}-{number(self.maximum)}"
        return f">= {number(self.minimum)}" if self.minimum is not None else ""

    def wanted(self) -> str:
        """What to give instead of a value that does not parse or is out of bounds, as
        both the `serve` refusal and the Copier question for the same answer word it:
        'give a whole number from 1 to 65535'. Empty for free text."""
        if self.choices:
            return choose(self.choices)
        if self.kind is bool:
            return "give true or false"
        if self.kind in (int, float) and self.minimum is not None and self.maximum is not None:
            return number_range(self.minimum, self.maximum, whole=self.kind is int)
        return ""


@dataclass(frozen=True)
class Group:
    """A heading in SETTINGS: the settings below it, up to the next, form one group of
    `serve --help` (and of `.env.example` and the settings tables, in the same order)."""

    title: str


def grouped(*declared: Group | SettingSpec) -> tuple[SettingSpec, ...]:
    """The settings in declared order, each given the title of the heading above it."""
    title = ""
    specs = []
    for item in declared:
        if isinstance(item, Group):
            title = item.title
        else:
            specs.append(replace(item, group=title))
    return tuple(specs)


def number_range(low: float, high: float, *, whole: bool = True) -> str:
    """The one wording of a numeric range, at run time and in the Copier questions."""
    def shown(value: float) -> str:
        return str(int(value)) if whole else f"{value:g}"

    kind = "a whole number" if whole else "a number"
    return f"give {kind} from {shown(low)} to {shown(high)}"


def choose(choices: tuple[str, ...]) -> str:
    return f"choose {', '.join(choices)}"


LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
ACCESS_LOG_FORMATS = ("off", "text", "json")
HEALTH_DETAILS = ("minimal", "full")
LOG_FORMATS = ("text", "json")
METRICS_PLACES = ("port", "path", "off")

SETTINGS: tuple[SettingSpec, ...] = grouped(
    Group("Engine and loop"),
    SettingSpec("engine", str, Answer("default_engine"),
                "ASGI server: uvicorn, granian, gunicorn or hypercorn"),
    SettingSpec("loop", str, Answer("loop_policy"),
                "event loop: auto (the fastest the engine takes here: zuvloop under uvicorn "
                "on 3.14+, else uvloop, else asyncio), asyncio, uvloop, rloop (granian), "
                "zuvloop (uvicorn, Python 3.14+), trio (hypercorn)"),
    SettingSpec("served_engines", str, Answer("served_engines"),
                "the engines this project serves, separated by commas (its tests use the "
                "Copier answer, not this setting)"),
    SettingSpec("served_loops", str, Answer("served_loops"),
                "the loops this project serves, separated by commas; auto picks among them "
                "(its tests use the Copier answer, not this setting)"),
    Group("Listener and TLS"),
    SettingSpec("host", str, "127.0.0.1", "bind address"),
    SettingSpec("port", int, Answer("port"), "port", 1, 65535),
    SettingSpec("backlog", int, 2048, "listen backlog: connections queued before accept",
                1, 65535),
    SettingSpec("tls_certfile", str, "",
                "PEM certificate chain: serve HTTPS (with WEBSERVER_TLS_KEYFILE), HTTP/2 by ALPN "
                "with WEBSERVER_HTTP2"),
    SettingSpec("tls_keyfile", str, "", "PEM private key of WEBSERVER_TLS_CERTFILE, unencrypted"),
    Group("Protocols"),
    SettingSpec("http", str, "auto",
                "HTTP parser: auto (the engine's choice), uvicorn's httptools, h11, zttp, or "
                "gunicorn's h1c, python (granian and hypercorn have their own)"),
    SettingSpec("http2", bool, False,
                "also answer cleartext HTTP/2 (h2c); uvicorn needs the zttp parser, gunicorn "
                "answers it to trusted proxies only"),
    SettingSpec("h2c_upgrade", bool, False,
                "with WEBSERVER_HTTP2, also take HTTP/1.1's `Upgrade: h2c` (deprecated; a proxy "
                "passing Upgrade for WebSockets would let a client smuggle HTTP/2 past it)"),
    SettingSpec("http3", bool, False,
                "also answer HTTP/3: QUIC over UDP, on the number TCP listens on, advertised "
                "by Alt-Svc (hypercorn, with TLS on)"),
    Group("Workers"),
    SettingSpec("workers", int, Answer("workers"), "worker processes", 1, 64),
    SettingSpec("threads", int, 1, "runtime threads per worker (granian)", 1, 64),
    SettingSpec("worker_max_requests", int, 0,
                "recycle a worker after this many requests, plus up to a tenth more (jitter), "
                "0 = never (uvicorn, gunicorn)", 0, 100_000_000),
    SettingSpec("worker_lifetime", int, 0,
                "recycle a worker after this many seconds, 0 = never (granian, 60 or more)",
                0, 31_536_000),
    SettingSpec("worker_max_memory", int, 0,
                "recycle a worker whose RSS exceeds this many MiB, 0 = never (granian)",
                0, 1_048_576),
    SettingSpec("respawn_failed_workers", bool, False,
                "replace a worker that dies; false (for an orchestrator that restarts the "
                "container) stops the server instead"),
    Group("Stopping"),
    SettingSpec("graceful_timeout", int, 30,
                "seconds a stopping server waits for in-flight requests", 1, 3600),
    SettingSpec("stream_stop_timeout", float, 1.0,
                "seconds a stream or WebSocket open at a stop has to end itself "
                "(app/core/stopping.py) before the server ends it", 0, 3600),
    Group("Limits"),
    SettingSpec("max_concurrency", int, 0,
                "cap on concurrent requests per worker, 0 = none (uvicorn answers 503 "
                "past it, granian queues)", 0, 1_000_000),
    SettingSpec("keepalive_timeout", int, 5, "seconds an idle keep-alive connection stays open",
                1, 3600),
    SettingSpec("header_timeout", int, 5,
                "seconds to send a request's headers, then the connection closes", 1, 3600),
    SettingSpec("body_timeout", int, 60,
                "seconds to send a whole request body (408 after), 0 = none", 0, 86_400),
    SettingSpec("max_header_size", int, 16_384,
                "largest request head in bytes (431 above)", 8192, 1_048_576),
    SettingSpec("max_body_size", int, 1_048_576,
                "largest request body in bytes (413 above), 0 = none", 0, 17_179_869_184),
    SettingSpec("body_budget", int, 16_777_216,
                "bytes of request bodies a worker holds at once, all requests together "
                "(503 past it; a body alone always fits), 0 = none", 0, 17_179_869_184),
    Group("WebSockets"),
    SettingSpec("websockets", bool, True,
                "serve WebSockets; false turns the subsystem off and refuses upgrades"),
    SettingSpec("ws_ping_interval", float, 0.0,
                "seconds between WebSocket pings, 0 = none (uvicorn)", 0, 3600),
    SettingSpec("ws_idle_timeout", int, 60,
                "seconds a WebSocket may stay silent both ways (then closed), 0 = none",
                0, 86_400),
    SettingSpec("ws_max_message_size", int, 1_048_576,
                "largest WebSocket message in bytes (closed with 1009 above), 0 = the "
                "engine's own (about 16 MiB)", 0, 17_179_869_184),
    SettingSpec("ws_max_connections", int, 1000,
                "open WebSockets per worker (refused above), 0 = none", 0, 1_000_000),
    SettingSpec("ws_origins", str, "self",
                "browser origins that may open a WebSocket, others get 403: self (the "
                "page's own host), https://app.example.com, or *"),
    Group("Proxies and hosts"),
    SettingSpec("trusted_proxies", str, "127.0.0.1",
                "proxies whose X-Forwarded-For/-Proto/-Prefix are believed: addresses, "
                "networks or *"),
    SettingSpec("root_path", str, "",
                "path prefix a proxy serves this under (/api), for url_for, redirects and "
                "the docs; a trusted proxy's X-Forwarded-Prefix sets it per request"),
    SettingSpec("allowed_hosts", str, "localhost,127.0.0.1,::1",
                "hosts a request may name (Host), others get 400: names, *.example.com, "
                "or *"),
    Group("Response headers"),
    SettingSpec("cors_origins", str, "",
                "browser origins that may call the API (CORS), on every answer: "
                "https://app.example.com, several separated by commas, or *; empty = none"),
    SettingSpec("security_headers", bool, True,
                "X-Content-Type-Options, X-Frame-Options and Referrer-Policy on every answer "
                "that has not set its own"),
    SettingSpec("hsts", bool, True,
                "Strict-Transport-Security (a year) on every answer while the server itself "
                "serves TLS, with the security headers"),
    SettingSpec("server_timing", bool, False,
                "Server-Timing on every answer: the app's time to the response's start"),
    Group("Observability"),
    SettingSpec("access_log", str, "off",
                "one line per request (time, client, method, path, status, duration, "
                "request id)", choices=ACCESS_LOG_FORMATS),
    SettingSpec("request_id", bool, True,
                "X-Request-ID on every answer and in the log lines: the caller's when sane, "
                "else a new one"),
    SettingSpec("log_format", str, "text",
                "the app's and the engine's log lines (stderr): text, or json with the "
                "request and trace ids", choices=LOG_FORMATS),
    SettingSpec("log_level", str, "info", "log level", choices=LOG_LEVELS),
    SettingSpec("metrics", str, "port",
                "Prometheus metrics: port (a listener of their own, WEBSERVER_METRICS_PORT), "
                "path (/metrics on the app's port), off", choices=METRICS_PLACES),
    SettingSpec("metrics_port", int, 9464,
                "port of the metrics listener (WEBSERVER_METRICS=port), on WEBSERVER_HOST",
                1, 65535),
    Group("Development"),
    SettingSpec("reload", bool, False, "restart on code changes (one worker)"),
    SettingSpec("api_docs", bool, False, "serve the API docs: /docs, /redoc, /openapi.json"),
    SettingSpec("examples", bool, False,
                "serve the template's example routes: /demo/* and /ws/echo"),
    SettingSpec("health_detail", str, "minimal",
                "what /health/detailed tells: minimal (its status) or full (engine, loop, "
                "parser, client, Python version, pid)", choices=HEALTH_DETAILS),
)
# Declared in projects built with a database only (the `database` answer).
DATABASE_SETTINGS: tuple[SettingSpec, ...] = grouped(
    Group("Database"),
    SettingSpec("database_url", str, Answer("database_url"),
                "the database, as a SQLAlchemy URL (postgresql+asyncpg://user:password@host/"
                "name, sqlite+aiosqlite:///path); a password in it is never logged"),
    SettingSpec("database_pool_size", int, 5,
                "connections each worker keeps open to the database", 1, 1000),
    SettingSpec("database_pool_timeout", float, 5.0,
                "seconds a request waits for a free connection (then 503)", 0.1, 600),
    SettingSpec("database_startup_timeout", float, 30.0,
                "seconds `serve` waits for the database to answer before it stops with a "
                "sentence; 0 = start without it (/readyz is 503 until it answers)", 0, 3600),
)
BY_NAME = {spec.name: spec for spec in (*SETTINGS, *DATABASE_SETTINGS)}


def declared(answers: dict[str, object]) -> tuple[SettingSpec, ...]:
    """The settings of a project built with `answers`: the database's with a database."""
    return SETTINGS + (DATABASE_SETTINGS if answers.get("database", "none") != "none" else ())

# A container's memory, in MiB, for its processes (docs/deploy.md, "Memory"): the
# launcher and the metrics listener; each worker idle, its connections and what the
# app allocates for a request; each worker's body budget, with the allocator's waste.
BESIDE_THE_WORKERS_MIB = 192
WORKER_MIB = 128
BUDGET_OVERHEAD = 1.25


def memory_limit_mib(workers: int, body_budget: int) -> int:
    """The memory limit a container of `workers` workers needs, in MiB, when each may
    hold `body_budget` bytes of request bodies (0: no budget, so no bound either)."""
    budget_mib = -(-int(body_budget * BUDGET_OVERHEAD) // (1 << 20))
    return BESIDE_THE_WORKERS_MIB + workers * (WORKER_MIB + budget_mib)
# The `port` answer is also the container's port (Dockerfile, Kubernetes manifests), and
# the image runs as a non-root user, which may not listen below this: the Copier
# question refuses lower answers. WEBSERVER_PORT itself keeps 1-65535, since a person
# may run as root on purpose; a privileged port that cannot be bound is refused at
# start with its own sentence (server.listen_address).
UNPRIVILEGED_PORT_MINIMUM = 1024
