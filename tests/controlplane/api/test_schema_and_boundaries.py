"""The committed OpenAPI file is current, and the dataplane stays free of Django."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def generate_schema() -> str:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_committed_openapi_schema_is_current() -> None:
    committed = (ROOT / "api_schema" / "openapi.yaml").read_text()
    assert generate_schema() == committed, "api_schema/openapi.yaml is stale: run `make schema` and commit it"


@pytest.mark.django_db
def test_schema_and_docs_are_served() -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_dataplane_never_imports_django_or_the_control_plane() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(found)
        for path in (ROOT / "dataplane").rglob("*.py")
        if (found := _imports(path) & {"django", "controlplane", "rest_framework", "celery", "channels"})
    }
    assert offenders == {}


def test_dataplane_imports_cleanly_in_a_fresh_interpreter() -> None:
    """Import every dataplane module with Django absent from sys.modules afterwards."""
    code = (
        "import pkgutil, importlib, sys, dataplane\n"
        "for m in pkgutil.walk_packages(dataplane.__path__, 'dataplane.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'controlplane')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
