"""Keys and values in Confluent's wire format, decoded with the cluster's Schema Registry for the tail's viewers.

A :class:`SchemaDecoder` belongs to one reader (a live fetcher's thread, or a session's backlog reads on the
tail's thread pool, one call at a time) and runs there, never on the event loop: a schema the process has not
seen yet is read from Postgres. Anything that looks framed but does not decode (not a registered id, bytes that
do not fit the schema, the store unreachable) is ``None``: the record is shown as it is,
with no error for the viewer. Ids the registry does not know are remembered for a while, so a topic of binary
records that merely start with a zero byte does not cost a query each.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import DatabaseError, connection

from controlplane.clusters.models import Cluster
from controlplane.registry import serde
from controlplane.registry.errors import RegistryError
from dataplane.schemas import wire

log = logging.getLogger(__name__)

UNKNOWN_ID_SECONDS = 30.0  # how long an id the registry did not know is not asked for again
_UNKNOWN_LIMIT = 1024


class SchemaDecoder:
    """Decodes framed keys and values for one cluster; confined to its reader's thread (see the module)."""

    def __init__(self, cluster_pk: Any) -> None:
        # Only the primary key is used (the registry's lookups and serde's cache key), so no query is made here.
        self._cluster = Cluster(pk=cluster_pk)
        self._unknown: dict[int, float] = {}

    def __call__(self, data: bytes) -> serde.Decoded | None:
        """``data`` decoded, or None when it is not a record the cluster's registry can decode."""
        if not serde.looks_framed(data):
            return None
        schema_id = int.from_bytes(data[1:5], "big")
        now = time.monotonic()
        until = self._unknown.get(schema_id)
        if until is not None and until > now:
            return None
        try:
            return serde.decode(self._cluster, data)
        except RegistryError:
            if len(self._unknown) >= _UNKNOWN_LIMIT:
                self._unknown.clear()
            self._unknown[schema_id] = now + UNKNOWN_ID_SECONDS
        except (wire.WireFormatError, wire.PayloadError):
            pass
        except DatabaseError:
            log.warning("tail: the schema registry's store is unreachable; records shown undecoded", exc_info=True)
            connection.close()  # this thread's; the next decode reconnects
        return None

    def close(self) -> None:
        """Release this thread's database connection (a live fetcher's thread ends with its fetcher)."""
        connection.close()

    def release(self) -> None:
        """After a backlog read on a pool thread: close the connection a schema lookup opened, if one did, so
        the pool's threads (up to its size, per web process) never hold Postgres connections between reads."""
        if connection.connection is not None:
            connection.close()
