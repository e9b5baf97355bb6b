"""Values every response needs, shared by the request handlers and whoever else answers on the wire."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.errors import ErrorCode

ZERO = datetime.timedelta(0)  # no throttle


def wire(code: ErrorCode | int) -> WireError:
    """Our error code as the codec's enum member (same number)."""
    return WireError(int(code))
