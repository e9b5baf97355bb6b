"""Running one report on Spark: pin the offset ranges, register the views, run the query, write the result.

``prepare`` and ``write_result`` run in the sandboxed runner (``reports.sandbox.runner``), on its one
SparkSession; ``load_result`` runs in the reports worker, which moves what the runner wrote into
``var/reports/<run>``. Each run works in its own ``newSession()`` (temp views and settings of its own; the
SparkContext is shared), so concurrent runs never see each other's views.

A run *pins* what it reads before Spark starts: every topic's ranges are resolved once (time range, offsets)
with the source's own lookup, and the views are given those exact offsets. So the run reads one consistent
snapshot, the same one however many times the query scans a view, and ``records_scanned`` is the size of
those ranges, known without counting rows.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from controlplane.reports import kinds
from dataplane.client.spark.offsets import OffsetLookup
from dataplane.client.spark.options import parse_source_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROW_LIMIT = 10_000  # results up to this many rows go to Postgres, larger ones stay Parquet files
ERROR_LIMIT = 2000


@dataclass
class Outcome:
    records_scanned: int = 0
    columns: list[dict[str, str]] = field(default_factory=list)
    row_count: int = 0
    storage: str = ""
    rows: list[list[Any]] = field(default_factory=list)  # when storage == "rows"


def _ranges_json(ranges: list[Any]) -> tuple[str, str, int]:
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for r in ranges:
        starts.setdefault(r.topic, {})[str(r.partition)] = r.start
        ends.setdefault(r.topic, {})[str(r.partition)] = r.end
    return json.dumps(starts), json.dumps(ends), sum(r.size for r in ranges)


def pin(options: dict[str, str]) -> tuple[str, str, int]:
    """Resolve a view's ranges now: (startingOffsets JSON, endingOffsets JSON, records in them)."""
    lookup = OffsetLookup(parse_source_options(options, streaming=False))
    try:
        return _ranges_json(lookup.batch_ranges())
    finally:
        lookup.close()


def _view(spark: SparkSession, name: str, options: dict[str, str], typed: dict[str, str] | None = None) -> int:
    """Register a pinned view; ``typed``: the options that read its key and/or value typed (``key_str`` and
    ``value_str`` are only added for binary sides: a struct has its fields)."""
    starting, ending, size = pin(options)
    df = (spark.read.format("sluice").options(**options).options(**(typed or {}))
          .option("startingOffsets", starting).option("endingOffsets", ending).load())
    extra = [f"CAST({side} AS STRING) AS {side}_str" for side in ("key", "value")
             if not (typed or {}).get(f"{side}.format")]
    df.selectExpr("*", *extra).createOrReplaceTempView(name)
    return size


def _time_options(time_range: kinds.TimeRange, *, start: bool = True) -> dict[str, str]:
    out = {}
    if start and time_range.start_ms is not None:
        out["startingTimestamp"] = str(time_range.start_ms)
        out["startingOffsetsByTimestampStrategy"] = "latest"  # nothing at or after the start: an empty range
    if time_range.end_ms is not None:
        out["endingTimestamp"] = str(time_range.end_ms)
    return out


def prepare(spark: SparkSession, definition: dict[str, Any], connection: dict[str, str],
            time_range: kinds.TimeRange, commits: list[list[int]] | None = None,
            typed: dict[str, dict[str, str]] | None = None) -> tuple[DataFrame, int]:
    """Register the run's views on ``spark`` and return the query's DataFrame and the records pinned.

    ``commits``: for the consumer-lag trend, the group's commits on the topic as ``[partition, offset,
    commit time ms]`` rows, read by the worker (``__consumer_offsets`` holds every group's commits, which no
    tenant principal may read, so the runner never gets access to it, only to these rows). ``typed``: per topic
    of a SQL report, the source options reading it typed from the schemas the worker resolved
    (``reports.typed``)."""
    kind, params = definition["kind"], definition["params"]
    scanned = 0
    if kind == "sql":
        for topic in params["topics"]:
            options = {**connection, "subscribe": topic}
            if params.get("starting_offsets") or params.get("ending_offsets"):
                # Offsets the author gave win over the time range (as Spark: offsets by timestamp, then offsets).
                for key, option in (("starting_offsets", "startingOffsets"), ("ending_offsets", "endingOffsets")):
                    if params.get(key):
                        options[option] = _only_topic(params[key], topic, option)
            else:
                options.update(_time_options(time_range))
            scanned += _view(spark, kinds.view_name(topic), options, (typed or {}).get(topic))
        return spark.sql(params["sql"]), scanned
    if kind == "consumer_lag":
        # The log end at each window's end needs every record before it, whatever the range's start.
        scanned += _view(spark, "src", {**connection, "subscribe": params["topic"],
                                        **_time_options(time_range, start=False)})
        rows = [(int(p), int(o), int(t)) for p, o, t in (commits or [])]
        spark.createDataFrame(rows, "partition INT, offset BIGINT, commit_ts BIGINT").createOrReplaceTempView(
            "commits")
        scanned += len(rows)
    else:
        scanned += _view(spark, "src", {**connection, "subscribe": params["topic"], **_time_options(time_range)})
    return spark.sql(kinds.builtin_sql(kind, params, time_range)), scanned


def _only_topic(offsets_json: str, topic: str, option: str) -> str:
    """A multi-topic offsets JSON cut to one view's topic (-2/-1 defaults for partitions it does not name)."""
    if offsets_json.strip().lower() in ("earliest", "latest"):
        return offsets_json
    data = json.loads(offsets_json)
    mine = data.get(topic) if isinstance(data, dict) else None
    if not mine:
        return "earliest" if option == "startingOffsets" else "latest"
    return json.dumps({topic: mine})


class ReportError(Exception):
    """A run that cannot go on, with a message for the report's author."""


class ResultTooLarge(ReportError):
    """The result is over the tenant's limit (rows or bytes)."""


def write_result(df: DataFrame, directory: Path, *, max_rows: int, max_bytes: int) -> list[dict[str, str]]:
    """Write the result as Parquet under ``directory`` (at most ``max_rows`` rows, ``max_bytes`` on disk)
    and return its columns. One pass over the data; over a limit, the files are removed and the run fails."""
    columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in df.schema.fields]
    names = [c["name"] for c in columns]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ReportError(f"The result has more than one column named {', '.join(dupes)}: give them aliases.")
    if directory.exists():
        shutil.rmtree(directory)
    df.limit(max_rows + 1).write.parquet(str(directory))
    rows, size = result_size(directory)
    if rows > max_rows or size > max_bytes:
        shutil.rmtree(directory, ignore_errors=True)
        what = f"more than {max_rows:,} rows" if rows > max_rows else f"more than {max_bytes // (1 << 20):,} MiB"
        raise ResultTooLarge(f"The result has {what} (this tenant's limit): aggregate or filter it.")
    return columns


def result_size(directory: Path) -> tuple[int, int]:
    """Rows (from the Parquet footers, without reading data) and bytes of a written result."""
    files = parquet_files(directory)
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files), sum(f.stat().st_size for f in files)


def load_result(directory: Path, columns: list[dict[str, str]]) -> Outcome:
    """A written result as an ``Outcome``: small ones read back as rows (the directory is then removed),
    large ones stay Parquet files there."""
    count, _ = result_size(directory)
    out = Outcome(columns=columns, row_count=count)
    if count <= ROW_LIMIT:
        out.storage = "rows"
        out.rows = [row for f in parquet_files(directory) for row in _json_rows(pq.read_table(f))]
        shutil.rmtree(directory, ignore_errors=True)
    else:
        out.storage = "parquet"
    return out


def parquet_files(directory: Path) -> list[Path]:
    """The part files in write order (Spark numbers them by partition, so a sorted query stays sorted)."""
    return sorted(directory.glob("part-*.parquet"))


def _json_rows(table: Any) -> Iterator[list[Any]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    for i in range(table.num_rows):
        yield [json_value(c[i]) for c in columns]


def iter_parquet_rows(directory: Path, offset: int = 0, limit: int | None = None) -> Iterator[list[Any]]:
    """Rows of a stored Parquet result, JSON-safe, from ``offset`` (reading only the files it needs)."""
    remaining = limit
    for path in parquet_files(directory):
        meta = pq.ParquetFile(path).metadata
        if offset >= meta.num_rows:
            offset -= meta.num_rows
            continue
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            if offset >= batch.num_rows:
                offset -= batch.num_rows
                continue
            piece = batch.slice(offset, remaining if remaining is not None else batch.num_rows - offset)
            offset = 0
            yield from _json_rows(piece)
            if remaining is not None:
                remaining -= piece.num_rows
                if remaining <= 0:
                    return


def json_value(value: Any) -> Any:
    """A result value as JSON: timestamps ISO 8601 (UTC), decimals as numbers, binary as base64."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):  # an Arrow map
            return {str(k): json_value(v) for k, v in value}
        return [json_value(v) for v in value]
    return value


_PY_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$")
_SPARK_CLASS = re.compile(r"^\[[A-Z_.]+\] ")


def readable_error(error: BaseException) -> str:
    """One or two lines for the report's author: Spark's own message, or the Python error a task raised,
    without stack traces or query plans."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines) or "Python worker" in text:
        found = [m for line in lines if (m := _PY_ERROR.match(line))]
        picked = [m for m in found if m.group(1) not in ("PythonException", "PySparkRuntimeError")]
        if picked:
            last = picked[-1]
            return _cap(f"{last.group(1)}: {last.group(2)}")
    first = lines[0] if lines else type(error).__name__
    first = first.split("; line ")[0].rstrip(";")  # analysis errors append the plan after "; line N pos M;"
    return _cap(first)


def _cap(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[:ERROR_LIMIT - 1] + "…"
