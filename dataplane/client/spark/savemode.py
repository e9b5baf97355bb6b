"""Spark's Kafka sink save modes for ``df.write.format("sluice")``.

Spark's Kafka sink (a V1 ``CreatableRelationProvider``) takes ``Append`` and its default ``ErrorIfExists``
(both produce the rows) and refuses ``Overwrite`` and ``Ignore``. Spark checks a Python data source's mode
in the JVM, where only ``Append`` and ``Overwrite`` pass, so a job written for the Kafka sink -- with no
``.mode(...)`` -- would fail. No data source hook sees the mode before that check, so ``install()`` wraps
PySpark's ``DataFrameWriter`` (once per process; ``register()`` calls it): for the ``sluice`` format the
default and ``errorifexists`` become ``append`` and ``overwrite``/``ignore`` raise Kafka's error. Other
formats pass through untouched.
"""

from __future__ import annotations

import threading
from typing import Any

from dataplane.client.spark.options import SparkSourceError

_lock = threading.Lock()
_installed = False
_DEFAULTS = {"error", "errorifexists", "default"}


def check_mode(mode: str | None) -> str:
    """The mode to hand Spark for a ``sluice`` write, or Kafka's error for one it refuses."""
    name = (mode or "errorifexists").strip().lower()
    if name == "append" or name in _DEFAULTS:
        return "append"
    if name in ("overwrite", "ignore"):
        raise SparkSourceError(f"Save mode {name} not allowed for Kafka (the sluice sink). Allowed save modes are "
                               "append and errorifexists (default).")
    return name  # not a mode at all: Spark's own error names the choices


def install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        from pyspark.sql.readwriter import DataFrameWriter

        mode, fmt, save = DataFrameWriter.mode, DataFrameWriter.format, DataFrameWriter.save

        def mode_(self: Any, saveMode: str | None) -> Any:
            if saveMode is not None:
                self._sluice_mode = saveMode
            return mode(self, saveMode)

        def format_(self: Any, source: str) -> Any:
            self._sluice_format = source
            return fmt(self, source)

        def save_(self: Any, path: str | None = None, format: str | None = None,
                  mode: str | None = None, partitionBy: Any = None, **options: Any) -> None:
            if format is not None:
                format_(self, format)
            if mode is not None:
                mode_(self, mode)
            if str(getattr(self, "_sluice_format", "")).strip().lower() == "sluice":
                mode_(self, check_mode(getattr(self, "_sluice_mode", None)))
            save(self, path, partitionBy=partitionBy, **options)

        for name, fn, orig in (("mode", mode_, mode), ("format", format_, fmt), ("save", save_, save)):
            fn.__doc__, fn.__name__, fn.__qualname__ = orig.__doc__, orig.__name__, orig.__qualname__
            setattr(DataFrameWriter, name, fn)
        _installed = True
