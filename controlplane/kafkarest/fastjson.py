"""JSON for the REST Proxy's hot paths: orjson where it can, the standard library where it cannot.

orjson parses and writes JSON several times faster than :mod:`json` (py-spy: JSON was a fifth of the event
loop's time in ``records:batch``). It differs on a few things :mod:`json` accepts: it reads an integer beyond
64 bits as a float (the value would change), refuses NaN and Infinity, and words its errors differently. So a
document with a run of 19 or more digits, or one orjson refuses, is handed to :mod:`json`, which either parses
it exactly or raises the error clients have always seen.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# Where an integer could pass 64 bits (2**63 has 19 digits). A base64 string may hold such a run too: that
# document merely takes the slower parser.
_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(data: bytes) -> Any:
    """Parse JSON; raises :class:`json.JSONDecodeError` (or UnicodeDecodeError) as :func:`json.loads`."""
    if _LONG_DIGITS.search(data) is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (``separators=(",", ":")``, ``ensure_ascii=False``), as bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
