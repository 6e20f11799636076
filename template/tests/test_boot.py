"""Boot each engine for real and ask it what is running."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.core import loops
from tests import request_set, served
from tests.server_process import children, running_server

loop_for = request_set.loop_for
# The module a running loop's class comes from, by loop name: written out, not read
# from the matrix.
LOOP_MODULES = {"asyncio": "asyncio", "uvloop": "uvloop", "rloop": "rloop",
                "zuvloop": "zuvloop", "trio": "trio"}


def expected_loop(engine: str, loop: str) -> str:
    """The loop that must run, stated here as docs/engines.md says it: a loop named is
    that loop; `auto` is zuvloop for uvicorn on 3.14+ when installed and served, else
    uvloop when installed and served, else asyncio."""
    if loop != loops.AUTO:
        return loop
    if (engine == "uvicorn" and sys.version_info >= (3, 14) and loops.importable("zuvloop")
            and "zuvloop" in served.LOOPS):
        return "zuvloop"
    return "uvloop" if loops.importable("uvloop") and "uvloop" in served.LOOPS else "asyncio"


@pytest.mark.parametrize("engine", served.ENGINES)
def test_engine_serves_on_the_configured_loop(engine: str) -> None:
    loop = loop_for(engine)
    with running_server(["--engine", engine, "--loop", loop], env=request_set.OPEN) as server:
        detail = httpx.get(f"{server.url}/health/detailed").json()
        probes = [httpx.get(f"{server.url}{path}").text for path in ("/livez", "/readyz")]
        observed = request_set.observe(server.url)
    assert observed == request_set.expected(proxy_trusted=True)
    # Answered before the app (app/middleware/probes.py).
    assert probes == ["ok", served.READY[1]]
    expected = expected_loop(engine, loop)
    assert detail["engine"] == engine
    assert detail["loop"] == expected
    assert detail["loop_class"].startswith(LOOP_MODULES[expected] + ".")
    assert server.process.returncode in (0, -15)


@pytest.mark.parametrize("engine", served.ENGINES)
def test_kept_alive_answers_are_not_held_back_on_asyncio(engine: str) -> None:
    """Each answer leaves at once on a kept-alive connection. A socket with Nagle on
    holds a response's second write until the client's delayed ACK: 40 ms or more a
    request, whatever the machine's speed (uvicorn on asyncio did, through the socket
    it binds for workers and the drain). Well under that is a stall gone, not a speed."""
    served.require(engine, "asyncio")
    with running_server(["--engine", engine, "--loop", "asyncio"]) as server, \
            httpx.Client(base_url=server.url) as client:
        took = []
        for _ in range(21):
            started = time.perf_counter()
            assert client.get("/health/").status_code == 200
            took.append(time.perf_counter() - started)
    assert statistics.median(took) < 0.02, [f"{seconds * 1000:.1f} ms" for seconds in took]


# (engine, parser, HTTP/2): every parser an engine takes, and HTTP/2 on each engine
# (with the parser that carries it, where the engine needs one), each on the project's
# loop (zuvloop projects boot zuvloop with every parser). An HTTP/2 parser is checked
# with HTTP/2 on (its HTTP/1.1 answer is checked too).
PARSER_CASES = [
    *((engine, name, False) for engine, spec in loops.ENGINE_SPECS.items()
      for name in spec.parsers if not loops.HTTP_PARSERS[name].http2),
    *((engine, loops.AUTO if spec.http2_any_parser else next(
        name for name in spec.parsers if loops.HTTP_PARSERS[name].http2), True)
      for engine, spec in loops.ENGINE_SPECS.items()),
]


# The parser modules with native code, by what each parser loads (h11 and gunicorn's
# python are pure Python, granian's hyper is inside granian): named here, not derived
# from the matrix.
NATIVE_PARSER = {"httptools": {"httptools"}, "zttp": {"zttp"}, "h11": set(), "hyper": set(),
                 "h1c": {"gunicorn_h1c"}, "python": set()}
# What each engine's `auto` parses with here (gunicorn's C parser is not a dependency).
AUTO_PARSER = {"uvicorn": "httptools", "granian": "hyper",
               "gunicorn": "h1c" if loops.importable("gunicorn_h1c") else "python",
               "hypercorn": "h11"}
# Hypercorn answers h2c whatever it is told: with HTTP/2 off the launcher answers 505.
H2C_REFUSED_WITH = {"hypercorn": 505}


def native_parsers_loaded(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name in ("httptools", "zttp", "gunicorn_h1c") if f"/{name}/" in maps}


@pytest.mark.parametrize(("engine", "http", "http2"), PARSER_CASES, ids=str)
def test_parser_and_http2(engine: str, http: str, http2: bool) -> None:
    served.require(engine)
    if http != loops.AUTO and not loops.importable(loops.HTTP_PARSERS[http].module):
        pytest.skip(f"the {http} parser is not installed here")
    args = ["--engine", engine, "--loop", loop_for(engine), "--http", http]
    args += ["--http2"] if http2 else []
    with running_server(args, env=request_set.OPEN) as server:
        detail = httpx.get(f"{server.url}/health/detailed").json()
        loaded = native_parsers_loaded(detail["pid"])
        with httpx.Client(http1=False, http2=True) as client:  # h2c, prior knowledge
            try:
                answer = client.get(f"{server.url}/health/detailed")
                h2 = answer.json() if answer.status_code == 200 else answer.status_code
            except httpx.TransportError:
                h2 = None
    # What parses is observed in the worker: the native parser it has loaded.
    serving = AUTO_PARSER[engine] if http == loops.AUTO else http
    assert detail["http"] == serving
    assert loaded == NATIVE_PARSER[serving]
    assert detail["http_version"] == "1.1"
    if http2:
        assert h2 is not None and h2["http_version"] == "2"
    else:
        assert h2 == H2C_REFUSED_WITH.get(engine)  # HTTP/2 only when asked


@pytest.mark.parametrize("engine", served.ENGINES)
def test_two_workers_both_run_the_loop(engine: str) -> None:
    """Workers are forked (granian spawns them on 3.14): each must build the loop."""
    loop = loop_for(engine)
    seen: dict[int, str] = {}
    with running_server(["--engine", engine, "--loop", loop, "--workers", "2"],
                        env=request_set.OPEN) as server:
        for _attempt in range(200):  # new connections until both workers answered
            detail = httpx.get(
                f"{server.url}/health/detailed", headers={"Connection": "close"}
            ).json()
            seen[detail["pid"]] = detail["loop_class"]
            if len(seen) == 2:
                break
    assert len(seen) == 2
    module = LOOP_MODULES[expected_loop(engine, loop)]
    assert all(loop_class.startswith(module + ".") for loop_class in seen.values())


@pytest.mark.parametrize("engine", ["uvicorn", "hypercorn"])
def test_workers_are_forked_from_a_launcher_of_one_thread(engine: str) -> None:
    """uvicorn's and Hypercorn's workers are forked from the launcher, not spawned: a
    spawned worker imports the engine, the settings and the serving layer again before
    the app, 0.6 s or more to the first 200 (docs/deploy.md). A fork copies only the
    thread that forks, so the launcher holds no other (the metrics listener is a
    process)."""
    served.require(engine)
    with running_server(["--engine", engine, "--loop", loop_for(engine),
                         "--workers", "2"]) as server:
        launcher = server.process.pid
        command = Path(f"/proc/{launcher}/cmdline").read_bytes()
        # A forked child keeps its parent's command line; a spawned one is `-c ...`.
        workers = [pid for pid in children(launcher)
                   if Path(f"/proc/{pid}/cmdline").read_bytes() == command]
        threads = os.listdir(f"/proc/{launcher}/task")
    assert len(workers) == 2, (command, workers)
    assert threads == [str(launcher)], threads


@pytest.mark.parametrize("engine", served.ENGINES)
def test_forwarded_headers_from_an_untrusted_address_are_ignored(engine: str) -> None:
    env = {**request_set.OPEN, "WEBSERVER_TRUSTED_PROXIES": "192.0.2.1,10.0.0.0/8"}
    with running_server(["--engine", engine, "--loop", loop_for(engine)], env=env) as server:
        observed = request_set.observe(server.url)
    assert observed == request_set.expected(proxy_trusted=False)
