"""Shared fixtures. Postgres and Redis come from the sluice.pytest_plugin."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sluice.objectstore import ObjectStoreServer, start_object_store


@pytest.fixture(autouse=True)
def _fast_password_hashing(request: pytest.FixtureRequest) -> None:
    """PBKDF2's deliberate slowness is for production; tests only need a real hasher."""
    if "settings" in request.fixturenames or request.node.get_closest_marker("django_db"):
        settings: Any = request.getfixturevalue("settings")
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStoreServer]:
    """The embedded S3-compatible store (s3rver), one per test session and xdist worker; give each test its own
    key prefix. Stopped by its process id at the end."""
    server = start_object_store(tmp_path_factory.mktemp("objectstore"))
    try:
        yield server
    finally:
        server.stop()
