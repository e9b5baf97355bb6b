"""The one SparkSession a process uses: built once, with the ``sluice`` source registered, stopped for good.

``local[*]`` by default, ``SPARK_MASTER`` when set (``spark://…``, ``yarn``, ``k8s://…``). Settings are
for a small machine (2 cores): few shuffle partitions, a bounded driver heap, no UI. On a real cluster the
``dataplane`` and ``pyspark_sluice`` packages are shipped to executors as one zip with ``addPyFile`` (plain
Python; the executors' interpreter, ``PYSPARK_PYTHON``/``spark.pyspark.python``, needs only confluent-kafka and
pyarrow installed, as Spark's own Python workers need pyarrow). PySpark puts shipped files ahead of
site-packages, so executors run the driver's version of the source even where another Sluice is installed.

``stop_spark`` stops the session *and* the JVM behind it (PySpark keeps the gateway JVM alive until the
Python process exits otherwise), so a worker or a test session leaves no JVM and no Python worker behind.
Thread-safety: both functions take a module lock; the session itself may be used from any thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",  # 2 cores: the default 200 would be 200 tiny tasks per shuffle
    "spark.default.parallelism": "4",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",  # small heaps, fewer GC threads on 2 cores
}

_lock = threading.Lock()
_session: SparkSession | None = None


def master_url(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER", "").strip() or "local[*]"


def _package_zip() -> str:
    """``dataplane`` (the source and the clients it uses) and ``pyspark_sluice`` (Spark's discovery of the
    ``sluice`` format) as one zip for ``addPyFile``, built in a temp directory."""
    import importlib

    target = Path(tempfile.mkdtemp(prefix="sluice-spark-")) / "sluice-spark.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for package in ("dataplane", "pyspark_sluice"):
            root = Path(importlib.import_module(package).__file__ or "").resolve().parent
            for path in sorted(root.rglob("*.py")):
                if "__pycache__" not in path.parts:
                    z.write(path, Path(package) / path.relative_to(root))
    return str(target)


def spark_session(*, master: str | None = None, app_name: str = "sluice",
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """The process's session (created on first call; later calls return it and ignore their arguments)."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        from pyspark.sql import SparkSession

        from dataplane.client.spark import register

        url = master_url(master)
        builder = SparkSession.builder.master(url).appName(app_name)
        settings = {**DEFAULTS, **(conf or {})}
        if url.startswith("local"):
            # Python workers run this interpreter (the venv with pyarrow and confluent-kafka), not `python3`.
            # The planner workers (data source lookup and planning) take it from the environment only.
            settings.setdefault("spark.pyspark.python", sys.executable)
            settings.setdefault("spark.pyspark.driver.python", sys.executable)
            os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
        for key, value in settings.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        if not url.startswith("local"):
            session.sparkContext.addPyFile(_package_zip())
            from dataplane.protocol.compiled import extension_file

            compiled = extension_file()
            if compiled is not None:  # executors of the same Python import it from the files directory
                session.sparkContext.addFile(compiled)
        register(session)
        _session = session
        return session


def stop_spark() -> None:
    """Stop the session and shut its JVM down (waits for the process to exit)."""
    global _session
    with _lock:
        if _session is None:
            return
        from pyspark import SparkContext

        _session.stop()
        _session = None
        gateway = SparkContext._gateway
        if gateway is None:
            return
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # the JVM exits when its stdin closes
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:  # a JVM that will not exit is killed rather than leaked
                proc.kill()
                proc.wait()
