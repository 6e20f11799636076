"""A user's service stops cleanly with its streams open, on every engine.

A rendered project as a user writes it: a lifespan that opens and closes a resource in
each worker (it writes its pid to a file at startup and at shutdown), a router with a
stream of server-sent events that never looks at `server_stopping`, one that does, and
a WebSocket route of theirs that only waits for messages. SIGTERM with all of them
open, two workers: each stream ends properly (the watching one with its last event),
each WebSocket gets close code 1012, every worker runs the user's shutdown, the
process exits well within the default grace period (30 s), and nothing is logged
at ERROR or with a traceback (docs/reliability.md).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from extensions.matrix import loops
from tests.conftest import DEFAULT_PYTHON, environment_for, server_process

# Well under the grace period (30 s), which a stop held by the streams would take; gunicorn's
# arbiter wakes once a second, so its stop takes 2 or 3 s and more on a loaded machine.
STOP_WITHIN = 10.0

LIFESPAN = '''@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
    import os

    def note(what: str) -> None:
        with open(os.environ["LIFESPAN_LOG"], "a") as log:
            log.write(f"{what} {os.getpid()}\\n")

    note("start")
    yield {}
    note("stop")
'''

ROUTES = '''"""A user's streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import APIRouter, WebSocket
from fastapi.responses import StreamingResponse

from app.core.stopping import server_stopping

router = APIRouter(prefix="/mine")


@router.get("/forever")
async def forever() -> StreamingResponse:
    async def ticks() -> AsyncIterator[str]:
        while True:  # never looks at server_stopping
            yield "data: tick\\n\\n"
            await asyncio.sleep(0.2)

    return StreamingResponse(ticks(), media_type="text/event-stream")


@router.get("/polite")
async def polite() -> StreamingResponse:
    async def ticks() -> AsyncIterator[str]:
        while not server_stopping.is_set():
            yield "data: tick\\n\\n"
            await server_stopping.wait(timeout=0.2)
        yield "event: bye\\ndata: restarting\\n\\n"

    return StreamingResponse(ticks(), media_type="text/event-stream")


@router.websocket("/ws")
async def chat(websocket: WebSocket) -> None:
    await websocket.accept()
    while True:
        await websocket.send_text(await websocket.receive_text())
'''


@pytest.fixture(scope="module")
def users_project(copie_session) -> Path:
    result = copie_session.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    custom = project / "app/custom.py"
    text = custom.read_text()
    start = text.index("@asynccontextmanager")
    end = text.index("def customize(")
    custom.write_text(text[:start] + LIFESPAN + "\n\n" + text[end:])
    (project / "app/routes/streams.py").write_text(ROUTES)
    return project


def read_stream(url: str, seen: list[str], started: threading.Event) -> None:
    try:
        with httpx.stream("GET", url, timeout=15) as answer:
            for line in answer.iter_lines():
                seen.append(line)
                started.set()
        seen.append("END")
    except httpx.HTTPError as error:
        seen.append(f"ERROR {type(error).__name__}")
    started.set()


def hold_websocket(url: str, codes: list[int | None], started: threading.Event) -> None:
    with connect(url, open_timeout=5) as websocket:
        websocket.send("hi")
        websocket.recv(timeout=5)
        started.set()
        try:
            websocket.recv(timeout=15)
        except ConnectionClosed as closed:
            codes.append(closed.rcvd.code if closed.rcvd else None)
        except TimeoutError:
            codes.append(-1)


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_sigterm_ends_the_users_streams_and_runs_their_shutdown(
    users_project: Path, engine: str, tmp_path: Path,
) -> None:
    lifespan_log = tmp_path / "lifespan"
    env = {"LIFESPAN_LOG": str(lifespan_log)}
    interpreter, python = environment_for(DEFAULT_PYTHON, users_project / "pyproject.toml")
    runner = interpreter.command([str(python)], users_project, env=env)
    seen_by: list[tuple[str, list[str]]] = [(path, []) for path in
                                             ("/mine/forever", "/mine/forever",
                                              "/mine/polite", "/mine/polite")]
    codes: list[int | None] = []
    with server_process.running_server(["--engine", engine, "--workers", "2"],
                                       python=runner, cwd=users_project, env=env) as server:
        threads, started = [], []
        for path, seen in seen_by:
            started.append(threading.Event())
            threads.append(threading.Thread(target=read_stream, daemon=True,
                                            args=(f"{server.url}{path}", seen, started[-1])))
        ws_url = f"ws://{server.url.removeprefix('http://')}/mine/ws"
        for _ in range(2):
            started.append(threading.Event())
            threads.append(threading.Thread(target=hold_websocket, daemon=True,
                                            args=(ws_url, codes, started[-1])))
        for thread in threads:
            thread.start()
        assert all(event.wait(10) for event in started), seen_by
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=35)
        stopped_after = time.monotonic() - signalled
        for thread in threads:
            thread.join(timeout=5)
        output = server.output()
    notes = [line.split() for line in lifespan_log.read_text().splitlines()]
    started_pids = {int(pid) for what, pid in notes if what == "start"}
    stopped_pids = {int(pid) for what, pid in notes if what == "stop"}
    print(f"{engine}: exit {server.process.returncode} after {stopped_after:.2f} s; "
          f"close codes {codes}; workers started {sorted(started_pids)}, shut down "
          f"{sorted(stopped_pids)}")
    for path, seen in seen_by:
        assert seen[-1] == "END", (path, seen[-3:], output[-3000:])
        if path == "/mine/polite":
            assert "event: bye" in seen, seen[-3:]
    assert codes == [1012, 1012], (codes, output[-3000:])
    assert len(started_pids) == 2 and stopped_pids == started_pids, (notes, output[-3000:])
    assert stopped_after < STOP_WITHIN, output[-3000:]
    assert "Traceback" not in output and "ERROR" not in output, output[-3000:]
    ended = [line for line in output.splitlines() if "Stopping: ended the" in line]
    assert len(ended) >= 2, output[-3000:]  # one line per stream the server ended
