"""The session helper's choices that need no JVM: the master URL, and the package zip executors import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dataplane.client.spark.session import _package_zip, master_url


def test_master_is_local_unless_spark_master_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    assert master_url() == "local[*]"
    monkeypatch.setenv("SPARK_MASTER", "spark://head:7077")
    assert master_url() == "spark://head:7077"
    assert master_url("local[2]") == "local[2]"


def test_the_shipped_zip_alone_provides_the_data_source(tmp_path: Path) -> None:
    """What an executor gets from addPyFile: importing the source from the zip, not from this checkout, even
    in an interpreter where Sluice is installed (PySpark's worker puts shipped files at ``sys.path[1]``).
    test_cluster.py checks the same on a real standalone cluster (``make chaos``)."""
    zipped = _package_zip()
    names = zipfile.ZipFile(zipped).namelist()
    assert "dataplane/client/spark/source.py" in names and "pyspark_sluice/__init__.py" in names
    assert all(n.endswith(".py") for n in names)
    probe = ("import sys; sys.path.insert(1, sys.argv[1]); import dataplane.client.spark.source as s; "
             "import pyspark_sluice; assert pyspark_sluice.DefaultSource is s.SluiceDataSource; "
             "print(s.__file__); print(s.SluiceDataSource.name())")
    try:
        found = subprocess.run([sys.executable, "-c", probe, zipped], cwd=tmp_path, capture_output=True, text=True,
                               timeout=60)
    finally:
        shutil.rmtree(Path(zipped).parent)
    assert found.returncode == 0, found.stderr
    where, name = found.stdout.split()
    assert where.startswith(zipped) and name == "sluice"
