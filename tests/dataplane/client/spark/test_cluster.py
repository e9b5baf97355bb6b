"""The source on a real Spark cluster: a standalone master and one worker (separate JVMs) from the installed
PySpark, a driver with ``SPARK_MASTER`` pointing at them, and executors that import the data source from the zip
``spark_session()`` ships, not from this checkout.

The driver is a subprocess (one SparkContext per process: the test session's own ``local[2]`` Spark lives in
the xdist worker). Master and worker run in their own process groups, stopped by pid at the end; the fixture
asserts nothing of either group (executors, their Python workers) is left. The executors run this venv's Python
(``PYSPARK_PYTHON``) for pyarrow and confluent-kafka, but Sluice's own code comes from the zip.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluice.embedded import free_port
from tests.dataplane.client.spark.conftest import produce

# About 70 s here (four JVMs on 2 shared cores): `make chaos` runs it; the default suite's short version is
# test_session.py's check that the shipped zip alone provides the source where Sluice is also installed.
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.slow]

SMALL_DAEMON_HEAP = "256m"  # master and worker; the default 1 GiB each is a lot on 2 cores

DRIVER = r"""
import json, os, sys
from dataplane.client.spark.session import spark_session, stop_spark

bootstrap, topic = sys.argv[1:3]
spark = spark_session(conf={"spark.driver.memory": "512m", "spark.executor.memory": "512m",
                            "spark.cores.max": "1"})
try:
    sc = spark.sparkContext
    df = spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    counts = {r["k"]: r["n"] for r in df.selectExpr("CAST(key AS STRING) AS k").groupBy("k").count()
              .selectExpr("k", "CAST(count AS INT) AS n").collect()}

    def where(_):
        import dataplane.client.spark.source as source
        from dataplane.client.spark.fetch import native_engine
        from dataplane.protocol.compiled import columns_module
        native = native_engine({"bootstrap.servers": bootstrap}) is not None
        compiled = columns_module().__file__ if native else None
        ancestors, pid = [], os.getpid()
        while pid > 1:  # this Python worker, the pyspark daemon, the executor JVM, the Spark worker ...
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            ancestors.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
        yield {"source": source.__file__, "pid": os.getpid(), "ancestors": ancestors, "native": native,
               "compiled": compiled}

    executor = sc.parallelize([0], 1).mapPartitions(where).collect()[0]
    infos = sc.statusTracker().getExecutorInfos()
    print("RESULT " + json.dumps({"master": sc.master, "counts": counts, "executor": executor,
                                  "executors": len(infos), "driver_pid": os.getpid()}), flush=True)
finally:
    stop_spark()
"""


@dataclass
class Standalone:
    url: str
    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    logs: Path

    def tail(self) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                         for p in sorted(self.logs.glob("*.log")))


def _spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:  # spark-class execs the JVM: the pid is the JVM's, its group is ours
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group (a worker's executors and their Python workers are in it), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(proc.pid):
            proc.poll()
            time.sleep(0.1)
        if not _group_alive(proc.pid):
            break
    proc.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # A zombie leader (exited, not yet reaped) still counts; reaped above through poll().
    return True


def _wait_for_line(log: Path, words: str, proc: subprocess.Popen[bytes], timeout: float, tail: Any) -> None:
    deadline = time.monotonic() + timeout
    while words not in (log.read_text(errors="replace") if log.exists() else ""):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {words!r} in {log.name} (exit {proc.poll()})\n{tail()}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    home = _spark_home()
    logs = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": SMALL_DAEMON_HEAP,
           "SPARK_NO_DAEMONIZE": "1", "SPARK_LOG_DIR": str(logs), "PYSPARK_PYTHON": sys.executable}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = f"{home}/bin/spark-class"
    master = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)], env, logs / "master.log")
    worker: subprocess.Popen[bytes] | None = None
    try:
        worker = _start([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                         "--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui),
                         "--work-dir", str(logs / "work")], env, logs / "worker.log")
        cluster = Standalone(url, master, worker, logs)
        _wait_for_line(logs / "worker.log", "Successfully registered with master", worker, 120, cluster.tail)
        yield cluster
    finally:
        for proc in (worker, master):
            if proc is not None:
                _stop(proc)
        for proc in (worker, master):
            if proc is not None:
                assert not _group_alive(proc.pid), f"process group {proc.pid} outlived its stop"


def test_a_read_runs_on_executors_that_import_the_shipped_source(standalone: Standalone, kafka: str,
                                                                new_topic: Any, tmp_path: Path) -> None:
    topic = new_topic(2)
    written = produce(kafka, topic, [(i % 2, f"k{i % 3}".encode(), f"v{i}".encode()) for i in range(30)])
    env = {**os.environ, "SPARK_MASTER": standalone.url, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": _spark_home()}
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run([sys.executable, str(script), kafka, topic], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}\n{standalone.tail()}"
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["master"] == standalone.url
    assert result["counts"] == {"k0": 10, "k1": 10, "k2": 10} and len(written) == 30
    executor = result["executor"]
    # A Python worker of an executor JVM (not of the driver), importing the source from the shipped zip.
    assert any("CoarseGrainedExecutorBackend" in a for a in executor["ancestors"]), executor
    assert not any(f"driver.py {kafka}" in a for a in executor["ancestors"]), executor
    assert ".zip/dataplane/client/spark/source.py" in executor["source"], executor
    assert not executor["source"].startswith(str(Path(__file__).resolve().parents[4])), executor
    # The compiled decoder was shipped beside the zip, so executors read with the native engine.
    assert executor["native"] and not executor["compiled"].startswith(str(Path(__file__).resolve().parents[4]))
    assert result["executors"] >= 2  # the driver and one executor
