"""Re-check a recorded history: ``python -m tests.chaos.replay HISTORY.jsonl`` (exit 1 when it fails)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.chaos.checker import check
from tests.chaos.history import History


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.chaos.replay HISTORY.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"replay: no such history file: {path}", file=sys.stderr)
        return 2
    history = History.load(path)
    for note in history.notes():
        print(f"{note.time:12.3f}  {note.text}")
    result = check(history.ops())
    print(result)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
