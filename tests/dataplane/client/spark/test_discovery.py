"""Spark's own discovery finds the `sluice` data source in the venv as `make` installs it.

PySpark lists Python data sources with ``pkgutil.iter_modules()`` (``pyspark.sql.worker.lookup_data_sources``) and
imports each ``pyspark_*`` module's ``DefaultSource``. setuptools' default editable install maps packages with an
import hook that ``iter_modules`` cannot see; `make` installs with ``editable_mode=compat`` (a ``.pth`` path entry),
and a regular install (the Docker image) puts ``pyspark_sluice`` in site-packages: both are seen.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import pkgutil
import pyspark.sql.worker.lookup_data_sources as lookup
names = [m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")]
print(",".join(names))
from pyspark_sluice import DefaultSource
print(DefaultSource.name())
"""


def test_spark_discovery_sees_pyspark_sluice_in_the_installed_venv(tmp_path: Path) -> None:
    # -I: no PYTHONPATH, no current directory, no user site -- only what the venv itself has installed.
    done = subprocess.run([sys.executable, "-I", "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    modules, name = done.stdout.splitlines()[-2:]
    assert "pyspark_sluice" in modules.split(","), (
        f"pkgutil.iter_modules() does not list pyspark_sluice in {sys.prefix}: reinstall as the Makefile does "
        "(pip install -e '.[test]' --config-settings editable_mode=compat)")
    assert name == "sluice"


def test_the_makefile_installs_in_the_mode_discovery_needs() -> None:
    makefile = (Path(__file__).resolve().parents[4] / "Makefile").read_text()
    assert "pip install --quiet -e '.[test]' --config-settings editable_mode=compat" in makefile
