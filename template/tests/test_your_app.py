"""Your tests: Copier renders this file once and never changes it again.

`make test` runs them with the template's own (tests/test_*.py), which check the
template's promises through the app as you built it. The app is `create_app()`, with
your routers, middleware and handlers; TestClient works as FastAPI's docs show it
(tests/conftest.py allows its host). The `client` fixture (tests/conftest.py) is the
same app with your lifespan run around the test.
"""

from fastapi.testclient import TestClient

from app.main import create_app

client = TestClient(create_app())


def test_the_service_answers() -> None:
    response = client.get("/health/")
    assert response.status_code == 200


def test_the_client_fixture_serves_the_app(client: TestClient) -> None:
    assert client.get("/health/").json() == {"status": "ok"}
