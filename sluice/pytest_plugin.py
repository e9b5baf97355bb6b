"""pytest plugin: real Postgres and Redis for the whole test session.

Loaded with ``-p sluice.pytest_plugin`` (see pyproject). When DATABASE_URL /
REDIS_URL are unset it starts embedded servers in a temporary directory
*before* pytest-django sets Django up, exports their URLs (so xdist workers
inherit them) and stops them when the session ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from sluice.embedded import Services, ensure_services

_started: Services | None = None
_tmp: Path | None = None


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, Any, Any]:
    global _started, _tmp
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        _tmp = Path(tempfile.mkdtemp(prefix="sluice-test-"))
        os.environ.setdefault("SLUICE_VAR_DIR", str(_tmp / "var"))
        _started = ensure_services(_tmp, ephemeral=True)
        _started.export()
    os.environ.setdefault("SLUICE_VAR_DIR", tempfile.mkdtemp(prefix="sluice-test-var-"))
    return (yield)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _started
    if _started is not None:
        _started.stop()
        _started = None
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)
