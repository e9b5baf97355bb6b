"""REST proxy benchmark: Sluice's REST Proxy against Aiven's Karapace, on one broker, same records, same load.

    python bench/rest.py               # full run (100 B and 1 KiB), ~12 minutes on 2 cores
    python bench/rest.py --quick       # 100 B only, shorter runs: ~4-5 minutes
    python bench/rest.py --karapace-git /path/to/karapace.git   # (re)build var/bench/karapace-venv first

Starts ``sluice up`` in a temp SLUICE_VAR_DIR (embedded Postgres and Redis, never the servers
DATABASE_URL/REDIS_URL name; web, worker, beat, agent, the demo cluster's broker), reads the demo
key from ``demo-credentials.json`` and the cluster's ``skc-`` id from the management API, creates
one-partition topics through that API, and points Karapace's REST proxy (its own venv, see
bench/karapace_venv.py; no schema registry; producer linger.ms 5 as the direct client, acks 1,
both Karapace's defaults otherwise) at that same broker. For 100 B and 1 KiB records:

* ceiling: a confluent-kafka producer straight to the broker (linger.ms 5, acks 1), and a direct
  consume loop (assign at offset 0) over a topic of pre-filled records;
* Karapace v2 produce, 1 record/request (req/s, p50/p99; p99 at a fixed 1,000 req/s) and 100
  records/request (records/s); Karapace v2 consumer instance ``GET records`` (records/s);
* Sluice, each path as Confluent's spec has it, measured when served (a path answering 404 prints
  "not served yet"): v3 single-record produce (as Karapace's single), v3 ``records:batch`` of 100
  and v3 streaming produce (records/s against Karapace's 100/request and the direct producer), v2
  produce (1 and 100/request), v2 consumer ``records`` against Karapace's and the direct loop; and
  Karapace's and Sluice's 100-record requests again from 4x the connections (a closed loop with few
  connections measures round trips, not what a server takes);
  WebSocket tail: records/s delivered to one viewer, produce-to-viewer latency p99 at 1,000 rec/s,
  and the broker's Fetch requests for 50 viewers against 1 (counted on the wire: a packet socket on
  the loopback device parses the Kafka request headers sent to the broker's port; needs root).

The load generator is bench/httpload.py (asyncio + uvloop, keep-alive connections, N workers), the
same for every HTTP target; its CPU use is printed beside the servers'. Every process started here
is killed by pid on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import karapace_venv
import psutil
from common import ROOT, Procs, cpu_seconds, percentiles, ratio, self_cpu
from confluent_kafka import Consumer, Producer, TopicPartition
from httpload import Conn, HttpError, LoadResult, closed_loop, open_loop

from sluice.embedded import free_port

SIZES = (100, 1024)
BATCH = 100
TOPICS_AHEAD = 40  # topics made in one go (one size of the run uses 17)
TAIL_LIMIT = 64 << 20  # SLUICE_TAIL_BYTES_PER_SECOND for the run, unless the environment sets one
FIXED_RATE = 1000.0  # req/s (and rec/s for the WebSocket latency)
MAX_BYTES = 1 << 20  # of a v2 consumer's GET records, so a run takes many (and the first can be left out)
V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_JSON = "application/vnd.kafka.v2+json"
# What a target's failure can raise: reported on its line, the other targets still run.
FAILURES = (HttpError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, KeyError, TypeError)
DEFAULT_KARAPACE_GIT = Path("/work/.mirror/Aiven-Open+karapace/repo")


@dataclass
class Settings:
    seconds: float  # each closed/open-loop run, after a 1 s warm-up
    workers: int  # connections of a 1-record/request run
    batch_workers: int  # connections of a 100-records/request run
    streams: int  # concurrent streaming-produce connections
    fill: int  # records pre-filled for the consume runs
    direct: int  # records of the direct producer run
    ws_records: int  # records produced for the one-viewer WebSocket throughput run
    viewers: int


QUICK = Settings(seconds=3, workers=16, batch_workers=4, streams=2, fill=100_000, direct=50_000, ws_records=100_000,
                 viewers=50)
FULL = Settings(seconds=10, workers=32, batch_workers=8, streams=4, fill=200_000, direct=200_000, ws_records=200_000,
                viewers=50)


# ---------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    """``sluice up`` (and Karapace beside it), with what a client needs to reach both."""

    procs: Procs
    tmp: Path
    port: int = 0
    bootstrap: str = ""
    kafka: dict[str, str] = field(default_factory=dict)  # the demo cluster as its owner (SASL/PLAIN, demo key)
    auth: str = ""  # the Authorization header's value
    session: dict[str, str] = field(default_factory=dict)  # a console session's Cookie and X-CSRFToken headers
    cluster_pk: str = ""
    cluster_id: str = ""  # kafka_cluster_id, skc-...
    tenant: str = ""
    tail_limit: int = 0
    up: subprocess.Popen[bytes] | None = None
    karapace: subprocess.Popen[bytes] | None = None
    karapace_port: int = 0
    karapace_version: str | None = None

    @property
    def web_pid(self) -> int | None:
        """The uvicorn process of ``sluice up`` (the REST proxy's server)."""
        assert self.up is not None
        for child in psutil.Process(self.up.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "uvicorn" in " ".join(child.cmdline()):
                    return child.pid
        return None

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": self.auth, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw[:300]

    def start_sluice(self) -> None:
        var = self.tmp / "var"
        self.port = free_port()
        broker_port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_DEFAULT_QUEUE"}}
        env.update(SLUICE_VAR_DIR=str(var), PYTHONUNBUFFERED="1", LOG_LEVEL="WARNING")
        # The tail's per-viewer send limit (1 MiB/s by default) would cap what is measured at 1 KiB x 1,000/s:
        # raised here unless set in the environment (printed with the figures).
        env.setdefault("SLUICE_TAIL_BYTES_PER_SECOND", str(TAIL_LIMIT))
        # Throughput is measured here, not the request-rate limits (one key sends thousands of requests a second).
        env.setdefault("SLUICE_KAFKAREST_RATE_LIMIT", "")
        env.setdefault("SLUICE_API_RATE_LIMIT", "")
        self.tail_limit = int(env["SLUICE_TAIL_BYTES_PER_SECOND"])
        log_path = self.tmp / "sluice-up.log"
        with open(log_path, "wb") as out:
            self.up = self.procs.start([sys.executable, "-m", "sluice", "up", "--port", str(self.port), "--quiet",
                                        "--workers", "1", "--broker-ports", f"{broker_port}-{broker_port}"],
                                       cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while "Press Ctrl-C to stop." not in (text := log_path.read_text(errors="replace")):
            if self.up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"sluice up did not come up:\n{text[-3000:]}")
            time.sleep(0.2)
        found = re.search(r"Kafka\s+(\S+:\d+)\s", text)
        if not found:
            raise SystemExit(f"sluice up: the demo cluster is not Ready:\n{text[-2000:]}")
        self.bootstrap = found.group(1)
        creds = json.loads((var / "demo-credentials.json").read_text())
        self.auth = "Basic " + base64.b64encode(f"{creds['key_id']}:{creds['secret']}".encode()).decode()
        status, clusters = self.api("GET", f"/api/v1/tenants/{creds['tenant_slug']}/clusters")
        if status != 200:
            raise SystemExit(f"listing clusters: {status} {clusters}")
        demo = next(c for c in clusters["results"] if c["name"] == "demo")
        self.cluster_pk, self.cluster_id = demo["id"], demo["kafka_cluster_id"]
        self.tenant = creds["tenant_slug"]
        self.session = self.login(creds["username"], creds["password"])
        # Managed clusters authenticate: the direct clients log in with the demo key, as the banner prints.
        self.kafka = {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "PLAIN", "sasl.username": creds["key_id"], "sasl.password": creds["secret"]}

    def login(self, username: str, password: str) -> dict[str, str]:
        """Headers of a signed-in console session: its produce goes through the DRF views, not the ASGI path."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v1/auth/login", method="POST",
                                           headers={"Content-Type": "application/json"},
                                           data=json.dumps({"username": username, "password": password}).encode()),
                    timeout=30).close()
        cookies = {c.name: c.value for c in jar}
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()), "X-CSRFToken": cookies["csrftoken"],
                "Origin": f"http://127.0.0.1:{self.port}", "Referer": f"http://127.0.0.1:{self.port}/"}

    def create_topics(self, names: list[str]) -> None:
        """One-partition topics through the management API, then wait until the broker has them all."""
        for name in names:
            status, body = self.api("POST", f"/api/v1/tenants/{self.tenant}/clusters/{self.cluster_pk}/topics",
                                    {"name": name, "partitions": 1})
            if status not in (200, 201, 202):
                raise SystemExit(f"creating topic {name}: {status} {body}")
        from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

        admin = AdminClient(self.kafka)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            topics = admin.list_topics(timeout=5).topics
            if all(n in topics and topics[n].error is None and topics[n].partitions for n in names):
                return
            time.sleep(0.2)
        raise SystemExit(f"topics never all appeared on the broker: {names}")

    def start_karapace(self, git_dir: Path | None) -> str | None:
        """Karapace's REST proxy on the demo broker; None when up, else why not."""
        python = karapace_venv.venv_python()
        if git_dir is not None or not python.exists():
            source = git_dir or DEFAULT_KARAPACE_GIT
            if not source.exists():
                return f"no Karapace venv ({python}) and no Karapace git dir to build one from (--karapace-git)"
            try:
                print(f"building {karapace_venv.VENV} from {source} ...", flush=True)
                karapace_venv.build(source, "HEAD")
            except (subprocess.CalledProcessError, OSError) as exc:
                return f"building the Karapace venv failed: {exc}"
        self.karapace_version = karapace_venv.describe()
        self.karapace_port = free_port()
        env = {**os.environ, "KARAPACE_BOOTSTRAP_URI": self.bootstrap, "KARAPACE_KARAPACE_REST": "true",
               "KARAPACE_KARAPACE_REGISTRY": "false", "KARAPACE_HOST": "127.0.0.1",
               "KARAPACE_PORT": str(self.karapace_port), "KARAPACE_ADVERTISED_HOSTNAME": "127.0.0.1",
               "KARAPACE_ADVERTISED_PORT": str(self.karapace_port),
               "KARAPACE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KARAPACE_SASL_MECHANISM": "PLAIN",
               "KARAPACE_SASL_PLAIN_USERNAME": self.kafka["sasl.username"],
               "KARAPACE_SASL_PLAIN_PASSWORD": self.kafka["sasl.password"],
               "KARAPACE_LOG_LEVEL": "WARNING", "KARAPACE_PRODUCER_LINGER_MS": "5", "KARAPACE_PRODUCER_ACKS": "1"}
        env.pop("PYTHONPATH", None)
        log_path = self.tmp / "karapace.log"
        with open(log_path, "wb") as out:
            self.karapace = self.procs.start([str(python), "-m", "karapace.kafka_rest_apis"], cwd=self.tmp, env=env,
                                             stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.karapace.poll() is not None:
                return f"Karapace exited:\n{log_path.read_text(errors='replace')[-2000:]}"
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"http://127.0.0.1:{self.karapace_port}/topics", timeout=5) as r:
                if r.status == 200:
                    return None
            time.sleep(0.3)
        return "Karapace did not answer GET /topics within 60 s"


# ---------------------------------------------------------------------------- records and targets


def value_of(size: int) -> bytes:
    """The record every run sends: ``size`` bytes, ASCII (digits first: a timestamp where latency needs one)."""
    return (b"0" * 20 + bytes(ord("a") + i % 26 for i in range(size)))[:size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Target:
    """One REST proxy's paths: Karapace's (no prefix, no auth) or Sluice's (``/kafka/v2|v3/clusters/{id}``)."""

    name: str
    port: int
    headers: dict[str, str] = field(default_factory=dict)  # Authorization, when needed
    v2_prefix: str = ""  # "" for Karapace; "/kafka/v2/clusters/{id}" for Sluice
    v3_prefix: str | None = None  # "/kafka/v3/clusters/{id}"; None: no v3 produce
    pid: int | None = None  # the server process, for its CPU

    async def connect(self) -> Conn:
        return await Conn("127.0.0.1", self.port).open()


def check(response: Any, expect: tuple[int, ...]) -> Any:
    if response.status not in expect:
        raise HttpError(f"HTTP {response.status}: {response.body[:300]!r}")
    return json.loads(response.body) if response.body else None


def v2_produce(target: Target, topic: str, value: bytes, n: int) -> Callable[[Conn], Awaitable[int]]:
    """``POST {v2}/topics/{topic}``, binary embedded format, ``n`` records in one request."""
    path = f"{target.v2_prefix}/topics/{topic}"
    headers = {**target.headers, "Content-Type": V2_BINARY, "Accept": V2_JSON}
    body = json.dumps({"records": [{"value": b64(value)} for _ in range(n)]}).encode()

    async def call(conn: Conn) -> int:
        answer = check(await conn.request("POST", path, headers, body), (200,))
        offsets = answer["offsets"]
        if len(offsets) != n or any(o.get("error_code") or o.get("error") for o in offsets):
            raise HttpError(f"delivery errors: {str(offsets)[:300]}")
        return n
    return call


def v3_single(target: Target, topic: str, value: bytes) -> Callable[[Conn], Awaitable[int]]:
    """``POST {v3}/topics/{topic}/records``: one JSON record, one delivery report."""
    path = f"{target.v3_prefix}/topics/{topic}/records"
    headers = {**target.headers, "Content-Type": "application/json"}
    body = json.dumps({"partition_id": 0, "value": {"type": "BINARY", "data": b64(value)}}).encode()

    async def call(conn: Conn) -> int:
        report = check(await conn.request("POST", path, headers, body), (200,))
        if report.get("error_code", 200) != 200:
            raise HttpError(f"delivery report: {str(report)[:300]}")
        return 1
    return call


def v3_batch(target: Target, topic: str, value: bytes, n: int) -> Callable[[Conn], Awaitable[int]]:
    """``POST {v3}/topics/{topic}/records:batch`` of ``n`` entries: successes and failures."""
    path = f"{target.v3_prefix}/topics/{topic}/records:batch"
    headers = {**target.headers, "Content-Type": "application/json"}
    data = b64(value)
    body = json.dumps({"entries": [{"id": str(i), "partition_id": 0, "value": {"type": "BINARY", "data": data}}
                                   for i in range(n)]}).encode()

    async def call(conn: Conn) -> int:
        answer = check(await conn.request("POST", path, headers, body), (200, 207))
        if answer.get("failures") or len(answer.get("successes", ())) != n:
            raise HttpError(f"batch: {str(answer)[:300]}")
        return n
    return call


async def v3_stream(target: Target, topic: str, value: bytes, streams: int, seconds: float,
                    window: int = 1000, warmup: float = 1.0) -> LoadResult:
    """Streaming produce: a chunked request body of concatenated JSON records on each of ``streams``
    connections, up to ``window`` records unanswered; delivery reports (concatenated JSON) read as
    they come. Counts reports with error_code 200 that arrive after the warm-up."""
    path = f"{target.v3_prefix}/topics/{topic}/records"
    headers = {**target.headers, "Content-Type": "application/json"}
    record = json.dumps({"partition_id": 0, "value": {"type": "BINARY", "data": b64(value)}}).encode()
    result = LoadResult()
    start = time.monotonic()
    measure_from, stop_at = start + warmup, start + warmup + seconds
    decoder = json.JSONDecoder()
    cpu0 = [0.0]

    async def one() -> None:
        conn = await target.connect()
        assert conn.writer is not None
        credit = asyncio.Semaphore(window)
        conn.writer.write(conn.head("POST", path, headers, None))

        async def read() -> None:
            status, head = await conn.read_head()
            if status != 200:
                raise HttpError(f"HTTP {status} {head}")
            buf = ""
            async for chunk in conn.chunks():
                buf += chunk.decode()
                pos = 0
                while True:
                    while pos < len(buf) and buf[pos] in " \r\n\t":
                        pos += 1
                    if pos >= len(buf):
                        break
                    try:
                        report, pos = decoder.raw_decode(buf, pos)
                    except json.JSONDecodeError:
                        break
                    credit.release()
                    now = time.monotonic()
                    if report.get("error_code", 200) != 200:
                        result.errors += 1
                        result.first_error = result.first_error or str(report)[:300]
                    elif measure_from <= now <= stop_at:
                        result.items += 1
                buf = buf[pos:]

        reader = asyncio.ensure_future(read())
        try:
            while time.monotonic() < stop_at and not reader.done():
                try:
                    await asyncio.wait_for(credit.acquire(), max(0.01, stop_at - time.monotonic()))
                except TimeoutError:
                    break
                n = 1
                while n < BATCH and not credit.locked():
                    await credit.acquire()
                    n += 1
                data = record * n
                conn.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await conn.writer.drain()
            if not reader.done():
                conn.writer.write(b"0\r\n\r\n")
            await asyncio.wait_for(reader, 30)
        finally:
            conn.close()

    async def cpu_mark() -> None:
        await asyncio.sleep(warmup)
        cpu0[0] = self_cpu()

    marker = asyncio.ensure_future(cpu_mark())
    outcomes = await asyncio.gather(*(one() for _ in range(streams)), return_exceptions=True)
    await marker
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            result.errors += 1
            result.first_error = result.first_error or f"{type(outcome).__name__}: {outcome}"[:300]
    result.elapsed = seconds
    result.ok = result.items
    result.cpu = self_cpu() - cpu0[0]
    return result


async def v2_consume(target: Target, topic: str, expect: int, timeout: float) -> tuple[int, float, float, str]:
    """A v2 consumer instance (binary format, earliest) subscribed to ``topic``; ``GET records`` until
    ``expect`` records came. (records, seconds from the first non-empty answer to the last record, seconds
    to that first answer, error)."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    headers = {**target.headers, "Content-Type": V2_JSON, "Accept": V2_JSON}
    conn = await target.connect()
    try:
        created = check(await conn.request(
            "POST", f"{target.v2_prefix}/consumers/{group}", headers,
            json.dumps({"name": "c1", "format": "binary", "auto.offset.reset": "earliest",
                        "auto.commit.enable": "false"}).encode()), (200,))
        base = "/" + urlsplit(created["base_uri"]).path.lstrip("/")
        check(await conn.request("POST", f"{base}/subscription", headers,
                                 json.dumps({"topics": [topic]}).encode()), (200, 204))
        get_headers = {**target.headers, "Accept": V2_BINARY}
        got, first_at, first_n, last_at = 0, 0.0, 0, 0.0
        t0 = time.monotonic()
        deadline = t0 + timeout
        while got < expect and time.monotonic() < deadline:
            records = check(await conn.request("GET", f"{base}/records?timeout=1000&max_bytes={MAX_BYTES}",
                                               get_headers), (200,))
            if records:
                got += len(records)
                last_at = time.monotonic()
                if not first_at:
                    first_at, first_n = last_at, len(records)
        with contextlib.suppress(HttpError, OSError):
            await conn.request("DELETE", base, headers)
        error = "" if got >= expect else f"only {got} of {expect} records in {timeout:.0f} s"
        rate_span = last_at - first_at
        return got - first_n, rate_span, first_at - t0 if first_at else float("nan"), error
    finally:
        conn.close()


async def served(target: Target, method: str, path: str, body: bytes, headers: dict[str, str]) -> str | None:
    """None when ``path`` is served (anything but a route-level 404), else a one-line reason."""
    conn = await target.connect()
    try:
        answer = await conn.request(method, path, {**target.headers, **headers}, body)
    except (OSError, asyncio.IncompleteReadError) as exc:
        return f"no answer ({exc})"
    finally:
        conn.close()
    if answer.status == 404:
        return f"not served yet (404 on {method} {path.split('?')[0]})"
    if answer.status in (401, 403):
        return f"refused ({answer.status}: {answer.body[:200]!r})"
    return None


# ---------------------------------------------------------------------------- direct clients


def direct_produce(kafka: dict[str, str], topic: str, value: bytes, count: int) -> float:
    """records/s of a confluent-kafka producer (linger.ms 5, acks 1) sending ``count`` records."""
    producer = Producer({**kafka, "linger.ms": 5, "acks": 1,
                         "queue.buffering.max.messages": 1_000_000})
    failed = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    t0 = time.monotonic()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) or failed[0]:
        raise SystemExit(f"direct produce to {topic}: {failed[0]} failed")
    return count / (time.monotonic() - t0)


def direct_consume(kafka: dict[str, str], topic: str, expect: int) -> tuple[int, float]:
    """(records after the first batch, seconds from the first batch to the last record) of a direct loop."""
    consumer = Consumer({**kafka, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, first_at, first_n, last_at = 0, 0.0, 0, 0.0
    deadline = time.monotonic() + 120
    try:
        while got < expect and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(1000, timeout=1) if m.error() is None]
            if batch:
                got += len(batch)
                last_at = time.monotonic()
                if not first_at:
                    first_at, first_n = last_at, len(batch)
    finally:
        consumer.close()
    return got - first_n, last_at - first_at


def paced_producer(kafka: dict[str, str], topic: str, size: int, rate: float, seconds: float,
                   stop: threading.Event) -> int:
    """Records at ``rate``/s for ``seconds`` (linger.ms 0), each value starting with its send time
    (``time.monotonic_ns`` as 20 ASCII digits). The count sent."""
    producer = Producer({**kafka, "linger.ms": 0, "acks": 1})
    pad = value_of(size)[20:]
    start = time.monotonic()
    sent = 0
    while sent < rate * seconds and not stop.is_set():
        due = start + sent / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, value=b"%020d" % time.monotonic_ns() + pad, partition=0)
        producer.poll(0)
        sent += 1
    producer.flush(30)
    return sent


# ---------------------------------------------------------------------------- WebSocket tail


def ws_value(record: Any) -> bytes | None:
    """A record's value bytes: the tail sends UTF-8 text when the bytes decode (ours do), else base64."""
    value = record.get("value") if isinstance(record, dict) else None
    if not isinstance(value, str):
        return None
    if record.get("value_encoding") == "base64":
        with contextlib.suppress(ValueError):
            return base64.b64decode(value)
    return value.encode()


RECORDS_FRAME = b'{"type":"records",'  # how the tail's records frames begin (tail/protocol.py records_frame)
RECORD_START = b'{"partition":'  # how each record of one begins (tail/records.py Record.fields)


class Viewer:
    """One WebSocket tail (the protocol of controlplane.kafkarest.tail): subscribes, counts records and,
    where values carry a send time, latencies. ``done`` is set by a bounded read's ``done`` frame."""

    def __init__(self, url: str, auth: str, subscribe: dict[str, Any] | None = None, latency: bool = True) -> None:
        self.url, self.auth = url, auth
        self.subscribe = {"type": "subscribe", "from": "latest", **(subscribe or {})}
        # Read each value's send time (parsing every frame); else only count records, without parsing them: a
        # client this cheap leaves the shared cores to the server it measures.
        self.latency = latency
        self.count = 0
        self.latencies_ns: list[int] = []
        self.first_at = 0.0  # when the first records frame came, and how many it held
        self.first_count = 0
        self.last_at = 0.0
        self.task: asyncio.Task[None] | None = None
        self.error = ""
        self.ready = asyncio.Event()  # subscribed (or failed)
        self.done = asyncio.Event()

    async def run(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosedOK

        try:
            async with connect(self.url, additional_headers={"Authorization": self.auth}, max_size=None,
                               compression=None, open_timeout=30) as ws:
                await ws.send(json.dumps(self.subscribe))
                while True:
                    try:
                        message = await ws.recv(decode=False)  # the frame's UTF-8 bytes, not decoded to str
                    except ConnectionClosedOK:
                        break
                    now = time.monotonic_ns()
                    if not self.latency and message.startswith(RECORDS_FRAME):
                        # A counting viewer does not parse the records: it counts their objects' openings. Inside
                        # JSON strings every quote is escaped, so this byte string only begins a record.
                        self.count += message.count(RECORD_START)
                        self.last_at = time.monotonic()
                        if not self.first_at:
                            self.first_at, self.first_count = self.last_at, self.count
                        continue
                    frame = json.loads(message)
                    kind = frame.get("type")
                    if kind == "records":
                        if self.latency:
                            for record in frame["records"]:
                                value = ws_value(record)
                                if value is not None and value[:20].isdigit() and int(value[:20]):
                                    self.latencies_ns.append(now - int(value[:20]))
                        self.count += len(frame["records"])
                        self.last_at = time.monotonic()
                        if not self.first_at:
                            self.first_at, self.first_count = self.last_at, self.count
                    elif kind == "subscribed":
                        self.ready.set()
                    elif kind == "done":
                        self.done.set()
                    elif kind == "error":
                        self.error = f"error frame: {frame.get('code')}: {frame.get('message')}"[:300]
        except Exception as exc:  # a closed or refused socket: reported, never raised into the run
            self.error = self.error or f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.ready.set()
            self.done.set()

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


class FetchCounter:
    """Kafka requests sent to one TCP port on the loopback device, by API key, read off the wire.

    A packet socket (AF_PACKET, needs CAP_NET_RAW) sees each loopback packet as it leaves; per
    client connection the TCP payload bytes are followed in sequence and cut into request frames
    (int32 size, then int16 api_key). A connection first seen mid-frame is skipped until a packet
    starts with a plausible header; gaps (a dropped packet) are counted as ``lost``.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.counts: Counter[int] = Counter()
        self.lost = 0
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.streams: dict[int, list[Any]] = {}  # client port -> [next seq, pending bytes, frame bytes left]
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_event.is_set():
            try:
                packet, address = self.sock.recvfrom(262144)
            except TimeoutError:
                continue
            except OSError:
                return
            if address[2] != socket.PACKET_OUTGOING or len(packet) < 54 or packet[12:14] != b"\x08\x00":
                continue
            ip = packet[14:]
            if ip[9] != 6:
                continue
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack_from(">H", ip, 2)[0]
            tcp = ip[ihl:total]
            sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
            if dport != self.port:
                continue
            payload = tcp[(tcp[12] >> 4) * 4:]
            if payload:
                self._feed(sport, seq, payload)

    def _feed(self, sport: int, seq: int, payload: bytes) -> None:
        state = self.streams.get(sport)
        if state is None:
            if len(payload) < 6:
                return
            size, api_key = struct.unpack_from(">ih", payload, 0)
            if not (0 < size < 1 << 28 and 0 <= api_key < 100):
                return
            state = self.streams[sport] = [seq, b"", 0]
        expected, pending, skip = state
        if seq != expected:
            behind = (expected - seq) % (1 << 32)
            if behind < 1 << 31:  # a retransmission of bytes seen
                if behind >= len(payload):
                    return
                payload, seq = payload[behind:], expected
            else:
                self.lost += 1
                del self.streams[sport]
                return
        state[0] = (seq + len(payload)) % (1 << 32)
        data = pending + payload
        pos = 0
        if skip:
            take = min(skip, len(data))
            pos, skip = take, skip - take
        while skip == 0 and len(data) - pos >= 6:
            size, api_key = struct.unpack_from(">ih", data, pos)
            self.counts[api_key] += 1
            frame_end = pos + 4 + size
            if frame_end <= len(data):
                pos = frame_end
            else:
                skip, pos = frame_end - len(data), len(data)
        state[1], state[2] = data[pos:], skip

    def fetches(self) -> int:
        return self.counts[1]

    def close(self) -> None:
        self.stop_event.set()
        self.thread.join(2)
        self.sock.close()


# ---------------------------------------------------------------------------- reporting


def fmt(x: float) -> str:
    return f"{x:,.0f}"


def cpu_note(result: LoadResult, server_cpu: float | None) -> str:
    parts = [f"client CPU {result.cpu / result.elapsed:.0%}" if result.elapsed else ""]
    if server_cpu is not None and result.elapsed:
        parts.append(f"server CPU {server_cpu / result.elapsed:.0%}")
    return ", ".join(p for p in parts if p)


def errors_note(result: LoadResult) -> str:
    return f"  [{result.errors} errors, first: {result.first_error}]" if result.errors else ""


async def measured(target: Target, run: Callable[[], Awaitable[LoadResult]]) -> tuple[LoadResult, float | None]:
    """Run one load and the server's CPU-seconds over it (warm-up included, then scaled to the measured part)."""
    before = cpu_seconds(target.pid) if target.pid else None
    t0 = time.monotonic()
    result = await run()
    if before is None or target.pid is None:
        return result, None
    spent = cpu_seconds(target.pid) - before
    return result, spent * result.elapsed / max(time.monotonic() - t0, 1e-9)


# ---------------------------------------------------------------------------- the runs


class Bench:
    def __init__(self, stack: Stack, settings: Settings) -> None:
        self.stack, self.s = stack, settings
        self.summary: list[str] = []
        self.pool: list[str] = []
        self.direct_consume: dict[int, float] = {}
        self.karapace: Target | None = None
        if stack.karapace is not None:
            self.karapace = Target("karapace", stack.karapace_port, pid=stack.karapace.pid)
        cid = stack.cluster_id
        self.sluice = Target("sluice", stack.port, {"Authorization": stack.auth},
                             v2_prefix=f"/kafka/v2/clusters/{cid}", v3_prefix=f"/kafka/v3/clusters/{cid}",
                             pid=stack.web_pid)
        # The same paths as a signed-in console session: served by the DRF views (no Authorization header).
        self.drf = Target("sluice drf", stack.port, stack.session, v2_prefix=f"/kafka/v2/clusters/{cid}",
                          v3_prefix=f"/kafka/v3/clusters/{cid}", pid=stack.web_pid)
        self.missing: dict[str, str] = {}

    def topic(self, label: str) -> str:
        """A fresh one-partition topic, from those made ahead (making one is a reconcile pass, seconds)."""
        if not self.pool:
            self.pool = [f"bench-{uuid.uuid4().hex[:10]}" for _ in range(TOPICS_AHEAD)]
            self.stack.create_topics(self.pool)
        return self.pool.pop()

    def line(self, label: str, text: str) -> None:
        print(f"  {label:<34} {text}", flush=True)

    def keep(self, text: str) -> None:
        self.summary.append(text)

    async def sluice_serves(self, key: str, method: str, path: str, body: bytes, headers: dict[str, str]) -> bool:
        if key not in self.missing:
            reason = await served(self.sluice, method, path, body, headers)
            if reason:
                self.missing[key] = reason
        return key not in self.missing

    async def produce(self, size: int, direct_rate: float) -> None:
        s, value = self.s, value_of(size)
        print(f"\n{size} B records: produce, 1 record/request ({s.workers} connections, {s.seconds:.0f} s)",
              flush=True)
        single: dict[str, LoadResult] = {}
        targets: list[tuple[str, Target, Callable[[str], Callable[[Conn], Awaitable[int]]], str, str, bytes]] = []
        if self.karapace:
            targets.append(("karapace v2", self.karapace, lambda t: v2_produce(self.karapace, t, value, 1),  # type: ignore[arg-type]
                            "", "", b""))
        sl = self.sluice
        probe_v3 = json.dumps({"value": {"type": "BINARY", "data": b64(value)}}).encode()
        probe_v2 = json.dumps({"records": [{"value": b64(value)}]}).encode()
        targets.append(("sluice v3 records", sl, lambda t: v3_single(sl, t, value), "v3-produce", "v3", probe_v3))
        targets.append(("sluice v2", sl, lambda t: v2_produce(sl, t, value, 1), "v2-produce", "v2", probe_v2))
        for label, target, make, key, kind, probe in targets:
            topic = self.topic(f"p1-{size}")
            if key:
                path = (f"{sl.v3_prefix}/topics/{topic}/records" if kind == "v3" else f"{sl.v2_prefix}/topics/{topic}")
                ctype = "application/json" if kind == "v3" else V2_BINARY
                if not await self.sluice_serves(key, "POST", path, probe, {"Content-Type": ctype}):
                    self.line(label, self.missing[key])
                    continue
            call = make(topic)
            try:
                result, server = await measured(target, lambda c=call, t=target: closed_loop(t.connect, c, s.workers,
                                                                                             s.seconds))
            except FAILURES as exc:
                self.line(label, f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            p50, p99, _ = percentiles(result.latencies_ns)
            single[label] = result
            base = single.get("karapace v2")
            vs = f"  x{ratio(result.rate, base.rate):.2f} karapace" if base and label != "karapace v2" else ""
            self.line(label, f"{fmt(result.rate):>8} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms{vs}  "
                             f"({cpu_note(result, server)}){errors_note(result)}")
            self.keep(f"{size} B  {label} 1/request: {fmt(result.rate)} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms{vs}")

        print(f"{size} B records: produce at a fixed {FIXED_RATE:,.0f} req/s, 1 record/request "
              f"({s.seconds:.0f} s, latency from each request's due time)", flush=True)
        for label, target, make, key, _kind, _probe in targets:
            if key in self.missing:
                continue
            topic = self.topic(f"fixed-{size}")
            call = make(topic)
            try:
                result, server = await measured(target, lambda c=call, t=target: open_loop(t.connect, c, FIXED_RATE,
                                                                                           s.seconds))
            except FAILURES as exc:
                self.line(label, f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            p50, p99, mx = percentiles(result.latencies_ns)
            self.line(label, f"p50 {p50:6.2f} ms  p99 {p99:7.2f} ms  max {mx:7.1f} ms  (achieved "
                             f"{fmt(result.rate)} req/s; {cpu_note(result, server)}){errors_note(result)}")
            self.keep(f"{size} B  {label} at {FIXED_RATE:,.0f} req/s: p99 {p99:.2f} ms (achieved "
                      f"{fmt(result.rate)} req/s)")

        print(f"{size} B records: produce, {BATCH} records/request ({s.batch_workers} connections) and streaming "
              f"({s.streams} streams); direct producer {fmt(direct_rate)} rec/s", flush=True)
        batch: dict[str, float] = {}
        # (label, target, what it needs served, the run, the Karapace label it is compared with)
        runs: list[tuple[str, Target, str, Callable[[str], Awaitable[LoadResult]], str]] = []
        wide = s.batch_workers * 4
        kp_wide = f"karapace v2 x100, {wide} conns"
        if self.karapace:
            kp = self.karapace
            runs.append(("karapace v2 x100", kp, "", lambda t: closed_loop(
                kp.connect, v2_produce(kp, t, value, BATCH), s.batch_workers, s.seconds), ""))
        runs.append(("sluice v3 records:batch x100", sl, "v3-batch", lambda t: closed_loop(
            sl.connect, v3_batch(sl, t, value, BATCH), s.batch_workers, s.seconds), "karapace v2 x100"))
        runs.append(("sluice v3 streaming", sl, "v3-produce", lambda t: v3_stream(sl, t, value, s.streams,
                                                                                  s.seconds), "karapace v2 x100"))
        runs.append(("sluice v2 x100", sl, "v2-produce", lambda t: closed_loop(
            sl.connect, v2_produce(sl, t, value, BATCH), s.batch_workers, s.seconds), "karapace v2 x100"))
        # The same 100-record requests from 4x the connections, both proxies: with few connections a closed loop
        # measures a request's round trip (in-flight records / latency), not what the server can take.
        if self.karapace:
            kp = self.karapace
            runs.append((kp_wide, kp, "", lambda t: closed_loop(
                kp.connect, v2_produce(kp, t, value, BATCH), wide, s.seconds), ""))
        runs.append((f"sluice v3 records:batch x100, {wide} conns", sl, "v3-batch", lambda t: closed_loop(
            sl.connect, v3_batch(sl, t, value, BATCH), wide, s.seconds), kp_wide))
        for label, target, key, run, base in runs:
            topic = self.topic(f"pb-{size}")
            if key == "v3-batch" and key not in self.missing:
                body = json.dumps({"entries": [{"id": "1", "value": {"type": "BINARY", "data": b64(value)}}]})
                await self.sluice_serves(key, "POST", f"{sl.v3_prefix}/topics/{topic}/records:batch",
                                         body.encode(), {"Content-Type": "application/json"})
            if key in self.missing:
                self.line(label, self.missing[key])
                continue
            try:
                result, server = await measured(target, lambda r=run, t=topic: r(t))
            except FAILURES as exc:
                self.line(label, f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            batch[label] = result.item_rate
            vs = [f"x{ratio(result.item_rate, direct_rate):.2f} direct"]
            if base in batch:
                vs.insert(0, f"x{ratio(result.item_rate, batch[base]):.2f} {base}")
            p50, p99, _ = percentiles(result.latencies_ns) if result.latencies_ns else (0.0, 0.0, 0.0)
            lat = f"  p50 {p50:.1f} ms, p99 {p99:.1f} ms" if result.latencies_ns else ""
            self.line(label, f"{fmt(result.item_rate):>8} rec/s  {', '.join(vs)}{lat}  "
                             f"({cpu_note(result, server)}){errors_note(result)}")
            self.keep(f"{size} B  {label}: {fmt(result.item_rate)} rec/s ({', '.join(vs)})")

    async def consume(self, size: int, *, direct_only: bool = False) -> None:
        s = self.s
        topic = self.topic(f"fill-{size}")
        # More records than are read: a GET that reaches max_bytes returns at once, while the last one of an
        # exact fill would wait its whole timeout for records that never come (and that wait was measured).
        direct_produce(self.stack.kafka, topic, value_of(size), s.fill + 2 * (MAX_BYTES // size + 1))
        print(f"{size} B records: consume {s.fill:,} records", flush=True)
        n, span = direct_consume(self.stack.kafka, topic, s.fill)
        direct = n / span if span else float("nan")
        self.direct_consume[size] = direct
        self.line("direct consume loop", f"{fmt(direct):>8} rec/s")
        self.keep(f"{size} B  direct consume loop: {fmt(direct)} rec/s")
        if direct_only:
            return
        base = None
        for label, target, key in (("karapace v2 consumer", self.karapace, ""),
                                   ("sluice v2 consumer", self.sluice, "v2-consumer")):
            if target is None:
                continue
            probe_path = f"{target.v2_prefix}/consumers/probe-{uuid.uuid4().hex[:6]}"
            if key and not await self.sluice_serves(key, "POST", probe_path,
                                                    json.dumps({"name": "probe", "format": "binary"}).encode(),
                                                    {"Content-Type": V2_JSON}):
                self.line(label, self.missing[key])
                continue
            before = cpu_seconds(target.pid) if target.pid else 0.0
            cpu0 = self_cpu()
            try:
                got, span, wait, error = await v2_consume(target, topic, s.fill, timeout=120)
            except FAILURES as exc:
                self.line(label, f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            rate = got / span if span else float("nan")
            server = (cpu_seconds(target.pid) - before) if target.pid else 0.0
            vs = f"x{ratio(rate, direct):.2f} direct" + (f", x{ratio(rate, base):.2f} karapace" if base else "")
            tail = f"  {error}" if error else ""
            self.line(label, f"{fmt(rate):>8} rec/s  {vs}  (first records after {wait:.1f} s; client "
                             f"{self_cpu() - cpu0:.1f} CPU-s, server {server:.1f} CPU-s){tail}")
            self.keep(f"{size} B  {label}: {fmt(rate)} rec/s ({vs})")
            if label.startswith("karapace"):
                base = rate

    async def websocket(self, size: int, direct_consume_rate: float) -> None:
        s, st = self.s, self.stack
        print(f"{size} B records: WebSocket tail (per-viewer limit SLUICE_TAIL_BYTES_PER_SECOND="
              f"{st.tail_limit:,})", flush=True)
        topic = self.topic(f"ws-{size}")
        url = f"ws://127.0.0.1:{st.port}/ws/clusters/{st.cluster_id}/topics/{topic}/tail"
        await asyncio.to_thread(direct_produce, st.kafka, topic, value_of(size), s.ws_records)
        # Delivery rate: a bounded read of records already there, from the first records frame to the last (as
        # the direct consume loop is timed: from its first batch), so connecting and subscribing are not in it.
        viewer = Viewer(url, st.auth, {"from": "earliest", "until": "end"}, latency=False)
        t0 = time.monotonic()
        viewer.start()
        await viewer.ready.wait()
        if viewer.error and not viewer.count:
            await viewer.stop()
            reason = f"not served: {viewer.error}"
            self.line("websocket", reason)
            self.missing["websocket"] = reason
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(viewer.done.wait(), 120)
        span = viewer.last_at - viewer.first_at
        rate = (viewer.count - viewer.first_count) / span if span > 0 else float("nan")
        first_after = viewer.first_at - t0 if viewer.first_at else float("nan")
        await viewer.stop()
        note = "" if viewer.count >= s.ws_records else f"  (only {viewer.count:,} of {s.ws_records:,} arrived)"
        vs = f"x{ratio(rate, direct_consume_rate):.2f} direct consume loop"
        tail = f"  {viewer.error}" if viewer.error else ""
        self.line("1 viewer, records delivered", f"{fmt(rate):>8} rec/s  {vs}  (bounded read of "
                                                 f"{s.ws_records:,}; first records after {first_after:.2f} s)"
                                                 f"{note}{tail}")
        self.keep(f"{size} B  websocket 1 viewer: {fmt(rate)} rec/s delivered ({vs}){note}")

        fetch_rate: dict[int, float] = {}
        for viewers in (1, s.viewers):
            topic = self.topic(f"wsl-{size}")
            url = f"ws://127.0.0.1:{st.port}/ws/clusters/{st.cluster_id}/topics/{topic}/tail"
            tails = [Viewer(url, st.auth) for _ in range(viewers)]
            for v in tails:
                v.start()
            await asyncio.gather(*(v.ready.wait() for v in tails))
            await asyncio.sleep(2.0)
            counter: FetchCounter | None = None
            count_note = ""
            try:
                counter = FetchCounter(int(st.bootstrap.rsplit(":", 1)[1]))
            except OSError as exc:
                count_note = f"broker Fetch requests not counted ({exc})"
            stop = threading.Event()
            t0 = time.monotonic()
            sent = await asyncio.to_thread(paced_producer, st.kafka, topic, size, FIXED_RATE, s.seconds, stop)
            await asyncio.sleep(1.0)
            elapsed = time.monotonic() - t0
            if counter is not None:
                counter.close()
                fetch_rate[viewers] = counter.fetches() / elapsed
                vs_one = f", x{ratio(fetch_rate[viewers], fetch_rate[1]):.2f} 1 viewer's" if viewers > 1 else ""
                lost = f", {counter.lost} connections lost sync" if counter.lost else ""
                count_note = (f"broker Fetch requests {counter.fetches():,} ({fetch_rate[viewers]:,.1f}/s"
                              f"{vs_one}{lost})")
            lat = [x for v in tails for x in v.latencies_ns]
            p50, p99, _ = percentiles(lat)
            counts = [v.count for v in tails]
            errors = sorted({v.error for v in tails if v.error})
            for v in tails:
                await v.stop()
            self.line(f"{viewers} viewer(s) at {FIXED_RATE:,.0f} rec/s",
                      f"produce->viewer p50 {p50:.2f} ms, p99 {p99:.2f} ms; each got {min(counts):,}-{max(counts):,} "
                      f"of {sent:,}; {count_note}{'  ' + errors[0] if errors else ''}")
            self.keep(f"{size} B  websocket {viewers} viewer(s) at {FIXED_RATE:,.0f} rec/s: p99 {p99:.2f} ms; "
                      f"{count_note}")


    async def produce_drf(self, size: int) -> None:
        """The DRF (console session) produce paths: 1 record/request and 100 records/request."""
        s, value, drf = self.s, value_of(size), self.drf
        print(f"\n{size} B records: produce through the DRF views (a console session)", flush=True)
        runs: list[tuple[str, Callable[[str], Callable[[Conn], Awaitable[int]]], int]] = [
            ("drf v3 records", lambda t: v3_single(drf, t, value), s.workers),
            ("drf v3 records:batch x100", lambda t: v3_batch(drf, t, value, BATCH), s.batch_workers),
            ("drf v2 x100", lambda t: v2_produce(drf, t, value, BATCH), s.batch_workers),
        ]
        for label, make, workers in runs:
            call = make(self.topic(f"drf-{size}"))
            try:
                result, server = await measured(drf, lambda c=call, w=workers: closed_loop(drf.connect, c, w,
                                                                                           s.seconds))
            except FAILURES as exc:
                self.line(label, f"failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            p50, p99, _ = percentiles(result.latencies_ns)
            self.line(label, f"{fmt(result.item_rate):>8} rec/s  {fmt(result.rate):>8} req/s  p50 {p50:6.2f} ms  "
                             f"p99 {p99:6.2f} ms  ({cpu_note(result, server)}){errors_note(result)}")
            self.keep(f"{size} B  {label} ({workers} conns): {fmt(result.item_rate)} rec/s, {fmt(result.rate)} req/s, "
                      f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")


async def run_all(args: argparse.Namespace, stack: Stack, settings: Settings) -> None:
    bench = Bench(stack, settings)
    sizes = tuple(args.sizes) if args.sizes else (SIZES[:1] if args.quick else SIZES)
    for size in sizes:
        topic = bench.topic(f"direct-{size}")
        direct = direct_produce(stack.kafka, topic, value_of(size), settings.direct)
        print(f"\n{size} B records: direct confluent-kafka producer {fmt(direct)} rec/s (ceiling)", flush=True)
        bench.keep(f"{size} B  direct producer: {fmt(direct)} rec/s")
        if args.only in (None, "produce"):
            await bench.produce(size, direct)
        if args.only in (None, "produce", "produce-drf"):
            await bench.produce_drf(size)
        if args.only in (None, "consume", "websocket"):  # the tail's rate is set against the direct consume loop
            await bench.consume(size, direct_only=args.only == "websocket")
        if args.only not in (None, "websocket"):
            continue
        try:
            await bench.websocket(size, bench.direct_consume.get(size, float("nan")))
        except FAILURES as exc:
            print(f"  websocket failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    print("\nSummary")
    for line in bench.summary:
        print("  " + line)
    for key, reason in bench.missing.items():
        print(f"  sluice {key}: {reason}")


def leftovers(tmp: Path) -> list[psutil.Process]:
    """Processes still running with the scratch directory in their command line (or as their cwd)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and (str(tmp) in " ".join(proc.info["cmdline"] or ())
                                            or str(proc.info["cwd"] or "").startswith(str(tmp))):
                found.append(proc)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100 B only, shorter runs, fewer records (~4-5 minutes)")
    ap.add_argument("--sizes", type=int, nargs="*", help="record sizes (default 100 1024; quick 100)")
    ap.add_argument("--karapace-git", type=Path, default=None,
                    help="a git clone of Aiven-Open/karapace to (re)build var/bench/karapace-venv from")
    ap.add_argument("--no-karapace", action="store_true", help="measure Sluice and the direct clients only")
    ap.add_argument("--keep-logs", action="store_true", help="keep the scratch directory (logs) and name it")
    ap.add_argument("--only", choices=("produce", "produce-drf", "consume", "websocket"),
                    help="measure one group of paths (websocket also runs the direct consume loop, its baseline)")
    args = ap.parse_args()
    settings = QUICK if args.quick else FULL

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-rest-"))
    stack = Stack(procs, tmp)
    try:
        t0 = time.monotonic()
        stack.start_sluice()
        print(f"sluice up: API on 127.0.0.1:{stack.port}, demo cluster {stack.cluster_id} on {stack.bootstrap} "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        why = "--no-karapace" if args.no_karapace else stack.start_karapace(args.karapace_git)
        if why:
            print(f"Karapace not measured: {why}", flush=True)
        else:
            print(f"Karapace REST proxy on 127.0.0.1:{stack.karapace_port}: {stack.karapace_version}", flush=True)
        import uvloop

        uvloop.run(run_all(args, stack, settings))
        print(f"\ntotal {time.monotonic() - t0:.0f} s")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if stack.up is not None:  # SIGTERM: sluice up stops its children, the demo broker and Postgres
            procs.stop(stack.up, timeout=60)
        procs.stop_all()
        for leftover in leftovers(tmp):
            print(f"killing leftover pid {leftover.pid}: {' '.join(leftover.cmdline())[:120]}", file=sys.stderr)
            with contextlib.suppress(psutil.Error):
                leftover.kill()
        if args.keep_logs:
            print(f"logs kept under {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
