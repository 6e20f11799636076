"""`bench app`'s baseline (bare FastAPI set up as the app is) and `bench app --ladder`:
its rungs follow the app's stack, and each served rung really is what it is called,
on every engine.

Marked `bench`. No timed assertions: what is checked is what is measured and shown.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner

from app import custom
from app.core.framework import FRAMEWORK, BaseHTTPMiddleware, TestClient
from app.core.settings import get_settings
from bench import app_overhead, harness, ladder, ladder_report, user_like
from bench.route import Route
from cli.main import cli
from tests import served

pytestmark = pytest.mark.bench
WIDE = {"COLUMNS": "250"}  # table rows on one line each


def rows(output: str) -> list[str]:
    """The first cell of every table row, header rows left out."""
    return [line.split("│")[1].strip() for line in output.splitlines()
            if line.startswith("│") and line.split("│")[1].strip() not in ("rung", "")]


@pytest.mark.parametrize("api_docs", ["false", "true"])
def test_the_bare_baseline_is_set_up_as_the_app_is(monkeypatch: pytest.MonkeyPatch,
                                                   api_docs: str) -> None:
    monkeypatch.setenv("WEBSERVER_API_DOCS", api_docs)
    get_settings.cache_clear()
    try:
        apps = {variant.name: variant.app for variant in app_overhead.variants(Route("/health/"))}
        served = 200 if api_docs == "true" else 404
        for name in (app_overhead.BARE, app_overhead.ALL_MIDDLEWARE):
            with TestClient(apps[name]) as client:
                assert client.get("/openapi.json").status_code == served, name
                assert client.get("/docs").status_code == served, name
        with TestClient(apps[app_overhead.BARE_DEFAULTS]) as client:  # FastAPI's defaults
            assert client.get("/openapi.json").status_code == 200
    finally:
        get_settings.cache_clear()


class YoursAddsAHeader(BaseHTTPMiddleware):
    """A middleware of the tutorial's kind, as a user adds it in app/custom.py."""

    async def dispatch(self, request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        response.headers["x-yours"] = "1"
        return response


def test_the_ladder_follows_the_stack_a_middleware_of_yours_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(custom, "MIDDLEWARE", (YoursAddsAHeader,))
    result = CliRunner().invoke(cli, ["bench", "app", "--ladder", "--engine", "none", "--path",
                                      "/health/", "--duration", "0.3"], env=WIDE)
    assert result.exit_code == 0, result.output
    names = rows(result.stdout)
    # Then bare FastAPI and bare notslowapi, where installed (this project's framework is).
    framework_rungs = [name for name in names if name.endswith(", set up as the app")]
    assert f"{FRAMEWORK}, set up as the app" in framework_rungs, names
    assert names[:4 + len(framework_rungs) + 1] == [
        ladder.RAW, ladder.STARLETTE, ladder.DEFAULTS, ladder.SAME_SETUP, *framework_rungs,
        ladder.NO_MIDDLEWARE], names
    assert names[-1] == ladder.AS_SERVED
    # Yours after the Host check and outside the template's own 500s, as served; the
    # 500s just outside yours are a rung too, named apart.
    assert (names.index("+ AllowedHostsMiddleware") < names.index("+ ServerErrorMiddleware")
            < names.index("+ YoursAddsAHeader") < names.index("+ ServerErrorMiddleware (2)")
            ), names
    assert "in-process (no server)" in result.stdout and "about " in result.stdout
    # The rung of yours is built with it, the rung below without it.
    case = ladder.Case(Route("/health/"))
    for name, header in (("+ AllowedHostsMiddleware", None), ("+ YoursAddsAHeader", "1")):
        with TestClient(ladder.rung_named(case, name)) as client:
            assert client.get("/health/").headers.get("x-yours") == header, name


def test_the_ladder_climbs_only_the_rungs_asked_and_the_baseline() -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--ladder", "--engine", "none", "--path",
                                      "/health/", "--duration", "0.3", "--rung", "AS SERVED",
                                      "--rung", "+ requestid"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert rows(result.stdout) == [ladder.SAME_SETUP, "+ RequestIdMiddleware",
                                   ladder.AS_SERVED], result.stdout
    # The title wraps where its width falls (the rounds' count is in it): words, not lines.
    words = " ".join(result.stdout.split())
    assert "3 rungs" in words and "--rung: each step is over the row above" in words


def test_a_climb_that_ends_at_the_baseline_does_not_compare_it_with_itself() -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--ladder", "--engine", "none", "--path",
                                      "/health/", "--duration", "0.3", "--rung", "raw"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert rows(result.stdout) == [ladder.RAW, ladder.SAME_SETUP]
    assert "from the same" not in result.stdout, result.stdout


def get(url: str, headers: tuple[tuple[str, str], ...]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.parametrize("engine", list(served.ENGINES))
def test_each_served_rung_is_the_app_it_is_named_after(engine: str) -> None:
    case = ladder.Case(user_like.ROUTE, user_like=True)
    answers = {}
    for config in ladder.served_configs(case, engine, [ladder.RAW, ladder.SAME_SETUP,
                                                       ladder.AS_SERVED]):
        with harness.booted(config, None) as (url, _):
            answers[config.rung] = (get(url + case.route.path, case.route.headers),
                                    get(url + case.route.path, ()))
    (status, headers, body), _ = answers[ladder.RAW]
    assert (status, body) == (200, ladder.RAW_BODY) and "x-request-id" not in headers
    for rung, request_id in ((ladder.SAME_SETUP, False), (ladder.AS_SERVED, True)):
        (status, headers, body), unauthorized = answers[rung]
        assert (status, json.loads(body)) == (200, {"item_id": 42, "user": "bench"}), rung
        assert ("x-request-id" in headers) is request_id, (rung, headers)
        assert unauthorized[0] == 401, rung  # the router's header dependency ran


# Every rung is built the same way served or in-process (ladder.rung_named, climbed
# whole in-process above); through a server, a few rungs of each kind keep the climb
# short: the whole ladder is 16 boots a round, and more rounds on a busy machine.
@pytest.mark.parametrize(("asked", "climbed"), [
    (("--rung", "raw", "--rung", "starlette", "--rung", "+ metrics"),
     [ladder.RAW, ladder.STARLETTE, ladder.SAME_SETUP, "+ MetricsMiddleware"]),
    (("--rung", "as served"), [ladder.SAME_SETUP, ladder.AS_SERVED]),
])
def test_bench_app_ladder_climbs_through_a_real_server(asked: tuple[str, ...],
                                                       climbed: list[str]) -> None:
    served.require("granian")
    result = CliRunner().invoke(cli, [
        "bench", "app", "--ladder", "--engine", "granian", "--path", "/health/",
        "--rounds", "1", "--warmup", "0", "--duration", "0.2", *asked], env=WIDE)
    assert result.exit_code == 0, result.output
    # Two tables, in-process and through granian, each the rungs asked and the baseline.
    assert rows(result.stdout) == climbed + climbed, result.stdout
    assert "granian / " in result.stdout and "server CPU µs per request on GET /health/" \
        in result.stdout
    assert "took " in result.stdout


@pytest.mark.parametrize(("args", "sentence"), [
    (["--engine", "nginx"], "unknown engine 'nginx'"),
    (["--path", "/nowhere"], "is not a route of this app's routers"),
    (["--rung", "+ Nginx"], "no rung but the baseline is named like '+ Nginx': the rungs "
                            "are 'raw ASGI'"),
    (["--rung", "as served", "--rung", "Same Setup"],  # the baseline is climbed anyway
     "no rung but the baseline is named like 'Same Setup'"),
])
def test_bench_app_ladder_refuses_with_a_sentence(args: list[str], sentence: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--ladder", *args])
    assert result.exit_code == 2
    assert "Cannot bench:" in result.stderr and sentence in result.stderr


def test_bench_app_refuses_engines_without_the_ladder() -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--engine", "granian"])
    assert result.exit_code == 2
    assert "--engine chooses the engines of --ladder" in result.stderr
    result = CliRunner().invoke(cli, ["bench", "app", "--rung", "as served"])
    assert result.exit_code == 2
    assert "--rung chooses rungs of --ladder" in result.stderr


def test_each_pair_of_rungs_is_compared_in_the_rounds_where_both_were_kept() -> None:
    # Three rungs, the middle one the baseline; None: a slice set aside.
    rounds = [[10.0, 20.0, 30.0], [None, 22.0, 33.0], [12.0, None, 36.0]]
    low, base, top = ladder_report.figures(["low", "base", "top"], rounds, reference=1)
    assert top.ratio is not None and (top.ratio.median, top.ratio.n) == (1.5, 2)
    assert top.step is not None and (top.step.median, top.step.n) == (10.5, 2)
    assert base.step is not None and (base.step.median, base.step.n) == (10.0, 1)
    assert low.ratio is not None and (low.ratio.median, low.ratio.n) == (0.5, 1)
    assert low.cost is not None and (low.cost.median, low.cost.n) == (11.0, 2)
