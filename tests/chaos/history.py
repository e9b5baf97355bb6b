"""A thread-safe, append-only record of what clients asked for and what they were told.

Each event is one JSON line, flushed as it is written, so a run that dies (or a
checker that fails) leaves a file that ``History.load`` replays into the same
operations for inspection.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self

Outcome = Literal["ok", "failed", "unknown"]
Read = tuple[int, int, str]  # (partition, offset, value)
OpId = int


@dataclass
class Op:
    """One client operation. ``end is None`` means it never completed, which counts as ``unknown``."""

    process: str
    f: str  # "send" | "poll" | "read" | "reset"
    value: str | None = None
    partition: int | None = None
    start: float = 0.0
    end: float | None = None
    outcome: Outcome = "unknown"
    offset: int | None = None
    reads: list[Read] = field(default_factory=list)
    error: str | None = None
    id: OpId = 0

    @property
    def pending(self) -> bool:
        return self.end is None


@dataclass(frozen=True)
class Note:
    """A fault injection or other harness event, timestamped on the same clock as the ops."""

    time: float
    text: str


class History:
    """Record ops and notes in memory and as JSON lines in ``path``."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._notes: list[Note] = []
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path is not None else None

    def invoke(self, process: str, f: str, value: str | None = None, partition: int | None = None) -> OpId:
        """Record the start of an op and return its handle for ``complete``."""
        with self._lock:
            op = Op(process, f, value, partition, start=time.monotonic(), id=len(self._ops))
            self._ops.append(op)
            self._write({"type": "invoke", "id": op.id, "process": process, "f": f, "value": value,
                         "partition": partition, "time": op.start})
            return op.id

    def complete(self, op: OpId, outcome: Outcome, *, offset: int | None = None,
                 reads: list[Read] | None = None, error: str | None = None) -> None:
        """Record how op ``op`` ended; completing twice is a harness bug."""
        if outcome not in ("ok", "failed", "unknown"):
            raise ValueError(f"bad outcome {outcome!r}")
        with self._lock:
            entry = self._ops[op]
            if entry.end is not None:
                raise ValueError(f"op {op} already completed")
            entry.end = time.monotonic()
            entry.outcome = outcome
            entry.offset = offset
            entry.reads = [(int(p), int(o), str(v)) for p, o, v in reads or []]
            entry.error = error
            self._write({"type": "complete", "id": op, "outcome": outcome, "offset": offset,
                         "reads": entry.reads, "error": error, "time": entry.end})

    def note(self, text: str) -> None:
        """Log a fault injection (e.g. "kill broker 2 SIGKILL") between the ops it affects."""
        with self._lock:
            note = Note(time.monotonic(), text)
            self._notes.append(note)
            self._write({"type": "note", "time": note.time, "text": text})

    def ops(self) -> list[Op]:
        """Snapshot of every op, pending ones included (as ``unknown``)."""
        with self._lock:
            return [replace(op, reads=list(op.reads)) for op in self._ops]

    def notes(self) -> list[Note]:
        with self._lock:
            return list(self._notes)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    @classmethod
    def load(cls, path: Path) -> History:
        """Replay a history file into a (file-less) ``History`` with the same ops and notes."""
        history = cls(None)
        lines = path.read_text(encoding="utf-8").splitlines()
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                # A killed run may leave a torn last line; anything earlier is corruption.
                if lineno == len(lines):
                    break
                raise
            kind = record["type"]
            if kind == "invoke":
                if record["id"] != len(history._ops):
                    raise ValueError(f"{path}:{lineno}: op ids out of sequence")
                history._ops.append(Op(record["process"], record["f"], record["value"], record["partition"],
                                       start=record["time"], id=record["id"]))
            elif kind == "complete":
                op = history._ops[record["id"]]
                op.end = record["time"]
                op.outcome = record["outcome"]
                op.offset = record["offset"]
                op.reads = [(int(p), int(o), str(v)) for p, o, v in record["reads"]]
                op.error = record["error"]
            elif kind == "note":
                history._notes.append(Note(record["time"], record["text"]))
            else:
                raise ValueError(f"{path}:{lineno}: unknown record type {kind!r}")
        return history
