"""dataplane never imports django or controlplane."""

from __future__ import annotations

import ast
from pathlib import Path

import dataplane

FORBIDDEN = ("django", "controlplane", "rest_framework", "celery", "channels")


def test_dataplane_imports_no_control_plane() -> None:
    root = Path(dataplane.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
