"""Child process for the crash tests: append, fsync, report; killed at random moments.

Usage: python crash_child.py <log dir> <seed> [compact]. After each flush it prints the
log end offset that is now durable, so the parent knows what must survive a SIGKILL.
With ``compact`` it also runs compaction and retention between appends, so kills land
inside the ``.cleaned``/``.swap``/``.deleted`` renames too.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from dataplane.protocol.records import Compression, Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log

CONFIG = LogConfig(segment_bytes=48 * 1024, index_interval_bytes=1024)
COMPACT_CONFIG = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=1024, cleanup_policy="compact",
                           delete_retention_ms=10**13)
KEYS = 13


def value_for(offset: int) -> bytes:
    return (b"value-%d-" % offset) * (1 + offset % 7)


def key_for(offset: int) -> bytes:
    return b"k%d" % (offset % KEYS)


def main() -> None:
    path, seed = Path(sys.argv[1]), int(sys.argv[2])
    compact = len(sys.argv) > 3 and sys.argv[3] == "compact"
    rnd = random.Random(seed)
    log = Log.open(path, COMPACT_CONFIG if compact else CONFIG)
    out = sys.stdout
    out.write(f"open {log.log_end_offset}\n")
    out.flush()
    while True:
        for _ in range(rnd.randint(1, 4)):
            base = log.log_end_offset
            n = rnd.randint(1, 20)
            recs = [Record(base + i, 1000 + base + i, key_for(base + i), value_for(base + i))
                    for i in range(n)]
            codec = rnd.choice([Compression.NONE, Compression.NONE, Compression.LZ4, Compression.GZIP])
            log.append_as_leader(build_batch(recs, compression=codec), leader_epoch=0)
        log.flush()
        out.write(f"flushed {log.log_end_offset}\n")
        out.flush()
        if compact and rnd.random() < 0.5:
            log.compact()
            log.checkpoint()


if __name__ == "__main__":
    main()
