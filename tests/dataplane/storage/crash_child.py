"""Child process for the crash tests: append, fsync, report; killed at random moments.

Usage: python crash_child.py <log dir> <seed>. After each flush it prints the log end
offset that is now durable, so the parent knows what must survive a SIGKILL.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from dataplane.protocol.records import Compression, Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log

CONFIG = LogConfig(segment_bytes=48 * 1024, index_interval_bytes=1024)


def value_for(offset: int) -> bytes:
    return (b"value-%d-" % offset) * (1 + offset % 7)


def main() -> None:
    path, seed = Path(sys.argv[1]), int(sys.argv[2])
    rnd = random.Random(seed)
    log = Log.open(path, CONFIG)
    out = sys.stdout
    out.write(f"open {log.log_end_offset}\n")
    out.flush()
    while True:
        for _ in range(rnd.randint(1, 4)):
            base = log.log_end_offset
            n = rnd.randint(1, 20)
            recs = [Record(base + i, 1000 + base + i, b"k%d" % ((base + i) % 13), value_for(base + i))
                    for i in range(n)]
            codec = rnd.choice([Compression.NONE, Compression.NONE, Compression.LZ4, Compression.GZIP])
            log.append_as_leader(build_batch(recs, compression=codec), leader_epoch=0)
        log.flush()
        out.write(f"flushed {log.log_end_offset}\n")
        out.flush()


if __name__ == "__main__":
    main()
