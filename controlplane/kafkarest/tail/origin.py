"""Cross-site WebSocket hijacking guard: a browser's ``Origin`` must be this site or an allowed one.

Browsers always send ``Origin`` on a WebSocket upgrade and attach cookies even to another site's
page, so a session-cookie viewer must come from the console's own origin. A client that sends no
``Origin`` is not a browser (it authenticates with an API key, which a foreign page cannot read), so it
is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit


def _normalise(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(origin: str | None, host: str | None, allowed: Iterable[str]) -> bool:
    """``origin`` is the Origin header (None when absent), ``host`` the Host header, ``allowed`` the
    configured origins (``scheme://host[:port]``, or ``*`` for any)."""
    if origin is None:
        return True
    normalised = _normalise(origin)
    allowed = {_normalise(item) for item in allowed}
    if "*" in allowed or normalised in allowed:
        return True
    if normalised == "null" or host is None:
        return False
    netloc = urlsplit(normalised).netloc
    return bool(netloc) and netloc == host.strip().lower()
