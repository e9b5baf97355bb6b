"""JSON for the REST Proxy's hot paths: orjson where it can, the standard library where it cannot.

orjson parses and writes JSON several times faster than :mod:`json` (py-spy: JSON was a fifth of the event
loop's time in ``records:batch``). It refuses a few things :mod:`json` accepts -- integers beyond 64 bits,
NaN and Infinity -- and its error messages differ, so a document orjson refuses is handed to :mod:`json`,
which either parses it or raises the error clients have always seen.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes | str) -> Any:
    """Parse JSON; raises :class:`json.JSONDecodeError` (or UnicodeDecodeError for bytes) as :func:`json.loads`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (``separators=(",", ":")``, ``ensure_ascii=False``), as bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
