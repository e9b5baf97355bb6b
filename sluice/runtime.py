"""Where a Sluice process finds its data services and its var/ directory."""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from sluice.embedded import Services, ensure_services

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_services: Services | None = None


def var_dir() -> Path:
    return Path(os.environ.get("SLUICE_VAR_DIR", PROJECT_ROOT / "var")).resolve()


def ensure_environment(step: Callable[[str], AbstractContextManager[object]] | None = None) -> Services | None:
    """Export DATABASE_URL/REDIS_URL, starting embedded servers for unset ones.

    The servers live as long as this process (or the supervisor that started
    them, when ``sluice up`` is running and they are shared).
    """
    global _services
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return None
    _services = ensure_services(var_dir(), step=step)
    _services.export()
    atexit.register(_services.stop)
    return _services
