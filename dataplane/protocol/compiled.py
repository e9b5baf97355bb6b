"""The compiled record decoder, wherever this process can find it.

Installed with the package it is ``dataplane.protocol._columns``. A Spark executor that only got the shipped zip
of .py files cannot import an extension from a zip, so the driver also ships the extension file itself
(``SparkContext.addFile``); PySpark puts that directory on its Python workers' path, where the file imports as the
top-level ``_columns`` (same interpreter ABI only: the file name carries it, and import refuses any other).
"""

from __future__ import annotations

from types import ModuleType


def columns_module() -> ModuleType:
    """``_columns``, installed or shipped; ImportError when neither is here (the caller falls back)."""
    try:
        from dataplane.protocol import _columns  # noqa: PLC0415 - an optional compiled extension
    except ImportError:
        import _columns  # type: ignore[no-redef]  # noqa: PLC0415 - the copy shipped beside the zip to Spark executors
    return _columns


def extension_file() -> str | None:
    """The installed extension's path (what the driver ships to executors), or None without one."""
    try:
        from dataplane.protocol import _columns  # noqa: PLC0415 - an optional compiled extension
    except ImportError:
        return None
    return _columns.__file__
