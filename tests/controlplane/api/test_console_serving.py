"""The web console is served on the API's port: hashed assets, index.html for client routes, and the API's
own paths (including unknown ones) untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.test.utils import override_settings


@pytest.fixture
def built(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    index = '<!doctype html><div id="root"></div><script src="/assets/app-1a2b.js"></script>'
    (tmp_path / "index.html").write_text(index)
    (tmp_path / "assets" / "app-1a2b.js").write_text("console.log('sluice')")
    return tmp_path


@pytest.mark.django_db
def test_client_routes_get_the_index_and_a_csrf_cookie(built: Path) -> None:
    with override_settings(CONSOLE_DIR=built):
        for path in ["/", "/login", "/t/acme/clusters/1b2c/topics/orders?tab=tail"]:
            response = Client().get(path)
            assert response.status_code == 200, path
            assert b'id="root"' in response.content
            assert response["Cache-Control"] == "no-cache"
            assert "csrftoken" in response.cookies


def test_assets_are_cached_forever_and_missing_ones_are_404(built: Path) -> None:
    with override_settings(CONSOLE_DIR=built):
        response = Client().get("/assets/app-1a2b.js")
        assert response.status_code == 200
        assert b"".join(response.streaming_content) == b"console.log('sluice')"  # type: ignore[attr-defined]
        assert "immutable" in response["Cache-Control"]
        missing = Client().get("/assets/nope.js")
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"
        assert Client().get("/assets/../index.html").status_code == 404


@pytest.mark.django_db
def test_the_api_keeps_its_paths(built: Path) -> None:
    with override_settings(CONSOLE_DIR=built):
        client = Client()
        unknown = client.get("/api/v1/no-such-thing")
        assert unknown.status_code == 404
        assert unknown["Content-Type"].startswith("application/json")
        assert client.get("/api/v1/me").status_code in (401, 403)
        assert client.get("/kafka/v3/clusters").status_code == 401
        assert client.get("/healthz").status_code in (200, 503)
        assert client.get("/admin/login/").status_code == 200
        assert client.post("/t/acme/clusters").status_code == 405


def test_an_unbuilt_console_says_how_to_build_it(tmp_path: Path) -> None:
    with override_settings(CONSOLE_DIR=tmp_path / "missing"):
        response = Client().get("/")
        assert response.status_code == 503
        assert "make console" in response.json()["message"]
