# Types of the compiled produce encoder (dataplane/protocol/_encode.pyx).
from collections.abc import Sequence

Header = tuple[str, bytes | None]  # name (sent as UTF-8), value
Headers = list[Header] | tuple[Header, ...] | None  # None and empty both mean no headers
ProduceRecord = tuple[bytes | None, bytes | None, Headers, int]  # key, value, headers, timestamp ms

def murmur2(key: bytes) -> int: ...
def partition_for_key(key: bytes, partitions: int) -> int: ...
def encode_batch(
    records: Sequence[ProduceRecord], producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes: ...
