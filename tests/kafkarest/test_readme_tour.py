"""README.md's five-minute tour, run as printed against a real ``sluice up`` (the REST tests' stack).

The tour's blocks are the README's ```` ```sh tour ```` code blocks, extracted and run in order by bash in a
directory laid out like the repository root (``var/`` is the stack's, ``.venv`` this interpreter's), so the
text a user pastes is the text tested. They read the stack's addresses and credentials from ``var/demo.env``,
which ``sluice up`` writes, so nothing is substituted. Blocks marked ``kcat`` run in their own test, which
skips (saying why) where Debian's kcat is missing (`make kcat` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("kafkarest")

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```sh tour(?P<tags>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
# The tour starts Spark (a JVM) and a report run: generous, it only bounds a hung tour.
TOUR_TIMEOUT = 600


def tour_blocks(readme: str) -> list[tuple[set[str], str]]:
    """The README's tour blocks in order: (extra tags after ``tour``, body)."""
    return [(set(m["tags"].split()), m["body"]) for m in BLOCK.finditer(readme)]


def _run(stack: RestStack, tmp_path: Path, blocks: list[str]) -> str:
    workdir = tmp_path / "checkout"
    workdir.mkdir()
    (workdir / "var").symlink_to(stack.var)
    (workdir / ".venv").symlink_to(Path(sys.prefix))
    script = "set -euo pipefail\n" + "\n".join(blocks)
    done = subprocess.run(["bash", "-c", script], cwd=workdir, env=dict(os.environ), capture_output=True,
                          text=True, timeout=TOUR_TIMEOUT)
    assert done.returncode == 0, f"the tour failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_the_tour_blocks_are_found() -> None:
    blocks = tour_blocks((ROOT / "README.md").read_text())
    assert blocks and blocks[0][1].strip() == ". var/demo.env", blocks[:1]
    assert sum("kcat" in tags for tags, _ in blocks) == 1 and len(blocks) >= 6


def test_the_readme_tour_runs_as_printed(rest_stack: RestStack, tmp_path: Path) -> None:
    blocks = tour_blocks((ROOT / "README.md").read_text())
    out = _run(rest_stack, tmp_path, [body for tags, body in blocks if "kcat" not in tags])
    assert "b'hello from Python'" in out                            # confluent-kafka round trip
    assert '"error_code":200' in out and '"instance_id":"c1"' in out  # v3 produce, v2 consumer instance
    assert '"topic":"demo"' in out                                   # v2 records
    assert '{"type":"done"' in out                                   # the tail reached today's end
    assert re.search(r"\|\s*bob\|\s*\d+\|", out), out[-2000:]        # Spark read what REST produced
    assert '"columns":[{"name":"key"' in out                         # the report's result


def test_the_readme_kcat_commands_run_as_printed(rest_stack: RestStack, tmp_path: Path) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (Debian: apt-get install kcat)")
    blocks = tour_blocks((ROOT / "README.md").read_text())
    out = _run(rest_stack, tmp_path, [blocks[0][1], *(body for tags, body in blocks if "kcat" in tags)])
    assert "hello from kcat" in out
