"""Reading results: pages and whole-result streams, from Postgres rows or the run's Parquet files."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from controlplane.reports.engine import iter_parquet_rows
from controlplane.reports.models import FINISHED, ReportResultRow, ReportRun, RunStatus
from controlplane.reports.services import run_dir

STREAM_CHUNK_ROWS = 1000


def result_rows(run: ReportRun, *, offset: int = 0, limit: int | None = None) -> Iterator[list[Any]]:
    if run.storage == "rows":
        qs = ReportResultRow.objects.filter(run=run, ordinal__gte=offset).order_by("ordinal")
        if limit is not None:
            qs = qs.filter(ordinal__lt=offset + limit)
        yield from qs.values_list("values", flat=True).iterator(chunk_size=STREAM_CHUNK_ROWS)
    elif run.storage == "parquet":
        yield from iter_parquet_rows(run_dir(str(run.pk)), offset, limit)


def result_page(run: ReportRun, *, offset: int, limit: int) -> list[dict[str, Any]]:
    names = [c["name"] for c in run.columns]
    return [dict(zip(names, row, strict=True)) for row in result_rows(run, offset=offset, limit=limit)]


def _csv_cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


def stream_csv(run: ReportRun) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([c["name"] for c in run.columns])
    for i, row in enumerate(result_rows(run), start=1):
        writer.writerow([_csv_cell(v) for v in row])
        if i % STREAM_CHUNK_ROWS == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def stream_json(run: ReportRun) -> Iterator[str]:
    """A JSON array of row objects, written as it is read."""
    names = [c["name"] for c in run.columns]
    yield "["
    for i, row in enumerate(result_rows(run)):
        yield ("," if i else "") + json.dumps(dict(zip(names, row, strict=True)), separators=(",", ":"))
    yield "]"


@dataclass(frozen=True, slots=True)
class RunProgress:
    stage: str  # queued | starting | running | done
    elapsed_ms: int | None
    percent: float | None


def run_progress(run: ReportRun, now: datetime | None = None) -> RunProgress:
    """Where a run is: its stage, time since it started (or its duration), and Spark's tasks done of all."""
    if run.status == RunStatus.QUEUED:
        return RunProgress("queued", None, None)
    if run.status in FINISHED:
        elapsed = run.duration_ms if run.duration_ms is not None else _ms_between(run.started_at, run.finished_at)
        return RunProgress("done", elapsed, 100.0 if run.status == RunStatus.SUCCEEDED else None)
    elapsed = _ms_between(run.started_at, now or timezone.now())
    progress = run.progress or {}
    tasks, done = progress.get("tasks"), progress.get("tasks_done")
    if not progress.get("jobs") or not isinstance(tasks, int) or not isinstance(done, int) or tasks <= 0:
        return RunProgress("starting", elapsed, None)
    return RunProgress("running", elapsed, round(min(100.0, 100.0 * done / tasks), 1))


def _ms_between(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, int((end - start).total_seconds() * 1000))
