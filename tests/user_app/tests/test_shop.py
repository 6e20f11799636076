"""The user's own test, as FastAPI's docs write one."""

from app.main import create_app
from fastapi.testclient import TestClient


def test_an_item_comes_from_the_database() -> None:
    with TestClient(create_app()) as client:
        answer = client.get("/shop/items/1")
    assert answer.status_code == 200
    assert answer.json()["name"] == "kettle"
