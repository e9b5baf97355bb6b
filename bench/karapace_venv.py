"""Build a venv holding Aiven's Karapace (the REST proxy baseline of bench/rest.py) from its source.

    python bench/karapace_venv.py GIT_DIR          # a bare clone of github.com/Aiven-Open/karapace
    python bench/karapace_venv.py GIT_DIR --rev 6.2.0
    python bench/karapace_venv.py --source-dir /work/karapace-src --venv /work/karapace-venv   # an extracted tree
                                                   # (what bench/karapace_setup.sh does)

Karapace is not a dependency of Sluice: it goes into its own venv (``var/bench/karapace-venv``)
with the pinned dependencies of its ``requirements/requirements.txt`` from PyPI, two of them
replaced because they cannot be had here:

* ``avro`` is pinned to an Aiven fork by a GitHub archive URL; PyPI's ``avro`` stands in (the
  REST proxy measured here only sends ``binary`` embedded-format records, which never touch Avro);
* ``protopacelib`` is a Go extension (protobuf schema formatting) that ``setuptools-golang`` builds
  with a Go toolchain it downloads. A C stub with the same three symbols stands in: the module is
  imported at start-up, and every call of it raises "protobuf schemas are not supported".

The source is put on the venv's path with a ``.pth`` file and ``karapace/version.py`` is written
from ``git describe``, which is what setuptools-scm would have done.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "var" / "bench" / "karapace-venv"
SOURCE = ROOT / "var" / "bench" / "karapace-src"

STUB_C = r"""
#include <stdlib.h>
#include <string.h>
struct result { char *res; char *err; };
static const char *MSG = "protobuf schemas are not supported (protopacelib stub of bench/karapace_venv.py)";
struct result *FormatSchema(void *a, void *b, void *c, void *d, int e) {
    struct result *r = malloc(sizeof *r);
    r->res = NULL; r->err = strdup(MSG);
    return r;
}
void FreeResult(struct result *r) { free(r->res); free(r->err); free(r); }
const char *CheckCompatibility(void *a, void *b, void *c, void *d, int e, void *f, void *g, void *h, void *i, int j) {
    return MSG;
}
"""


def default_venv() -> Path:
    """Where the benches find Karapace: ``$KARAPACE_VENV``, else /work/karapace-venv, else var/bench/karapace-venv."""
    if env := os.environ.get("KARAPACE_VENV"):
        return Path(env)
    shared = Path("/work/karapace-venv")
    return shared if (shared / "bin" / "python").exists() else VENV


def run(*args: str, **kw: object) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout.strip()  # type: ignore[call-overload, no-any-return]


def venv_python(venv: Path | None = None) -> Path:
    return (venv or default_venv()) / "bin" / "python"


def describe(venv: Path | None = None) -> str | None:
    """The Karapace version and commit installed in ``venv`` (from ``KARAPACE-SOURCE``), or None."""
    stamp = (venv or default_venv()) / "KARAPACE-SOURCE"
    return stamp.read_text().strip() if stamp.exists() else None


def build(git_dir: Path, rev: str) -> str:
    """Extract ``rev`` of ``git_dir`` into var/bench/karapace-src and install it into var/bench/karapace-venv."""
    git = ["git", f"--git-dir={git_dir}"]
    commit = run(*git, "rev-parse", f"{rev}^{{commit}}")
    version = run(*git, "describe", "--tags", commit)
    shutil.rmtree(SOURCE, ignore_errors=True)
    SOURCE.mkdir(parents=True)
    # Only what the service needs: some large files of the repository (its website) are absent from mirrors.
    archive = subprocess.run([*git, "archive", commit, "src", "requirements", "LICENSE"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(SOURCE)], input=archive, check=True)
    (SOURCE / "src" / "karapace" / "version.py").write_text(f'__version__ = "{version}"\n')
    return install(SOURCE, VENV, f"Karapace {version} (commit {commit})")


def install(source: Path, venv: Path, described: str, python: str = sys.executable) -> str:
    """Install the Karapace tree ``source`` (src/, requirements/) into ``venv``; PyPI dependencies only."""
    if not (venv / "bin" / "python").exists():
        run(python, "-m", "venv", str(venv))
    requirements = [line for line in (source / "requirements" / "requirements.txt").read_text().splitlines()
                    if not line.startswith("avro @")]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("\n".join([*requirements, "avro"]) + "\n")
    subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "--quiet", "-r", req.name], check=True)
    Path(req.name).unlink()

    site = Path(run(str(venv_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    (site / "karapace-src.pth").write_text(str(source / "src") + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "protopace_stub.c"
        c_file.write_text(STUB_C)
        run("cc", "-shared", "-fPIC", "-O2", "-o", str(site / "protopacelib.so"), str(c_file))
    run(str(venv_python(venv)), "-c", "import karapace.kafka_rest_apis, karapace.__main__")
    (venv / "KARAPACE-SOURCE").write_text(described + "\n")
    return described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, nargs="?", help="a (bare) git clone of Aiven-Open/karapace")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--source-dir", type=Path, help="an extracted Karapace tree instead of GIT_DIR")
    parser.add_argument("--venv", type=Path, help="the venv to install into (with --source-dir)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of a new venv")
    args = parser.parse_args()
    if args.source_dir is not None:
        source = args.source_dir.resolve()
        stamp = source / "KARAPACE-VERSION"
        version = stamp.read_text().strip() if stamp.exists() else "unknown version"
        print(install(source, (args.venv or Path("/work/karapace-venv")).resolve(), f"Karapace {version}", args.python))
    elif args.git_dir is not None:
        print(build(args.git_dir.resolve(), args.rev))
    else:
        parser.error("give GIT_DIR or --source-dir")
    return 0


if __name__ == "__main__":
    sys.exit(main())
