# Types of the compiled decoder (dataplane/protocol/_columns.pyx).
from collections.abc import Sequence

from typing_extensions import Buffer

Binary = tuple[bytearray | None, bytearray, bytearray, int]  # validity or None, int32 offsets, data, null count

class Columns:
    count: int
    offsets: bytearray
    timestamps: bytearray
    timestamp_types: bytearray
    keys: Binary
    values: Binary
    headers: tuple[bytearray | None, bytearray, int, Binary, Binary] | None
    next_offset: int
    done: bool

def decode_columns(records: Buffer | None, start: int, end: int, *, include_headers: bool = False,
                   micros: bool = True, aborted: Sequence[tuple[int, int]] | None = None) -> Columns: ...
