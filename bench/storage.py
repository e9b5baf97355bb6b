"""Storage benchmark: the partition log against plain file I/O on the same bytes.

    python bench/storage.py --size 1G        # full run
    python bench/storage.py --size 64M       # quick run

Appends 1 KiB records in ~64 KiB batches that are built once up front, so the figure is
the log's own cost (validation, CRC-32C, offset stamping, indexing, write), and compares
with a plain sequential ``write()`` loop of the same bytes; then the same with an fsync
per MiB; then reads by offset from the middle of the log (``pread`` into memory and
``os.sendfile`` to a socket drained by a thread) against plain reads of the same byte range; then reopen
after a clean and an unclean shutdown. Runs are interleaved and repeated; the best of
each is reported. Temp files are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane.protocol.records import Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log

MiB = 1024 * 1024
READ_CHUNK = 1 * MiB


def parse_size(s: str) -> int:
    units = {"K": 1024, "M": MiB, "G": 1024 * MiB}
    s = s.strip().upper().removesuffix("B").removesuffix("I")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def make_batch(record_size: int, batch_size: int) -> tuple[bytes, int]:
    value = os.urandom(record_size)
    recs: list[Record] = []
    while True:
        recs.append(Record(len(recs), 1_700_000_000_000, b"key-%d" % len(recs), value))
        if len(build_batch(recs)) > batch_size:
            recs.pop()
            break
    return build_batch(recs), len(recs)


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / MiB / seconds


def settle() -> None:
    """Let the previous run's writeback and discards finish outside any timed section."""
    os.sync()


def plain_write(path: Path, batch: bytes, count: int, fsync_every: int | None) -> float:
    path.unlink(missing_ok=True)
    settle()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t = time.perf_counter()
    since = 0
    for _ in range(count):
        os.write(fd, batch)
        since += len(batch)
        if fsync_every and since >= fsync_every:
            os.fsync(fd)
            since = 0
    if fsync_every:
        os.fsync(fd)
    dt = time.perf_counter() - t
    os.close(fd)
    return dt


def log_write(path: Path, batch: bytes, count: int, config: LogConfig) -> tuple[float, Log]:
    shutil.rmtree(path, ignore_errors=True)
    settle()
    log = Log.open(path, config)
    t = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0)
    if config.flush_messages < 2**62:
        log.flush()
    dt = time.perf_counter() - t
    return dt, log


def plain_read(path: Path, start: int, nbytes: int, mode: str, null_fd: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    t = time.perf_counter()
    pos, end = start, start + nbytes
    while pos < end:
        n = min(READ_CHUNK, end - pos)
        if mode == "sendfile":
            pos += os.sendfile(null_fd, fd, pos, n)
        else:
            pos += len(os.pread(fd, n, pos))
    dt = time.perf_counter() - t
    os.close(fd)
    return dt


def log_read(log: Log, offset: int, nbytes: int, mode: str, null_fd: int) -> tuple[float, int]:
    t = time.perf_counter()
    done = 0
    while done < nbytes:
        region = log.read(offset, READ_CHUNK)
        if region.length == 0:
            break
        if mode == "sendfile":
            sent = 0
            while sent < region.length:
                sent += os.sendfile(null_fd, region.fd, region.position + sent, region.length - sent)
        else:
            os.pread(region.fd, region.length, region.position)
        done += region.length
        offset = region.next_offset
    return time.perf_counter() - t, done


def best(xs: list[float]) -> float:
    return min(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G", help="bytes per run, e.g. 1G, 256M (default 1G)")
    ap.add_argument("--fsync-size", default=None, help="bytes for the fsync runs (default: --size)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    size = parse_size(args.size)
    fsync_size = parse_size(args.fsync_size) if args.fsync_size else size
    root = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir=args.dir))
    # sendfile target: a socket drained by a thread (as a broker's client connection would be).
    tx, rx = socket.socketpair()
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MiB)
    stop = threading.Event()

    def drain() -> None:
        buf = bytearray(4 * MiB)
        while not stop.is_set():
            if rx.recv_into(buf) == 0:
                return

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    try:
        run(root, size, fsync_size, args.rounds, tx.fileno())
    finally:
        stop.set()
        tx.close()
        drainer.join()
        rx.close()
        shutil.rmtree(root, ignore_errors=True)


def run(root: Path, size: int, fsync_size: int, rounds: int, null_fd: int) -> None:
    batch, per_batch = make_batch(1024, 64 * 1024)
    count = size // len(batch)
    fcount = fsync_size // len(batch)
    total = count * len(batch)
    ftotal = fcount * len(batch)
    print(f"batch: {len(batch)} bytes, {per_batch} records of 1 KiB; {count} batches = {total / MiB:.0f} MiB")
    plain_path = root / "plain.bin"
    log_path = root / "t-0"
    nofsync = LogConfig()
    # Same cadence as the plain loop, which fsyncs once at least 1 MiB has been written.
    batches_per_fsync = -(-MiB // len(batch))
    flush_cfg = LogConfig(flush_messages=batches_per_fsync * per_batch)

    # warm-up: a small run of each, discarded
    plain_write(plain_path, batch, min(count, 256), None)
    _, wl = log_write(log_path, batch, min(count, 256), nofsync)
    wl.close()

    res: dict[str, list[float]] = {k: [] for k in ("pw", "lw", "pf", "lf")}
    log: Log | None = None
    for r in range(rounds):
        order: list[tuple[str, Callable[[], None]]] = []

        def do_pw() -> None:
            res["pw"].append(plain_write(plain_path, batch, count, None))

        def do_lw() -> None:
            nonlocal log
            if log is not None:
                log.close_unclean()
            dt, log = log_write(log_path, batch, count, nofsync)
            res["lw"].append(dt)

        order = [("pw", do_pw), ("lw", do_lw)]
        if r % 2:
            order.reverse()
        for _, fn in order:
            fn()
    assert log is not None
    # fsync runs on a separate pair of files, interleaved too
    fplain = root / "plain-fsync.bin"
    flog = root / "f-0"
    for r in range(max(rounds, 5)):  # fsync timings on a VM disk are the noisiest
        steps: list[Callable[[], None]] = [
            lambda: res["pf"].append(plain_write(fplain, batch, fcount, MiB)),
            lambda: res["lf"].append(_timed_close(log_write(flog, batch, fcount, flush_cfg))),
        ]
        if r % 2:
            steps.reverse()
        for s in steps:
            s()
    shutil.rmtree(flog, ignore_errors=True)
    fplain.unlink(missing_ok=True)
    settle()

    # reads from the middle of the log: the second half, by offset
    mid_offset = (count // 2) * per_batch
    region = log.read(mid_offset, 1)
    seg_file = region.file.path
    start_pos = region.position
    read_bytes = total // 2 - len(batch)
    reads: dict[str, list[float]] = {"pr": [], "lr": [], "ps": [], "ls": []}
    log_read(log, mid_offset, read_bytes, "read", null_fd)  # warm
    for r in range(rounds):
        pairs: list[tuple[str, Callable[[], float]]] = [
            ("pr", lambda: plain_read(seg_file, start_pos, read_bytes, "read", null_fd)),
            ("lr", lambda: log_read(log, mid_offset, read_bytes, "read", null_fd)[0]),  # type: ignore[arg-type]
            ("ps", lambda: plain_read(seg_file, start_pos, read_bytes, "sendfile", null_fd)),
            ("ls", lambda: log_read(log, mid_offset, read_bytes, "sendfile", null_fd)[0]),  # type: ignore[arg-type]
        ]
        if r % 2:
            pairs.reverse()
        for k, fn in pairs:
            reads[k].append(fn())

    index_bytes = sum(len(s.offset_index.to_bytes()) + len(s.time_index.to_bytes()) for s in log._local.segments)
    # reopen after a clean shutdown
    log.close()
    t = time.perf_counter()
    log2 = Log.open(log_path, LogConfig())
    clean_open = time.perf_counter() - t
    assert log2.had_clean_shutdown and log2.log_end_offset == count * per_batch
    log2.close_unclean()
    (log_path / "recovery-point-offset-checkpoint").unlink()
    (log_path / ".clean_shutdown").unlink(missing_ok=True)
    t = time.perf_counter()
    log3 = Log.open(log_path, LogConfig())
    unclean_open = time.perf_counter() - t
    assert not log3.had_clean_shutdown and log3.log_end_offset == count * per_batch
    recovered = log3.recovered_bytes
    log3.close_unclean()

    pw, lw, pf, lf = (best(res[k]) for k in ("pw", "lw", "pf", "lf"))
    pr, lr, ps, ls = (best(reads[k]) for k in ("pr", "lr", "ps", "ls"))
    rows = [
        ("append, no fsync", mbps(total, lw), "plain write()", mbps(total, pw), 0.6),
        ("append, fsync per MiB (flush.messages)", mbps(ftotal, lf), "plain write()+fsync/MiB",
         mbps(ftotal, pf), 0.8),
        ("read by offset (pread)", mbps(read_bytes, lr), "plain pread", mbps(read_bytes, pr), 0.7),
        ("read by offset (sendfile)", mbps(read_bytes, ls), "plain sendfile", mbps(read_bytes, ps), 0.7),
    ]
    print(f"\nsize {total / MiB:.0f} MiB (fsync runs {ftotal / MiB:.0f} MiB), "
          f"best of {rounds} interleaved rounds")
    print(f"{'measure':42} {'log MB/s':>10} {'baseline':>26} {'MB/s':>9} {'ratio':>6} {'target':>7}")
    for name, v, bname, b, target in rows:
        ok = "ok" if v / b >= target else "MISS"
        print(f"{name:42} {v:10.0f} {bname:>26} {b:9.0f} {v / b:6.2f} {'>=' + str(target):>5} {ok}")
    print("median ratios: " + ", ".join(
        f"{label} {statistics.median(res_or_reads[lk]) and statistics.median(res_or_reads[bk]) / statistics.median(res_or_reads[lk]):.2f}"  # noqa: E501
        for label, lk, bk, res_or_reads in (
            ("append", "lw", "pw", res), ("append+fsync", "lf", "pf", res),
            ("pread", "lr", "pr", reads), ("sendfile", "ls", "ps", reads),
        )
    ))
    print(f"{'reopen after clean shutdown':42} {clean_open * 1000:9.1f} ms   target < 1000 ms "
          f"{'ok' if clean_open < 1 else 'MISS'}")
    rec_rate = mbps(recovered, unclean_open)
    print(f"{'recovery after unclean shutdown':42} {rec_rate:9.0f} MB/s ({recovered / MiB:.0f} MiB in "
          f"{unclean_open:.2f} s) target >= 200 {'ok' if rec_rate >= 200 else 'MISS'}")
    print(f"{'index memory for the log':42} {index_bytes / 1024:9.0f} KiB  target < 2048 KiB "
          f"{'ok' if index_bytes < 2 * MiB else 'MISS'}")
    spread = {k: (statistics.pstdev(v) / statistics.mean(v) if len(v) > 1 else 0.0) for k, v in res.items()}
    print("run-to-run spread (stdev/mean): " + ", ".join(f"{k} {v:.0%}" for k, v in spread.items()))


def _timed_close(result: tuple[float, Log]) -> float:
    dt, log = result
    log.close_unclean()
    return dt


if __name__ == "__main__":
    main()
