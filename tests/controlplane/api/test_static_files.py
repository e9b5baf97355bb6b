"""The admin's and Swagger UI's static files are served by the app itself (WhiteNoise over the apps' static
directories), through the sync handler (the test client, WSGI) and the async one (uvicorn under ``sluice up``),
and the API docs page loads Swagger UI from them rather than from a CDN."""

from __future__ import annotations

import asyncio
import re

import pytest
from django.test import AsyncClient, Client


def test_admin_css_is_served_sync() -> None:
    response = Client().get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_admin_css_and_swagger_ui_are_served_async() -> None:
    asyncio.run(_served_async())


async def _served_async() -> None:
    client = AsyncClient()
    css = await client.get("/static/admin/css/base.css")
    assert css.status_code == 200
    assert css["Content-Type"].startswith("text/css")
    assert int(css["Content-Length"]) == len(css.content) > 0
    bundle = await client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert bundle.status_code == 200
    assert b"SwaggerUI" in bundle.content
    # Revalidation answers 304 without a body.
    again = await client.get("/static/admin/css/base.css", headers={"If-None-Match": css["ETag"]})
    assert again.status_code == 304


def test_a_missing_static_file_is_the_apis_json_404() -> None:
    response = asyncio.run(AsyncClient().get("/static/admin/css/nope.css"))
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_api_docs_reference_only_local_assets(django_user_model: type) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("docs-reader", password="x-long-password-1"))
    html = client.get("/api/docs/").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("swagger-ui-bundle.js" in src for src in sources), sources
    assert all(src.startswith("/") for src in sources), sources
    assert "cdn." not in html and "jsdelivr" not in html
