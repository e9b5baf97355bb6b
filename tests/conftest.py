"""Shared fixtures. Postgres and Redis come from the sluice.pytest_plugin."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _fast_password_hashing(request: pytest.FixtureRequest) -> None:
    """PBKDF2's deliberate slowness is for production; tests only need a real hasher."""
    if "settings" in request.fixturenames or request.node.get_closest_marker("django_db"):
        settings: Any = request.getfixturevalue("settings")
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
