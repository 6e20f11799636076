"""`bench app --ladder`: one route's cost rung by rung, from raw ASGI to the app as served.

Each rung changes one thing over the one before: raw ASGI, Starlette, `FastAPI()` with
its defaults (a reference), bare FastAPI with create_app's options (the baseline), bare
FastAPI and bare notslowapi on the same route (bench/frameworks.py), this
app with no middleware, then one rung per layer of app.middleware.middleware_layers(),
outermost first (neighbouring template layers fused as create_app fuses them), and the
app as every engine serves it. The rungs come from the code at run time, so the ladder
follows the stack; served, each runs behind the launcher (bench/ladder_serve.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from bench.model import Config, Launch
from bench.route import Route

RUNG_ENV = "BENCH_LADDER_RUNG"  # the rung a served ladder process builds, as JSON
RAW = "raw ASGI"
STARLETTE = "Starlette"
DEFAULTS = "FastAPI() defaults"
SAME_SETUP = "bare FastAPI, same setup"
NO_MIDDLEWARE = "this app, no middleware"
AS_SERVED = "as served (every layer)"
RAW_BODY = b'{"status":"ok"}'


@dataclass(frozen=True)
class Case:
    """A route to climb the ladder on; `user_like` includes bench/user_like.py's router
    after yours, where a router of app/routes/ stands."""

    route: Route
    user_like: bool = False

    def extra_routers(self) -> tuple[Any, ...]:
        from bench import user_like

        return (user_like.router,) if self.user_like else ()

    def to_json(self) -> str:
        return json.dumps({"path": self.route.path_template, "params": self.route.path_params,
                           "headers": self.route.headers, "user_like": self.user_like})

    @classmethod
    def from_json(cls, text: str) -> Case:
        data = json.loads(text)
        return cls(Route(data["path"], data["params"],
                         headers=tuple(tuple(pair) for pair in data["headers"])),
                   data["user_like"])


@dataclass(frozen=True)
class Rung:
    name: str
    build: Callable[[], Any]  # the rung's ASGI app, built when called


async def raw_asgi(scope: dict[str, Any], receive: Callable[..., Any],
                   send: Callable[..., Any]) -> None:
    """The floor: no routing, no parsing, one fixed answer (and the lifespan, which
    every engine here sends)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(RAW_BODY)).encode())]})
    await send({"type": "http.response.body", "body": RAW_BODY})


def starlette_app(route: Route) -> Any:
    """Starlette's routing and response on the route's path, its parameters echoed."""
    from app.core.framework import JSONResponse, Request, Starlette
    from app.core.framework import Route as StarletteRoute

    async def endpoint(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", **request.path_params})

    return Starlette(routes=[StarletteRoute(urlsplit(route.path_template).path, endpoint)])


def framework_rungs(case: Case) -> list[Rung]:
    """Bare FastAPI and bare notslowapi (the installed ones), each set up as the app is,
    on /health/ or the user-like route (a route of yours is built with one framework)."""
    from bench import frameworks

    path = urlsplit(case.route.path_template).path
    if frameworks.bare_app(frameworks.FRAMEWORK, path, case.user_like) is None:
        return []
    return [Rung(f"{package}, set up as the app",
                 partial(frameworks.bare_app, package, path, case.user_like))
            for package in frameworks.packages()]


def layer_name(layer: object) -> str:
    """A class's name, or a Starlette Middleware's class name, or the factory's."""
    made = getattr(layer, "cls", layer)
    return str(getattr(made, "__name__", made))


def rungs(case: Case, serve: Callable[[Any], Any] | None = None,
          only: Sequence[str] = ()) -> list[Rung]:
    """The rungs, bottom first (nothing is built until a rung's `build` is called).
    `serve` wraps the app as the launcher does (create_served_app, by default); `only`:
    see `chosen`."""
    from app import custom
    from app.main import create_app, fastapi_options, routers
    from app.middleware import middleware_layers
    from app.routes import discovered_routers
    from bench.app_overhead import bare_fastapi, owning_router

    if serve is None:
        from serving.served_app import create_served_app as serve
    extra = case.extra_routers()
    user_routers = [*discovered_routers(), *extra]
    owner = owning_router([*routers(), *extra], case.route)
    layers = middleware_layers(custom.MIDDLEWARE)

    def with_layers(count: int | None) -> Callable[[], Any]:
        taken = None if count is None else layers[:count]
        return lambda: create_app(middleware=taken, user_routers=user_routers)

    climbed = [
        Rung(RAW, lambda: raw_asgi),
        Rung(STARLETTE, lambda: starlette_app(case.route)),
        Rung(DEFAULTS, lambda: bare_fastapi(owner, {})),
        Rung(SAME_SETUP, lambda: bare_fastapi(owner, fastapi_options())),
        *framework_rungs(case),
        Rung(NO_MIDDLEWARE, with_layers(0)),
        *(Rung(f"+ {layer_name(layer)}", with_layers(count))
          for count, layer in enumerate(layers[:-1], start=1)),
        Rung(AS_SERVED, lambda: serve(with_layers(None)())),  # type: ignore[misc]
    ]
    # A class twice in the stack (the 500s just outside a middleware of yours, and
    # within it): each rung still has a name of its own.
    for index, rung in enumerate(climbed):
        same = sum(1 for earlier in climbed[:index] if earlier.name.split(" (")[0] == rung.name)
        if same:
            climbed[index] = Rung(f"{rung.name} ({same + 1})", rung.build)
    return chosen(climbed, only)


def chosen(climbed: list[Rung], only: Sequence[str]) -> list[Rung]:
    """The rungs whose names contain one of `only` (any case), and the baseline, bottom
    first: a round of fewer rungs is shorter. Every rung when `only` is empty."""
    if not only:
        return climbed
    others = [rung for rung in climbed if rung.name != SAME_SETUP]
    wanted = [text.lower() for text in only]
    for text, asked in zip(wanted, only, strict=True):
        # The baseline is climbed anyway: a text that names only it asks for nothing.
        if not text.strip() or not any(text in rung.name.lower() for rung in others):
            raise ValueError(f"no rung but the baseline is named like {asked!r}: the "
                             f"rungs are {', '.join(repr(rung.name) for rung in climbed)}.")
    return [rung for rung in climbed
            if rung.name == SAME_SETUP or any(text in rung.name.lower() for text in wanted)]


def rung_named(case: Case, name: str, serve: Callable[[Any], Any] | None = None) -> Any:
    """The app of the rung called `name` (a served ladder process builds one)."""
    for rung in rungs(case, serve):
        if rung.name == name:
            return rung.build()
    raise ValueError(f"no rung {name!r} on this ladder")


@dataclass(frozen=True)
class RungConfig(Config):
    """One rung served by one engine through the project's launcher."""

    rung: str = ""
    case: str = ""  # Case.to_json()

    @property
    def label(self) -> str:
        return f"{self.engine}: {self.rung}"

    def launch(self) -> Launch:
        case = Case.from_json(self.case)
        return Launch("bench.ladder_serve",
                      ((RUNG_ENV, json.dumps({"rung": self.rung, "case": self.case})),),
                      case.route)


def served_configs(case: Case, engine: str, names: Sequence[str]) -> list[RungConfig]:
    from app.core import loops

    return [RungConfig(engine, loops.AUTO, rung=name, case=case.to_json()) for name in names]
