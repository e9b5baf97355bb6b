"""A small asyncio HTTP/1.1 client and load loops for bench/rest.py: the same generator for every target.

One ``Conn`` is one keep-alive TCP connection (no pipelining); the loops give each worker its own.
Parsing is the minimum a benchmark needs (status, headers, Content-Length or chunked bodies), so
the client costs little CPU next to the servers measured.

* ``closed_loop``: N workers, each sending its next request as soon as the last one is answered;
* ``open_loop``: requests started at a fixed rate whatever the answers do, latency counted from the
  time each request was due (no coordinated omission), over a pool of connections.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


class HttpError(Exception):
    pass


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


class Conn:
    """One keep-alive HTTP/1.1 connection to ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 24)
        return self

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def head(self, method: str, path: str, headers: dict[str, str], length: int | None) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Response:
        if self.writer is None:
            await self.open()
        assert self.writer is not None
        self.writer.write(self.head(method, path, headers, len(body)) + body)
        return await self.read_response()

    async def read_head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw[:-4].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status_line.split(" ", 2)[1]), headers

    async def read_response(self) -> Response:
        assert self.reader is not None
        status, headers = await self.read_head()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            async for chunk in self.chunks():
                parts.append(chunk)
            body = b"".join(parts)
        else:  # read to close
            body = await self.reader.read()
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Response(status, headers, body)

    async def chunks(self):  # type: ignore[no-untyped-def]
        """The chunks of a chunked body as they arrive (an async iterator of bytes)."""
        assert self.reader is not None
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return
            data = await self.reader.readexactly(size + 2)
            yield data[:-2]


# ---------------------------------------------------------------------------- load loops


@dataclass
class LoadResult:
    ok: int = 0  # requests answered as expected
    items: int = 0  # records they carried
    errors: int = 0
    elapsed: float = 0.0
    latencies_ns: list[int] = field(default_factory=list)
    first_error: str = ""
    cpu: float = 0.0  # the client's CPU-seconds over the run

    @property
    def rate(self) -> float:
        return self.ok / self.elapsed if self.elapsed else 0.0

    @property
    def item_rate(self) -> float:
        return self.items / self.elapsed if self.elapsed else 0.0


# A request: given a connection, do one exchange; return the records it carried, or raise HttpError.
Call = Callable[[Conn], Awaitable[int]]


async def closed_loop(connect: Callable[[], Awaitable[Conn]], call: Call, workers: int, seconds: float,
                      warmup: float = 1.0) -> LoadResult:
    """``workers`` connections, each one request after another; counts only after ``warmup`` seconds."""
    from common import self_cpu

    result = LoadResult()
    conns = [await connect() for _ in range(workers)]
    start = time.monotonic()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    cpu_at: list[float] = []

    async def worker(conn: Conn) -> None:
        while True:
            t0 = time.monotonic_ns()
            if t0 / 1e9 >= stop_at:
                return
            try:
                items = await call(conn)
            except (HttpError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                if t0 / 1e9 >= measure_from:
                    result.errors += 1
                    result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"[:300]
                conn.close()
                await asyncio.sleep(0.01)
                continue
            if t0 / 1e9 >= measure_from:
                result.ok += 1
                result.items += items
                result.latencies_ns.append(time.monotonic_ns() - t0)

    async def cpu_mark() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.monotonic()))
        cpu_at.append(self_cpu())

    marker = asyncio.ensure_future(cpu_mark())
    await asyncio.gather(*(worker(c) for c in conns))
    await marker
    result.elapsed = time.monotonic() - measure_from
    result.cpu = self_cpu() - cpu_at[0]
    for c in conns:
        c.close()
    return result


async def open_loop(connect: Callable[[], Awaitable[Conn]], call: Call, rate: float, seconds: float,
                    pool: int = 64, warmup: float = 1.0) -> LoadResult:
    """Requests due every 1/``rate`` s; each takes a free connection of ``pool`` (waiting counts as latency)."""
    from common import self_cpu

    result = LoadResult()
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(pool):
        free.put_nowait(await connect())
    start = time.monotonic()
    measure_from = start + warmup
    total = int((warmup + seconds) * rate)
    tasks: set[asyncio.Task[None]] = set()
    cpu0 = 0.0

    async def one(due: float) -> None:
        conn = await free.get()
        try:
            items = await call(conn)
        except (HttpError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            if due >= measure_from:
                result.errors += 1
                result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"[:300]
            conn.close()
        else:
            if due >= measure_from:
                result.ok += 1
                result.items += items
                result.latencies_ns.append(int((time.monotonic() - due) * 1e9))
        free.put_nowait(conn)

    for i in range(total):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if i == int(warmup * rate):
            cpu0 = self_cpu()
        task = asyncio.ensure_future(one(due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    # A server that fell behind has a backlog: what is not answered 30 s after the last request was due
    # counts as failed.
    if tasks:
        _done, late = await asyncio.wait(list(tasks), timeout=30)
        for task in late:
            task.cancel()
        if late:
            result.errors += len(late)
            result.first_error = result.first_error or f"{len(late)} requests unanswered 30 s after the run"
    result.elapsed = time.monotonic() - measure_from
    result.cpu = self_cpu() - cpu0
    while not free.empty():
        free.get_nowait().close()
    return result
