#!/usr/bin/env bash
# Prepare the Karapace venv the registry bench (bench/registry.py) and the REST bench compare against.
#
#   bench/karapace_setup.sh [SOURCE_DIR] [VENV]     # defaults: /work/karapace-src /work/karapace-venv
#   KARAPACE_GIT=/path/to/karapace.git bench/karapace_setup.sh   # extract SOURCE_DIR from a (bare) clone first
#
# Karapace (github Aiven-Open/karapace) is never a dependency of Sluice: it goes into its own venv,
# its pinned dependencies from PyPI only. `pip install SOURCE_DIR` itself cannot work here: setup.py
# builds the protopacelib Go extension with setuptools-golang (a Go toolchain and Go modules from the
# network), and avro is pinned to an Aiven fork by a GitHub URL. So bench/karapace_venv.py installs
# requirements/requirements.txt with PyPI's avro, puts src/ on the venv's path with a .pth file (what an
# editable install does) and a C stub for protopacelib (only protobuf schemas use it; the benches use Avro).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="${1:-/work/karapace-src}"
VENV="${2:-/work/karapace-venv}"
PY="${KARAPACE_PYTHON:-python3.11}"

if [[ -n "${KARAPACE_GIT:-}" ]]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    # Only what the service needs (some large website files are absent from mirrors).
    # (each folder's own tree: `git archive HEAD src ...` still walks the whole tree and trips on them)
    for part in src requirements; do
        git --git-dir="$KARAPACE_GIT" archive --prefix="$part/" "HEAD:$part" | tar -x -C "$SRC"
    done
    version="$(git --git-dir="$KARAPACE_GIT" describe --tags HEAD) (commit $(git --git-dir="$KARAPACE_GIT" rev-parse HEAD))"
    echo "$version" >"$SRC/KARAPACE-VERSION"
    echo "__version__ = \"${version%% *}\"" >"$SRC/src/karapace/version.py"
fi
[[ -f "$SRC/requirements/requirements.txt" ]] || { echo "no Karapace source tree at $SRC (set KARAPACE_GIT)" >&2; exit 2; }
[[ -f "$SRC/src/karapace/version.py" ]] || echo '__version__ = "0+unknown"' >"$SRC/src/karapace/version.py"
exec "$HERE/../.venv/bin/python" "$HERE/karapace_venv.py" --source-dir "$SRC" --venv "$VENV" --python "$(command -v "$PY")"
