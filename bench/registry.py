"""Schema Registry benchmark: Sluice's registry against Aiven's Karapace, on one broker, in the same run.

    python bench/registry.py              # ~4 minutes on 2 cores
    python bench/registry.py --quick      # shorter runs, ~2-3 minutes
    python bench/registry.py --no-karapace

Starts ``sluice up`` in a temp SLUICE_VAR_DIR (as bench/rest.py does: embedded Postgres and Redis, the demo
cluster's broker), then Karapace's schema registry (``python -m karapace``) and its REST proxy
(``python -m karapace.kafka_rest_apis``) from the venv that bench/karapace_setup.sh prepares (``$KARAPACE_VENV``,
else /work/karapace-venv, else var/bench/karapace-venv), both on that same broker: Karapace keeps its schemas in
the ``_schemas`` topic there. Without a Karapace venv the Karapace side is skipped with a message.

The same Avro schemas are registered on both (one per subject). Then, with the load generator of bench/rest.py
(bench/httpload.py: asyncio, keep-alive connections), for each registry:

* ``GET /schemas/ids/{id}``, ``POST /subjects/{s}/versions`` of a schema the subject already has, and
  ``POST /subjects/{s}`` (lookup): requests/s from N connections (closed loop), and p50/p99 at a paced
  1,000 req/s (open loop, latency from each request's due time);
* REST v2 Avro produce, 100 records/request by ``value_schema_id`` (records/s): Karapace's REST proxy against
  Sluice's ``/kafka/v2/clusters/{id}/topics/{t}``; a Sluice that refuses Avro prints "not measurable yet". Then
  Sluice's binary produce of the same records (no schema) as the in-run baseline of what schemas cost, with the
  server's CPU per record for each.

Goals (issue): the three registry paths at >= 2x Karapace's requests/s and p99 <= 20 ms at 1,000 req/s; Avro
produce at >= 5x Karapace's records/s. Every process started here is killed by pid on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastavro
import karapace_venv
import psutil
from common import Procs, cpu_seconds, percentiles, ratio
from httpload import Conn, HttpError, LoadResult, closed_loop, open_loop
from rest import FAILURES, Stack, Target, check, cpu_note, errors_note, fmt, leftovers, measured

from sluice.embedded import free_port

SR_JSON = "application/vnd.schemaregistry.v1+json"
V2_AVRO = "application/vnd.kafka.avro.v2+json"
V2_JSON = "application/vnd.kafka.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
FIXED_RATE = 1000.0
SUBJECTS = 20
BATCH = 100


@dataclass
class Settings:
    seconds: float
    rounds: int  # closed-loop runs per side, taking turns
    workers: int  # connections of a closed-loop registry run
    produce_workers: int  # connections of the 100-records/request Avro produce run


QUICK = Settings(seconds=3, rounds=2, workers=16, produce_workers=4)
FULL = Settings(seconds=5, rounds=3, workers=16, produce_workers=8)


def schema_text(i: int) -> str:
    """Subject ``i``'s Avro schema (canonical form, so both registries store the same text)."""
    return json.dumps({"type": "record", "name": f"BenchRecord{i}", "namespace": "bench.registry",
                       "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                                  {"name": "tags", "type": {"type": "array", "items": "string"}},
                                  {"name": "score", "type": ["null", "double"], "default": None}]},
                      separators=(",", ":"))


VALUE_SCHEMA = json.dumps({"type": "record", "name": "BenchValue", "namespace": "bench.produce",
                           "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                                      {"name": "payload", "type": "string"}]}, separators=(",", ":"))


def value_record(i: int) -> dict[str, object]:
    return {"id": i, "name": f"user-{i:06d}", "payload": "x" * 64}


# ---------------------------------------------------------------------------- Karapace


def karapace_env(stack: Stack, port: int, **extra: str) -> dict[str, str]:
    env = {**os.environ, "KARAPACE_BOOTSTRAP_URI": stack.bootstrap, "KARAPACE_HOST": "127.0.0.1",
           "KARAPACE_PORT": str(port), "KARAPACE_ADVERTISED_HOSTNAME": "127.0.0.1",
           "KARAPACE_ADVERTISED_PORT": str(port), "KARAPACE_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
           "KARAPACE_SASL_MECHANISM": "PLAIN", "KARAPACE_SASL_PLAIN_USERNAME": stack.kafka["sasl.username"],
           "KARAPACE_SASL_PLAIN_PASSWORD": stack.kafka["sasl.password"], "KARAPACE_LOG_LEVEL": "WARNING",
           **extra}
    env.pop("PYTHONPATH", None)
    return env


def wait_http(proc: subprocess.Popen[bytes], url: str, log_path: Path, seconds: float = 120,
              ready: Callable[[bytes], bool] = lambda _body: True) -> str | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited:\n{log_path.read_text(errors='replace')[-2000:]}"
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=5) as r:
            if r.status == 200 and ready(r.read()):
                return None
        time.sleep(0.3)
    return f"did not answer {url} within {seconds:.0f} s:\n{log_path.read_text(errors='replace')[-1500:]}"


@dataclass
class Karapace:
    registry: subprocess.Popen[bytes]
    registry_port: int
    rest: subprocess.Popen[bytes] | None
    rest_port: int
    version: str | None


def start_karapace(stack: Stack, procs: Procs) -> Karapace | str:
    """Karapace's registry and REST proxy on the demo broker; or why not."""
    python = karapace_venv.venv_python()
    if not python.exists():
        return (f"no Karapace venv at {python.parent.parent}: prepare one with "
                "KARAPACE_GIT=/path/to/karapace.git bench/karapace_setup.sh (see docs/benchmarks.md)")
    registry_port, rest_port = free_port(), free_port()
    reg_log = stack.tmp / "karapace-registry.log"
    with open(reg_log, "wb") as out:
        registry = procs.start([str(python), "-m", "karapace"], cwd=stack.tmp, stdout=out, stderr=subprocess.STDOUT,
                               env=karapace_env(stack, registry_port, KARAPACE_KARAPACE_REGISTRY="true",
                                                KARAPACE_REGISTRY_HOST="127.0.0.1",
                                                KARAPACE_REGISTRY_PORT=str(registry_port),
                                                KARAPACE_TOPIC_NAME="_schemas",
                                                KARAPACE_WAITING_TIME_BEFORE_ACTING_AS_MASTER_MS="1000"))
    # Writes need an elected primary (Karapace elects one through a consumer group on the broker).
    why = wait_http(registry, f"http://127.0.0.1:{registry_port}/master_available", reg_log,
                    ready=lambda body: bool(json.loads(body).get("master_available")))
    if why:
        return f"Karapace's registry {why}"
    rest_log = stack.tmp / "karapace-rest.log"
    with open(rest_log, "wb") as out:
        rest = procs.start([str(python), "-m", "karapace.kafka_rest_apis"], cwd=stack.tmp, stdout=out,
                           stderr=subprocess.STDOUT,
                           env=karapace_env(stack, rest_port, KARAPACE_KARAPACE_REST="true",
                                            KARAPACE_REGISTRY_HOST="127.0.0.1",
                                            KARAPACE_REGISTRY_PORT=str(registry_port),
                                            KARAPACE_PRODUCER_LINGER_MS="5", KARAPACE_PRODUCER_ACKS="1"))
    why = wait_http(rest, f"http://127.0.0.1:{rest_port}/topics", rest_log)
    if why:
        print(f"Karapace's REST proxy {why}", flush=True)
        procs.stop(rest)
        return Karapace(registry, registry_port, None, rest_port, karapace_venv.describe())
    return Karapace(registry, registry_port, rest, rest_port, karapace_venv.describe())


# ---------------------------------------------------------------------------- requests


def get_by_id(target: Target, prefix: str, ids: list[int]) -> Callable[[Conn], Awaitable[int]]:
    """``GET /schemas/ids/{id}``, cycling through the registered ids."""
    paths = itertools.cycle([f"{prefix}/schemas/ids/{i}" for i in ids])
    headers = {**target.headers, "Accept": SR_JSON}

    async def call(conn: Conn) -> int:
        body = check(await conn.request("GET", next(paths), headers), (200,))
        if "schema" not in body:
            raise HttpError(f"no schema in {str(body)[:200]}")
        return 1
    return call


def post_schema(target: Target, prefix: str, registered: dict[str, int], versions: bool) -> Callable[[Conn],
                                                                                                      Awaitable[int]]:
    """Register-existing (``POST /subjects/{s}/versions``) or lookup (``POST /subjects/{s}``) of each subject's
    own schema, checking the id that comes back."""
    calls = itertools.cycle([(f"{prefix}/subjects/{s}{'/versions' if versions else ''}",
                              json.dumps({"schema": schema_text(i)}).encode(), registered[s])
                             for i, s in enumerate(registered)])
    headers = {**target.headers, "Content-Type": SR_JSON, "Accept": SR_JSON}

    async def call(conn: Conn) -> int:
        path, body, want = next(calls)
        answer = check(await conn.request("POST", path, headers, body), (200,))
        if answer.get("id") != want:
            raise HttpError(f"id {answer.get('id')} != {want}: {str(answer)[:200]}")
        return 1
    return call


def avro_produce(target: Target, prefix: str, topic: str, schema_id: int, n: int) -> Callable[[Conn],
                                                                                              Awaitable[int]]:
    """v2 ``POST /topics/{t}`` with ``value_schema_id`` and ``n`` Avro records (JSON-encoded values)."""
    path = f"{prefix}/topics/{topic}"
    headers = {**target.headers, "Content-Type": V2_AVRO, "Accept": V2_JSON}
    records = [{"value": value_record(i)} for i in range(n)]
    body = json.dumps({"value_schema_id": schema_id, "records": records}).encode()

    async def call(conn: Conn) -> int:
        answer = check(await conn.request("POST", path, headers, body), (200,))
        offsets = answer["offsets"]
        if len(offsets) != n or any(o.get("error_code") or o.get("error") for o in offsets):
            raise HttpError(f"delivery errors: {str(offsets)[:300]}")
        return n
    return call


async def register_all(target: Target, prefix: str) -> dict[str, int]:
    """Register subject i's schema on ``target``; {subject: id}."""
    conn = await target.connect()
    headers = {**target.headers, "Content-Type": SR_JSON, "Accept": SR_JSON}
    registered = {}
    try:
        for i in range(SUBJECTS):
            subject = f"bench-{i}-value"
            answer = check(await conn.request("POST", f"{prefix}/subjects/{subject}/versions", headers,
                                              json.dumps({"schema": schema_text(i)}).encode()), (200,))
            registered[subject] = int(answer["id"])
    finally:
        conn.close()
    return registered


# ---------------------------------------------------------------------------- the run


@dataclass
class Side:
    name: str
    target: Target  # the registry's server
    prefix: str  # "" for Karapace, "/schema-registry/{id}" for Sluice
    produce: Target | None  # the REST proxy's server
    produce_prefix: str
    registered: dict[str, int] | None = None


async def settle(sides: list[Side], seconds: float = 60) -> None:
    """Wait until every server is idle (< 10% of a core over 0.5 s): a server left with a backlog by an open loop
    it could not keep up with would otherwise be measured against, or slow, the next run."""
    pids = [pid for side in sides for pid in (side.target.pid, side.produce.pid if side.produce else None) if pid]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        before = {pid: cpu_seconds(pid) for pid in pids}
        await asyncio.sleep(0.5)
        if all(cpu_seconds(pid) - used < 0.05 for pid, used in before.items()):
            return


def load_note() -> str:
    """The machine's load average: on a shared 2-core machine it decides the latencies more than the servers do."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def line(label: str, text: str) -> None:
    print(f"  {label:<44} {text}", flush=True)


async def run_all(args: argparse.Namespace, stack: Stack, karapace: Karapace | None, s: Settings) -> list[str]:
    cid = stack.cluster_id
    sluice_web = Target("sluice", stack.port, {"Authorization": stack.auth}, pid=stack.web_pid)
    sides = [Side("Sluice", sluice_web, f"/schema-registry/{cid}", sluice_web, f"/kafka/v2/clusters/{cid}")]
    if karapace is not None:
        k_reg = Target("karapace", karapace.registry_port, pid=karapace.registry.pid)
        k_rest = (Target("karapace-rest", karapace.rest_port, pid=karapace.rest.pid)
                  if karapace.rest is not None else None)
        sides.insert(0, Side("Karapace", k_reg, "", k_rest, ""))
    for side in sides:
        side.registered = await register_all(side.target, side.prefix)
        print(f"{side.name}: registered {len(side.registered)} subjects, ids "
              f"{min(side.registered.values())}..{max(side.registered.values())}", flush=True)

    summary: list[str] = []
    loads: list[tuple[str, Callable[[Side], Callable[[Conn], Awaitable[int]]]]] = [
        ("GET /schemas/ids/{id}", lambda sd: get_by_id(sd.target, sd.prefix, sorted(set(sd.registered.values())))),
        ("POST /subjects/{s}/versions (existing)", lambda sd: post_schema(sd.target, sd.prefix, sd.registered, True)),
        ("POST /subjects/{s} (lookup)", lambda sd: post_schema(sd.target, sd.prefix, sd.registered, False)),
    ]
    for label, make in loads:
        print(f"\n{label}: closed loop, {s.workers} connections, {s.rounds} x {s.seconds:.0f} s taking turns "
              f"(median); then {FIXED_RATE:,.0f} req/s paced; {load_note()}", flush=True)
        runs: dict[str, list[float]] = {side.name: [] for side in sides}
        p99s: dict[str, float] = {}
        for round_no in range(s.rounds):  # the machine's other load changes: the sides take turns
            for side in sides if round_no % 2 == 0 else sides[::-1]:
                await settle(sides)
                try:
                    res, cpu = await measured(side.target, lambda sd=side, mk=make: closed_loop(  # type: ignore[misc]
                        sd.target.connect, mk(sd), s.workers, s.seconds))
                except FAILURES as exc:
                    line(side.name, f"failed: {type(exc).__name__}: {exc}"[:200])
                    continue
                p50, p99, _ = percentiles(res.latencies_ns)
                runs[side.name].append(res.rate)
                line(f"{side.name} (round {round_no + 1})",
                     f"{fmt(res.rate)} req/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                     f"({cpu_note(res, cpu)}){errors_note(res)}")
        rates = {name: statistics.median(got) for name, got in runs.items() if got}
        for side in sides[::-1]:  # Sluice first: an overloaded server's backlog must not run into the other's turn
            await settle(sides)
            try:
                res, cpu = await measured(side.target, lambda sd=side, mk=make: open_loop(  # type: ignore[misc]
                    sd.target.connect, mk(sd), FIXED_RATE, s.seconds))
            except FAILURES as exc:
                line(f"{side.name} @ {FIXED_RATE:,.0f}/s", f"failed: {type(exc).__name__}: {exc}"[:200])
                continue
            p50, p99, _ = percentiles(res.latencies_ns)
            p99s[side.name] = p99
            line(f"{side.name} @ {FIXED_RATE:,.0f}/s", f"achieved {fmt(res.rate)} req/s, p50 {p50:.1f} ms, "
                                                       f"p99 {p99:.1f} ms ({cpu_note(res, cpu)}){errors_note(res)}")
        for side in sides:
            if side.name in rates:
                summary.append(f"{label} | {side.name} | median {fmt(rates[side.name])} req/s | "
                               f"p99 at {FIXED_RATE:,.0f}/s {p99s.get(side.name, float('nan')):.1f} ms")
        if "Karapace" in rates and "Sluice" in rates:
            summary.append(f"{label} | Sluice/Karapace x{ratio(rates['Sluice'], rates['Karapace']):.2f}")

    print(f"\nREST v2 Avro produce, {BATCH} records/request by value_schema_id ({s.produce_workers} connections, "
          f"{s.seconds:.0f} s); {load_note()}", flush=True)
    topics = [f"bench-avro-{os.getpid()}-{side.name.lower()}" for side in sides]
    stack.create_topics(topics)
    produced: dict[str, float] = {}
    for side, topic in zip(sides, topics, strict=True):
        if side.produce is None:
            line(side.name, "no REST proxy")
            continue
        await settle(sides)
        schema_id = await register_value(side, f"{topic}-value")  # the topic's subject (TopicNameStrategy)
        call = avro_produce(side.produce, side.produce_prefix, topic, schema_id, BATCH)
        probe = await side.produce.connect()
        try:
            await call(probe)
        except FAILURES as exc:
            line(side.name, f"not measurable yet: {exc}"[:240])
            summary.append(f"Avro produce x{BATCH} | {side.name} | not measurable yet")
            continue
        finally:
            probe.close()
        server = side.produce
        res, cpu = await measured(server, lambda srv=server, c=call: closed_loop(  # type: ignore[misc]
            srv.connect, c, s.produce_workers, s.seconds))
        produced[side.name] = res.item_rate
        versus = (f", x{ratio(res.item_rate, produced['Karapace']):.2f} Karapace"
                  if side.name != "Karapace" and "Karapace" in produced else "")
        line(side.name, f"{fmt(res.item_rate)} rec/s{versus} ({cpu_note(res, cpu)}{per_record(res, cpu)})"
                        f"{errors_note(res)}")
        summary.append(f"Avro produce x{BATCH} | {side.name} | {fmt(res.item_rate)} rec/s{versus}")
    sluice = sides[-1]
    if "Sluice" in produced and sluice.produce is not None:
        # The in-run baseline of the schema'd path: the same request shape in the binary format (no schema), with
        # values as long as the framed Avro ones, on the same server. Its rate and CPU per record against the Avro
        # run's say what schemas cost, whatever the machine's other load does to both.
        await settle(sides)
        server = sluice.produce
        plain = binary_produce(server, sluice.produce_prefix, topics[-1], BATCH)
        res, cpu = await measured(server, lambda srv=server, c=plain: closed_loop(  # type: ignore[misc]
            srv.connect, c, s.produce_workers, s.seconds))
        versus = f", Avro x{ratio(produced['Sluice'], res.item_rate):.2f} of it"
        line("Sluice, binary (same records, no schema)",
             f"{fmt(res.item_rate)} rec/s{versus} ({cpu_note(res, cpu)}{per_record(res, cpu)}){errors_note(res)}")
        summary.append(f"v2 binary produce x{BATCH} | Sluice | {fmt(res.item_rate)} rec/s{versus}")
    return summary


def per_record(res: LoadResult, server_cpu: float | None) -> str:
    """The server's CPU time per record: what the machine's other load changes least."""
    return f", {server_cpu * 1e6 / res.items:.1f} us server CPU/record" if server_cpu is not None and res.items else ""


def binary_produce(target: Target, prefix: str, topic: str, n: int) -> Callable[[Conn], Awaitable[int]]:
    """v2 ``POST /topics/{t}`` in the binary format: ``n`` records whose values are as long as the framed Avro
    values of :func:`avro_produce` (5 bytes of framing and the record's Avro encoding)."""
    path = f"{prefix}/topics/{topic}"
    headers = {**target.headers, "Content-Type": V2_BINARY, "Accept": V2_JSON}
    records = [{"value": base64.b64encode(b"\x00" * (5 + avro_size(value_record(i)))).decode()} for i in range(n)]
    body = json.dumps({"records": records}).encode()

    async def call(conn: Conn) -> int:
        answer = check(await conn.request("POST", path, headers, body), (200,))
        offsets = answer["offsets"]
        if len(offsets) != n or any(o.get("error_code") or o.get("error") for o in offsets):
            raise HttpError(f"delivery errors: {str(offsets)[:300]}")
        return n
    return call


def avro_size(value: dict[str, object]) -> int:
    """The length of ``value``'s Avro encoding with VALUE_SCHEMA."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(VALUE_SCHEMA)), value)
    return len(out.getvalue())


async def register_value(side: Side, subject: str) -> int:
    conn = await side.target.connect()
    try:
        answer = check(await conn.request("POST", f"{side.prefix}/subjects/{subject}/versions",
                                          {**side.target.headers, "Content-Type": SR_JSON},
                                          json.dumps({"schema": VALUE_SCHEMA}).encode()), (200,))
    finally:
        conn.close()
    return int(answer["id"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 s runs (~2-3 minutes)")
    ap.add_argument("--no-karapace", action="store_true", help="measure Sluice only")
    ap.add_argument("--keep-logs", action="store_true", help="keep the scratch directory (logs) and name it")
    args = ap.parse_args()
    settings = QUICK if args.quick else FULL

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-registry-"))
    stack = Stack(procs, tmp)
    try:
        t0 = time.monotonic()
        stack.start_sluice()
        print(f"sluice up: API on 127.0.0.1:{stack.port}, demo cluster {stack.cluster_id} on {stack.bootstrap} "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        karapace: Karapace | None = None
        if args.no_karapace:
            print("Karapace not measured: --no-karapace", flush=True)
        else:
            started = start_karapace(stack, procs)
            if isinstance(started, str):
                print(f"Karapace not measured: {started}", flush=True)
            else:
                karapace = started
                print(f"Karapace registry on 127.0.0.1:{karapace.registry_port}, REST proxy on "
                      f"127.0.0.1:{karapace.rest_port}: {karapace.version}", flush=True)
        import uvloop

        summary = uvloop.run(run_all(args, stack, karapace, settings))
        print("\nsummary")
        for row in summary:
            print(f"  {row}")
        print(f"\ntotal {time.monotonic() - t0:.0f} s")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if stack.up is not None:
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
