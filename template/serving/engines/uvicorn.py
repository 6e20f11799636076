"""uvicorn: options (`config`), run (one process, its reloader, or a supervisor), drain
on SIGTERM, and its protocols with the head limits (serving/head_limits.py), one per
parser, handed to its public `http=` option.

uvicorn's supervisor replaces every worker that dies; `WorkerSupervisor` replaces one
recycled by `limit_max_requests` (exit 0), another only with
WEBSERVER_RESPAWN_FAILED_WORKERS=true, else stops the server (exit 1). It and
`DrainingServer` take the queued connections before uvicorn closes (resets) the
listener (serving/drain.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from socket import AF_INET, AF_INET6, IPPROTO_TCP, TCP_NODELAY, socket
from typing import Any

import uvicorn
from uvicorn.supervisors import ChangeReload
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from app.core import logs, loops
from serving import drain
from serving.engines import APP_DIR
from serving.head_limits import TOO_LARGE, head_limits, head_too_large
from serving.served_app import APP_TARGET
from serving.settings import Settings

NAME = "uvicorn"
RELOADS_ITSELF = True  # its reloader already survives a bad save
WS_PING_TIMEOUT = 20.0
WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # uvicorn's default, kept for 0
RECYCLED = 0  # a worker's exit code after `limit_max_requests`
STARTUP_FAILURE = 3  # uvicorn's exit code when it fails to start (docs/private-names.md)
logger = logging.getLogger("uvicorn.error")


def config(settings: Settings, loop: str) -> uvicorn.Config:
    return uvicorn.Config(
        APP_TARGET,
        factory=True,
        host=settings.host, port=settings.port,
        workers=settings.workers,
        reload=settings.reload,
        reload_dirs=[str(APP_DIR)] if settings.reload else None,
        loop=loops.engine_value(NAME, loop),
        # The parser's protocol with the head limits granian applies (below); HTTP/2
        # keeps zttp's own, which uvicorn requires by name.
        http="zttp" if settings.http2 else protocol(settings.resolved_http),
        http2=settings.http2,
        h11_max_incomplete_event_size=settings.max_header_size,
        ws="auto" if settings.websockets else "none",
        log_level=settings.log_level,
        # Its own default (text), or its loggers with the app's format (app/core/logs.py).
        **({"log_config": logs.uvicorn_json_config()} if settings.log_format == "json" else {}),
        access_log=False,  # the app's own access log, the same on every engine
        backlog=settings.backlog,
        limit_concurrency=settings.max_concurrency or None,
        limit_max_requests=settings.worker_max_requests or None,
        limit_max_requests_jitter=settings.worker_max_requests // 10,
        timeout_keep_alive=settings.keepalive_timeout,
        timeout_graceful_shutdown=settings.graceful_timeout,
        proxy_headers=False,  # applied by create_served_app, as on every engine
        ws_max_size=settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE,
        ws_ping_interval=settings.ws_ping_interval or None,
        ws_ping_timeout=WS_PING_TIMEOUT if settings.ws_ping_interval else None,
    )


def run(settings: Settings, loop: str) -> None:
    served = config(settings, loop)
    sockets = [served.bind_socket()]
    # A supervisor whenever a worker may need replacing (one worker included).
    supervised = (settings.workers > 1 or settings.worker_max_requests > 0
                  or settings.respawn_failed_workers)
    timeout = drain.drain_timeout(settings.graceful_timeout)
    with contextlib.suppress(KeyboardInterrupt):
        if settings.reload:  # the reloader pickles the server for its child: plain
            ChangeReload(served, target=uvicorn.Server(served).run, sockets=sockets).run()
        elif supervised:
            supervisor = WorkerSupervisor(served, sockets=sockets)
            supervisor.respawn_failed = settings.respawn_failed_workers
            supervisor.drain_timeout = timeout
            supervisor.run()
            if supervisor.failed:
                sys.exit(1)
        else:
            server = DrainingServer(served, sockets, drain_timeout=timeout)
            server.run(sockets=sockets)
            if not server.started:
                sys.exit(STARTUP_FAILURE)


class DrainingServer(uvicorn.Server):
    """One uvicorn process serving `sockets` (bound by `run`)."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket], drain_timeout: float) -> None:
        super().__init__(config)
        self.handle_exit = drain.draining(  # type: ignore[method-assign]
            super().handle_exit, config.port, drain_timeout,
            refuse=lambda: drain.refuse_new_connections(sockets))


class WorkerSupervisor(Multiprocess):
    respawn_failed = False
    failed = False  # a worker died and was not replaced: the run is a failure
    drain_timeout = 0.0

    def handle_term(self) -> None:
        # The workers go on accepting from the shared listener while it drains.
        drain.refuse_new_connections(self.sockets)
        drain.wait_until_accepted(self.config.port, self.drain_timeout)
        super().handle_term()

    def keep_subprocess_alive(self) -> None:
        # uvicorn's own loop (Multiprocess.keep_subprocess_alive), with the choice made.
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # hung, or already gone
            process.join()
            if self.should_exit.is_set():
                return
            code = process.exitcode
            if code == STARTUP_FAILURE or (code != RECYCLED and not self.respawn_failed):
                logger.error(f"Worker [{process.pid}] died with exit code {code}; "
                             "not replaced (WEBSERVER_RESPAWN_FAILED_WORKERS=false), stopping.")
                self.failed = True
                self.should_exit.set()
                return
            reason = "recycled" if code == RECYCLED else f"died with exit code {code}"
            logger.info(f"Worker [{process.pid}] {reason}; starting a new one.")
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[index] = replacement


class HeadLimits:
    """The head timer, and 431 for a head too large, on uvicorn's protocols' names."""

    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head, self.head_timeout = head_limits()
        self.head_timer: asyncio.TimerHandle | None = None
        self.upgraded = False  # to a WebSocket: the connection is no longer ours

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # Nagle off: asyncio does it only on sockets made with proto IPPROTO_TCP, not on
        # uvicorn's bind_socket() (proto 0): each kept-alive answer waited ~40 ms.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (AF_INET, AF_INET6):
            sock.setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[misc]
        # Its own handles on the connection, not the protocols' `transport` and `loop`.
        self.head_transport, self.head_loop = transport, asyncio.get_running_loop()
        self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        self.feed(data)
        if self.cycle is not cycle:  # a head was completed
            self.stop_head_timer()
        elif (self.head_timer is None and (cycle is None or cycle.response_complete)
              and not self.upgraded and not self.head_transport.is_closing()):
            # A head begun, not complete: time it (a body left unread counts: harmless).
            self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

    def feed(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]

    def head_too_slow(self) -> None:
        self.head_timer = None
        if not self.head_transport.is_closing():
            self.head_transport.close()

    def refuse_head(self) -> None:
        if not self.head_transport.is_closing():
            self.head_transport.write(TOO_LARGE)
            self.head_transport.close()

    def send_400_response(self, msg: str) -> None:
        # Called by uvicorn inside its `except` for the parser's error.
        if head_too_large(sys.exception()):
            self.refuse_head()
        else:
            super().send_400_response(msg)  # type: ignore[misc]

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self.upgraded = True
        self.stop_head_timer()
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def stop_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None


class HeadGuard(HeadLimits):
    """Hands a parser that reads a head whole (httptools; h11 in one read) `max_head`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_bytes = 0  # of the head being read

    def reading_body(self) -> bool:
        raise NotImplementedError

    def feed(self, data: bytes) -> None:
        if self.upgraded or self.reading_body():
            super().feed(data)
            return
        cycle = self.cycle
        room = self.max_head - self.head_bytes
        part = data if len(data) <= room else data[:room]
        self.head_bytes += len(part)
        super().feed(part)
        if self.cycle is not cycle:  # a head ended in it
            self.head_bytes = 0
        if len(part) == len(data) or self.upgraded or self.head_transport.is_closing():
            return
        if self.head_bytes:  # `max_head` bytes, and the head goes on
            self.refuse_head()
            return
        self.feed(data[len(part):])


def httptools_limits() -> type:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsLimits(HeadGuard, HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.in_body = False  # between a head's end and its message's end

        def reading_body(self) -> bool:
            return self.in_body

        def on_headers_complete(self) -> None:
            self.in_body = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self.in_body = False
            super().on_message_complete()

    return HttpToolsLimits


def h11_limits() -> type:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class H11Limits(HeadGuard, H11Protocol):
        """h11's own `h11_max_incomplete_event_size` misses a head read at once."""

        def reading_body(self) -> bool:
            return self.conn.their_state is h11.SEND_BODY

    return H11Limits


def zttp_limits() -> type:
    from uvicorn.protocols.http.zttp_impl import ZttpProtocol

    class ZttpLimits(HeadLimits, ZttpProtocol):
        """zttp stops at 16 KiB and 100 headers itself (400, made 431 here)."""

    return ZttpLimits


# Built when uvicorn imports one by name (`http=`): a worker loads only its own
# parser's module (tests/test_boot.py looks at what it loaded).
PROTOCOLS = {"httptools": "HttpToolsLimits", "h11": "H11Limits", "zttp": "ZttpLimits"}
BUILDERS = dict(HttpToolsLimits=httptools_limits, H11Limits=h11_limits, ZttpLimits=zttp_limits)


def protocol(parser: str) -> str:
    """What uvicorn's `http=` takes for a resolved parser: this module's protocol."""
    return f"{__name__}:{PROTOCOLS[parser]}"


def __getattr__(name: str) -> type:
    if name not in BUILDERS:
        raise AttributeError(name)
    built = BUILDERS[name]()
    built.__module__, built.__qualname__ = __name__, name
    globals()[name] = built
    return built
