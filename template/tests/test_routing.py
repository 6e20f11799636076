"""The app serves every route exactly as FastAPI serves it.

A differential test: `create_app()` (without middleware, which adds headers by design)
against a plain FastAPI app that includes the same routers the documented way, with
routers shaped like a user's (router and route dependencies, overrides, a custom
response class, OpenAPI options, a WebSocket with a dependency). Both must give the
same OpenAPI document, byte for byte, and the same status, headers and body to every
request, also behind a path prefix (root_path), and the same reverse lookups.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from app import custom
from app.api import examples, health
from app.core.asgi import Scope
from app.core.framework import (
    APIRoute,
    APIRouter,
    Depends,
    FastAPI,
    Header,
    Host,
    HTTPException,
    Match,
    PlainTextResponse,
    Query,
    Route,
    Router,
    StaticFiles,
    TestClient,
    WebSocket,
    WebSocketDisconnect,
    WebSocketException,
    status,
)
from app.core.settings import PROJECT_NAME, get_settings
from app.main import STATIC_DIR, create_app, fastapi_options

TOKEN = {"Authorization": "Bearer letmein"}


def require_token(authorization: str = Header(default="")) -> None:
    if authorization != TOKEN["Authorization"]:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Not authenticated")


def deny() -> None:
    raise HTTPException(status.HTTP_401_UNAUTHORIZED, "Denied")


def database() -> str:
    return "real database"


def ws_token(token: str = Query(default="")) -> str:
    if token != "letmein":
        raise WebSocketException(code=status.WS_1008_POLICY_VIOLATION)
    return token


class Item(BaseModel):
    item_id: int
    note: str | None = None


# Like a router in app/routes/: everything on it needs a token.
private = APIRouter(prefix="/private", tags=["private"], dependencies=[Depends(require_token)],
                    responses={404: {"description": "No such item"}})


@private.get("/items/{item_id}", response_model=Item, response_model_exclude_none=True,
             operation_id="read_private_item", deprecated=True, summary="One item",
             openapi_extra={"x-audit": "yes"})
async def read_item(item_id: int, db: str = Depends(database)) -> dict[str, Any]:
    return {"item_id": item_id, "note": None if db == "real database" else db}


@private.post("/items/", status_code=status.HTTP_201_CREATED, response_model=Item)
async def create_item(item: Item) -> Item:
    return item


# Open router, with a route-level dependency on one route only.
public = APIRouter(prefix="/public")


@public.get("/open", response_class=PlainTextResponse)
async def open_route() -> str:
    return "open"


@public.get("/closed", dependencies=[Depends(deny)])
async def closed_route() -> dict[str, str]:
    return {"leaked": "yes"}


@public.websocket("/ws")
async def ws_route(websocket: WebSocket, token: str = Depends(ws_token)) -> None:
    await websocket.accept()
    await websocket.send_text(f"hello {token}")
    await websocket.close()


USER_ROUTERS = (private, public)

# (method, path, headers, body): the request set both apps answer.
REQUESTS: list[tuple[str, str, dict[str, str], bytes]] = [
    ("GET", "/openapi.json", {}, b""),
    ("GET", "/docs", {}, b""),
    ("GET", "/health/", {}, b""),
    ("HEAD", "/health/", {}, b""),
    ("POST", "/health/", {}, b""),                      # 405
    ("GET", "/health", {}, b""),                        # redirect to /health/
    ("GET", "/demo/items/7", {}, b""),
    ("GET", "/demo/items/x", {}, b""),                  # 422
    ("GET", "/static/hello.txt", {}, b""),
    ("GET", "/missing", {}, b""),
    ("GET", "/private/items/3", {}, b""),               # 401 from the router
    ("GET", "/private/items/3", TOKEN, b""),
    ("HEAD", "/private/items/3", TOKEN, b""),
    ("POST", "/private/items/3", TOKEN, b""),           # 405
    ("POST", "/private/items/", TOKEN, b'{"item_id": 5, "note": "n"}'),
    ("POST", "/private/items/", {}, b'{"item_id": 5}'),
    ("GET", "/private/items", TOKEN, b""),              # 307 to /private/items/, then 405
    ("GET", "/public/open", {}, b""),
    ("GET", "/public/closed", {}, b""),                 # 401 from the route
]


def plain_app() -> FastAPI:
    """What the app is, built only from FastAPI's documented calls, with what you add
    in app/custom.py (your lifespan, and your handlers from `customize`): the two
    must route alike, whatever your handlers answer."""
    app = FastAPI(title=PROJECT_NAME, lifespan=getattr(custom, "lifespan", None))
    for router in USER_ROUTERS:  # yours first, then /health/ and /static, then the examples
        app.include_router(router)
    app.include_router(health.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for router in examples.ROUTERS:
        app.include_router(router)
    custom.customize(app)
    return app


@pytest.fixture(autouse=True)
def api_docs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """FastAPI's documentation routes are compared too: on, as WEBSERVER_API_DOCS=true
    serves them (they are off by default, docs/security.md)."""
    monkeypatch.setenv("WEBSERVER_API_DOCS", "true")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def template_app() -> FastAPI:
    return create_app(middleware=(), user_routers=USER_ROUTERS)


class Recorded:
    """The app with the scope of the last request kept (routing fills it in)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.scope: dict[str, Any] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            self.scope = scope
        await self.app(scope, receive, send)


def answers(app: FastAPI, root_path: str = "") -> Iterator[tuple[Any, ...]]:
    recorded = Recorded(app)
    with TestClient(recorded, root_path=root_path) as client:
        for method, path, headers, body in REQUESTS:
            response = client.request(method, root_path + path, headers=headers, content=body,
                                       follow_redirects=False)
            route = recorded.scope.get("route")
            yield (method, path, response.status_code, sorted(response.headers.items()),
                   response.content, getattr(route, "path", None))


@pytest.fixture(params=[False, True], ids=["plain", "overridden"])
def apps(request: pytest.FixtureRequest) -> tuple[FastAPI, FastAPI]:
    plain, ours = plain_app(), template_app()
    if request.param:
        for app in (plain, ours):
            app.dependency_overrides[database] = lambda: "test database"
    return plain, ours


def test_the_openapi_document_is_fastapis_byte_for_byte(apps: tuple[FastAPI, FastAPI]) -> None:
    plain, ours = apps
    with TestClient(plain) as expected, TestClient(ours) as served:
        assert served.get("/openapi.json").content == expected.get("/openapi.json").content


@pytest.mark.parametrize("root_path", ["", "/api"])
def test_every_request_gets_fastapis_answer(apps: tuple[FastAPI, FastAPI], root_path: str) -> None:
    plain, ours = apps
    assert list(answers(ours, root_path)) == list(answers(plain, root_path))


def test_dependencies_guard_the_routes() -> None:
    """Stated, not compared: a plain app that dropped them would also agree."""
    with TestClient(template_app()) as client:
        assert client.get("/private/items/3").status_code == 401
        assert client.get("/public/closed").status_code == 401
        assert client.get("/private/items/3", headers=TOKEN).json() == {"item_id": 3}
        assert client.post("/private/items/", headers=TOKEN,
                           json={"item_id": 1}).status_code == 201


PATHS = ["/health", "/health/", "/health//", "/health/detailed", "/x/health/", "/healthz",
         "/HEALTH/", "/static", "/static/", "/static/hello.txt", "/api/static/a", "/", ""]


def test_the_prefixed_routes_match_as_fastapis() -> None:
    """app/api/prefixed_routes.py answers "no" early and leaves the rest to FastAPI:
    every path, under every root path, in HTTP and WebSocket scopes, matches as the
    plain APIRoute matches it, with the same child scope."""
    from app.api.prefixed_routes import PrefixedRoute
    from app.core.framework import APIRoute

    async def endpoint() -> dict[str, str]:
        return {}

    pairs = [(PrefixedRoute(path, endpoint), APIRoute(path, endpoint))
             for path in ("/health/", "/health/detailed", "/health.json", "/{name}/x")]
    compared = 0
    for prefixed, plain in pairs:
        for path in PATHS:
            for root_path in ("", "/api", "/health", "/static"):
                for full in {path, root_path + path}:
                    for kind in ("http", "websocket"):
                        scope = {"type": kind, "path": full, "root_path": root_path,
                                 "method": "GET"}
                        assert prefixed.matches(dict(scope)) == plain.matches(dict(scope)), (
                            prefixed.path, scope)
                        compared += 1
    assert compared > 400


def test_health_and_static_come_first_then_yours_then_the_examples() -> None:
    """The order create_app includes routers in (app/main.py, docs/index.md): a path
    the examples also serve is yours, even to a catch-all of yours; /health/ stays the
    probes' and /static the static files'."""
    yours = APIRouter()

    @yours.get("/demo/items/{item_id}")
    @yours.get("/health/")
    @yours.get("/{full_path:path}")
    async def mine() -> PlainTextResponse:
        return PlainTextResponse("yours")

    with TestClient(create_app(middleware=(), user_routers=[yours])) as client:
        assert client.get("/demo/items/1").text == "yours"
        assert client.get("/ws/anything").text == "yours"
        assert client.get("/static/hello.txt").text != "yours"
        assert client.get("/static/hello.txt").status_code == 200
        assert client.get("/health/").text != "yours"
        assert client.get("/health/").status_code == 200


def ours_first(app: FastAPI) -> bool:
    """Whether /health/'s first route comes right after FastAPI's own routes (the docs'),
    before yours. By position, not by path: FastAPI before 0.165 copies the routes of
    an included router into the app, later ones keep the router as one route."""
    own = len(FastAPI(**fastapi_options()).router.routes)
    return app.router.routes.index(health.router.routes[0]) == own


class HtmlOnlyRoute(APIRoute):
    """A single-page app's catch-all that answers browsers only (it matches on a header)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if b"text/html" not in dict(scope["headers"]).get(b"accept", b""):
            return Match.NONE, {}
        return super().matches(scope)


def yours_taking(method: str, path: str) -> APIRouter:
    yours = APIRouter()
    yours.add_api_route(path, lambda: PlainTextResponse("yours"), methods=[method])
    return yours


def host_route() -> APIRouter:
    yours = APIRouter()
    yours.routes.append(Host("{sub}.example.com", app=Router(
        [Route("/{rest:path}", lambda request: PlainTextResponse("yours"))])))
    return yours


def html_only() -> APIRouter:
    yours = APIRouter(route_class=HtmlOnlyRoute)
    yours.add_api_route("/{rest:path}", lambda: PlainTextResponse("yours"))
    return yours


@pytest.mark.parametrize("yours", [
    yours_taking("GET", "/static/{name}"), yours_taking("GET", "/health/{name}"),
    yours_taking("GET", "/{anything}/"), yours_taking("GET", "/static/{name}.css"),
    yours_taking("POST", "/static/{name}"), yours_taking("POST", "/{full_path:path}"),
    host_route(), html_only()], ids=lambda router: getattr(router.routes[0], "path", "host"))
def test_health_and_static_stay_first_against_a_route_of_yours_that_could_take_them(
        yours: APIRouter) -> None:
    """Whatever the request: a Host route, or one matched on a header, also counts."""
    if isinstance(yours.routes[0], Host):
        try:
            FastAPI().include_router(yours)
        except AttributeError:  # FastAPI before 0.165 reads every route's path
            pytest.skip("this FastAPI cannot include a router that holds a Host route")
    headers = {"host": "a.example.com", "accept": "text/html"}
    with TestClient(create_app(middleware=(), user_routers=[yours])) as client:
        for method in ("GET", "POST"):
            for path in ("/static/hello.txt", "/static/x.css"):
                assert client.request(method, path, headers=headers).text != "yours", path
        for path in ("/health/", "/health/detailed"):
            assert client.get(path, headers=headers).text != "yours", path
        assert client.get("/static/hello.txt", headers=headers).text == (
            STATIC_DIR / "hello.txt").read_text()


def test_yours_come_first_when_none_can_take_a_path_of_health_or_static() -> None:
    """Matched first, a request of yours does not pay for the template's routes."""
    yours = APIRouter(prefix="/items")

    @yours.get("/{item_id}")
    @yours.get("/")
    async def mine() -> PlainTextResponse:
        return PlainTextResponse("yours")

    @yours.websocket("/ws")
    async def socket(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("yours")
        await websocket.close()

    app = create_app(middleware=(), user_routers=[yours])
    assert not ours_first(app)
    with TestClient(app) as client:
        assert client.get("/items/1").text == "yours"
        assert client.get("/static/hello.txt").text == (STATIC_DIR / "hello.txt").read_text()
        assert client.get("/health/").json() == {"status": "ok"}
        with client.websocket_connect("/items/ws") as websocket:
            assert websocket.receive_text() == "yours"


@pytest.mark.parametrize("yours", [
    yours_taking("GET", "/static/app.js"), yours_taking("GET", "/{slug}"),
    yours_taking("GET", "/healthz"), yours_taking("GET", "/")],
    ids=["a file path", "a catch-all", "/healthz", "/"])
def test_which_come_first(yours: APIRouter) -> None:
    """Ours stay first where a route of yours could take a path of ours (a file path
    of /static too: what it answers does not depend on your other routes)."""
    could_take = yours.routes[0].path in ("/static/app.js", "/{slug}")
    assert ours_first(create_app(middleware=(), user_routers=[yours])) is could_take


def test_a_router_class_of_yours_keeps_ours_first() -> None:
    """An APIRouter subclass may match more than its routes (FastAPI 0.165 asks the
    included router itself)."""

    class YourRouter(APIRouter):
        pass

    yours = YourRouter()
    yours.add_api_route("/items/{item_id}", lambda item_id: {"item_id": item_id})
    assert ours_first(create_app(middleware=(), user_routers=[yours]))


def test_a_route_of_yours_named_as_ours_keeps_ours_first() -> None:
    yours = APIRouter()
    yours.add_api_route("/api/health", lambda: {"status": "mine"}, name="health")
    assert create_app(middleware=(), user_routers=[yours]).url_path_for("health") == "/health/"


def test_the_route_in_scope_is_the_template_not_the_path() -> None:
    """What instrumentation (OpenTelemetry, Prometheus) names a request by."""
    routes = {(method, path): route for method, path, *_, route in answers(template_app())}
    assert routes["GET", "/private/items/3"] == "/private/items/{item_id}"
    assert routes["GET", "/health/"] == "/health/"


@pytest.mark.parametrize("token", ["letmein", "wrong"])
def test_a_websocket_dependency_is_applied(token: str) -> None:
    def accepted(app: FastAPI) -> str:
        with TestClient(app) as client:
            try:
                with client.websocket_connect(f"/public/ws?token={token}") as websocket:
                    return websocket.receive_text()
            except WebSocketDisconnect as closed:
                return f"closed {closed.code}"

    outcome = accepted(template_app())
    assert outcome == accepted(plain_app())
    assert outcome == ("hello letmein" if token == "letmein" else "closed 1008")


@pytest.mark.parametrize(("name", "params"), [
    ("read_item", {"item_id": 3}), ("health", {}), ("echo", {}), ("open_route", {}),
    ("ws_route", {}),
])
def test_reverse_lookups_are_fastapis(name: str, params: dict[str, Any]) -> None:
    assert template_app().url_path_for(name, **params) == plain_app().url_path_for(name, **params)


@pytest.mark.parametrize("examples", [False, True])
def test_the_example_routes_are_served_only_when_asked(
        monkeypatch: pytest.MonkeyPatch, examples: bool) -> None:
    """Production (no .env) serves /health/ and your routes; the examples are opt-in."""
    monkeypatch.setenv("WEBSERVER_EXAMPLES", str(examples).lower())
    get_settings.cache_clear()
    try:
        with TestClient(create_app(), base_url="http://localhost") as client:
            assert client.get("/health/").status_code == 200
            # Served (200, or what a dependency of yours answers), or not there at all.
            assert (client.get("/demo/items/1").status_code == 404) is not examples
            assert (client.post("/demo/echo", json={}).status_code == 404) is not examples
            if not examples:
                with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws/echo"):
                    pass
    finally:
        get_settings.cache_clear()
