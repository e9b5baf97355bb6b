"""What each report kind computes, as Spark SQL over views, and the rules for its parameters.

Pure functions (no Spark, no Django models), so the API validates with the same rules the worker runs, and
the generated SQL can be read in a test. Every built-in kind reads one topic through the view ``src`` (the
``sluice`` source's columns plus ``key_str``/``value_str``); ``consumer_lag`` also reads the group's
commits on the topic through the view ``commits`` (partition, offset, commit_ts).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

KINDS = ("sql", "throughput", "top_keys", "value_size_histogram", "json_aggregate", "consumer_lag")
AGGREGATES = ("count", "sum", "avg", "min", "max")
# Of a SQL report's keys and values (schema'd: through the registry).
FORMATS = ("binary", "avro", "jsonschema", "protobuf")
SIDES = ("key", "value")
MODES = ("FAILFAST", "PERMISSIVE")
_TYPED_PARAMS = {f"{side}_{what}" for side in SIDES for what in ("format", "subject", "version", "message")} | {"mode"}
CHART_KINDS = ("line", "bar", "table")
MAX_TOPICS = 16
_WINDOW = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day)s?\s*$", re.IGNORECASE)
_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
# A JSON path as get_json_object takes it: $.a.b, $.a[0], $['a b'] (no quotes that could end the literal).
_JSON_PATH = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\['[^'\\]+'\])+$")


class ParamError(ValueError):
    """A bad parameter: ``field`` names it as the API shows it (``params.window``, ``time_range.start``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class TimeRange:
    """Milliseconds since the epoch; either end may be open."""

    start_ms: int | None
    end_ms: int | None


def sql_string(text: str) -> str:
    """A Spark SQL string literal (backslashes and quotes escaped: Spark reads C-style escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def view_name(topic: str) -> str:
    """The temp view a topic is registered as in a SQL report: its name with other characters as ``_``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", topic)
    return name if not name[:1].isdigit() else f"t_{name}"


def window_ms(text: object, field: str = "params.window") -> int:
    if not isinstance(text, str) or not (m := _WINDOW.match(text)):
        raise ParamError(field, "must look like '1 minute', '30 seconds', '2 hours' or '1 day'")
    ms = int(m.group(1)) * _UNIT_MS[m.group(2).lower()]
    if ms <= 0:
        raise ParamError(field, "must be longer than zero")
    return ms


def _topic(params: dict[str, Any], field: str = "topic") -> str:
    topic = params.get(field)
    if not isinstance(topic, str) or not topic.strip():
        raise ParamError(f"params.{field}", "a topic name is required")
    return topic


def _int(params: dict[str, Any], field: str, default: int, lo: int, hi: int) -> int:
    value: object = params.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ParamError(f"params.{field}", f"must be an integer from {lo} to {hi}")
    return value


def _json_path(params: dict[str, Any], field: str, *, required: bool) -> str | None:
    path = params.get(field)
    if path is None and not required:
        return None
    if not isinstance(path, str) or not _JSON_PATH.match(path):
        raise ParamError(f"params.{field}", "must be a JSON path like $.total, $.customer.id or $.items[0]")
    return path


def _unknown(params: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(params) - allowed)
    if extra:
        raise ParamError(f"params.{extra[0]}",
                         f"is not a parameter of this kind (allowed: {', '.join(sorted(allowed))})")


def normalize_params(kind: str, params: object) -> dict[str, Any]:
    """The parameters with defaults filled in; a ``ParamError`` for the first bad one.

    The SQL kind's own checks (syntax, views) are in ``reports.sqlcheck``; here only its shape.
    """
    if not isinstance(params, dict):
        raise ParamError("params", "must be an object")
    if kind == "sql":
        _unknown(params, {"sql", "topics", "starting_offsets", "ending_offsets", *_TYPED_PARAMS})
        sql = params.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise ParamError("params.sql", "a Spark SQL query is required")
        topics = params.get("topics")
        if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t for t in topics):
            raise ParamError("params.topics", "a non-empty list of topic names is required")
        if len(topics) > MAX_TOPICS:
            raise ParamError("params.topics", f"at most {MAX_TOPICS} topics")
        views = [view_name(t) for t in topics]
        if len(set(views)) != len(views):
            raise ParamError("params.topics", "two topics would get the same view name: "
                             + ", ".join(f"{t} -> {v}" for t, v in zip(topics, views, strict=True)))
        out: dict[str, Any] = {"sql": sql.strip().rstrip(";").strip(), "topics": list(topics)}
        for name in ("starting_offsets", "ending_offsets"):
            if params.get(name) is not None:
                value = params[name]
                out[name] = value if isinstance(value, str) else _dumps(value)
        out.update(_typed(params))
        return out
    if kind == "throughput":
        _unknown(params, {"topic", "window"})
        window = params.get("window", "1 minute")
        window_ms(window)
        return {"topic": _topic(params), "window": window}
    if kind == "top_keys":
        _unknown(params, {"topic", "limit"})
        return {"topic": _topic(params), "limit": _int(params, "limit", 10, 1, 10_000)}
    if kind == "value_size_histogram":
        _unknown(params, {"topic", "bucket_bytes"})
        return {"topic": _topic(params), "bucket_bytes": _int(params, "bucket_bytes", 100, 1, 1 << 30)}
    if kind == "json_aggregate":
        _unknown(params, {"topic", "field", "group_by", "functions"})
        functions = params.get("functions", list(AGGREGATES))
        if not isinstance(functions, list) or not functions or any(f not in AGGREGATES for f in functions):
            raise ParamError("params.functions", f"must be a non-empty list of {', '.join(AGGREGATES)}")
        return {"topic": _topic(params), "field": _json_path(params, "field", required=True),
                "group_by": _json_path(params, "group_by", required=False),
                "functions": [f for f in AGGREGATES if f in functions]}
    if kind == "consumer_lag":
        _unknown(params, {"topic", "group", "window"})
        group = params.get("group")
        if not isinstance(group, str) or not group:
            raise ParamError("params.group", "a consumer group id is required")
        window = params.get("window", "1 minute")
        window_ms(window)
        return {"topic": _topic(params), "group": group, "window": window}
    raise ParamError("kind", f"unknown kind {kind!r}")


def _typed(params: dict[str, Any]) -> dict[str, Any]:
    """A SQL report's key/value formats: ``<side>_format`` (binary when absent), ``<side>_subject`` (default
    ``<topic>-<side>`` per topic), ``<side>_version`` (default the latest) and ``mode``; only typed sides kept."""
    out: dict[str, Any] = {}
    for side in SIDES:
        fmt = params.get(f"{side}_format")
        fmt = fmt.strip().lower() if isinstance(fmt, str) else fmt
        if fmt is not None and fmt not in FORMATS:
            raise ParamError(f"params.{side}_format", f"must be one of {', '.join(FORMATS)}")
        if fmt in (None, "binary"):
            for what in ("subject", "version", "message"):
                if params.get(f"{side}_{what}") is not None:
                    raise ParamError(f"params.{side}_{what}",
                                     f"needs params.{side}_format (avro, jsonschema or protobuf)")
            continue
        out[f"{side}_format"] = fmt
        subject = params.get(f"{side}_subject")
        if subject is not None:
            if not isinstance(subject, str) or not subject.strip() or len(subject) > 255:
                raise ParamError(f"params.{side}_subject", "must be a subject name (default: '<topic>-" + side + "')")
            out[f"{side}_subject"] = subject.strip()
        version = params.get(f"{side}_version")
        if version is not None and version != "latest":
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise ParamError(f"params.{side}_version", "must be a version number (1 or more) or 'latest'")
            out[f"{side}_version"] = version
        message = params.get(f"{side}_message")
        if message is not None:
            if fmt != "protobuf":
                raise ParamError(f"params.{side}_message", f"names a Protobuf message: needs params.{side}_format "
                                 "protobuf")
            if not isinstance(message, str) or not message.strip() or len(message) > 255:
                raise ParamError(f"params.{side}_message", "must be a message name (default: the schema's first)")
            out[f"{side}_message"] = message.strip()
    mode = params.get("mode")
    if mode is not None:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise ParamError("params.mode", f"must be {' or '.join(MODES)}")
        if out:  # without a typed side there is nothing to decode: the mode means nothing
            out["mode"] = mode.upper()
    return out


def typed_sides(params: dict[str, Any]) -> list[str]:
    """The sides (``key``, ``value``) a SQL report reads through the registry."""
    return [side for side in SIDES if params.get(f"{side}_format")]


def subject_of(params: dict[str, Any], side: str, topic: str) -> str:
    """The subject a typed side of ``topic`` reads: the one named, else Confluent's ``<topic>-<side>``."""
    return str(params.get(f"{side}_subject") or f"{topic}-{side}")


def _dumps(value: object) -> str:
    return json.dumps(value)


def topics_of(kind: str, params: dict[str, Any]) -> list[str]:
    return list(params["topics"]) if kind == "sql" else [params["topic"]]


def _instant(value: object, field: str) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None or parsed.tzinfo is None:
        raise ParamError(field, "must be an ISO 8601 time with a zone, like 2026-01-31T12:00:00Z")
    return parsed


def normalize_time_range(value: object) -> dict[str, Any]:
    """``{}``, ``{"last_minutes": N}`` or ``{"start": iso, "end": iso?}`` (end exclusive)."""
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise ParamError("time_range", "must be an object")
    if "last_minutes" in value:
        if set(value) != {"last_minutes"}:
            raise ParamError("time_range", "give either last_minutes or start/end, not both")
        n = value["last_minutes"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 366 * 24 * 60:
            raise ParamError("time_range.last_minutes", "must be an integer from 1 to 527040")
        return {"last_minutes": n}
    extra = sorted(set(value) - {"start", "end"})
    if extra or "start" not in value:
        raise ParamError("time_range", "must be {\"last_minutes\": N} or {\"start\": ISO time, \"end\": ISO time}")
    start = _instant(value["start"], "time_range.start")
    out = {"start": start.isoformat()}
    if value.get("end") is not None:
        end = _instant(value["end"], "time_range.end")
        if end <= start:
            raise ParamError("time_range.end", "must be after start")
        out["end"] = end.isoformat()
    return out


def resolve_time_range(time_range: dict[str, Any], now: datetime) -> TimeRange:
    """Absolute bounds for a run starting at ``now``."""
    if not time_range:
        return TimeRange(None, None)
    if "last_minutes" in time_range:
        start = now - timedelta(minutes=int(time_range["last_minutes"]))
        return TimeRange(_ms(start), _ms(now))
    start = _instant(time_range["start"], "time_range.start")
    end = _instant(time_range["end"], "time_range.end") if time_range.get("end") else None
    return TimeRange(_ms(start), _ms(end) if end else None)


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def columns_of(kind: str, params: dict[str, Any]) -> list[str] | None:
    """A built-in kind's result columns (None for SQL: known only once it runs)."""
    if kind == "throughput":
        return ["window_start", "records", "bytes"]
    if kind == "top_keys":
        return ["key", "records"]
    if kind == "value_size_histogram":
        return ["bucket_start", "bucket_end", "records"]
    if kind == "json_aggregate":
        return (["group"] if params.get("group_by") else []) + list(params["functions"])
    if kind == "consumer_lag":
        return ["window_end", "end_offset", "committed_offset", "lag"]
    return None


def default_chart(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    if kind == "throughput":
        return {"kind": "line", "x": "window_start", "y": ["records", "bytes"]}
    if kind == "top_keys":
        return {"kind": "bar", "x": "key", "y": ["records"]}
    if kind == "value_size_histogram":
        return {"kind": "bar", "x": "bucket_start", "y": ["records"]}
    if kind == "json_aggregate" and params.get("group_by"):
        return {"kind": "bar", "x": "group", "y": list(params["functions"])}
    if kind == "consumer_lag":
        return {"kind": "line", "x": "window_end", "y": ["lag"]}
    return {"kind": "table"}


def normalize_chart(kind: str, params: dict[str, Any], chart: object) -> dict[str, Any]:
    if chart is None or chart == {}:
        return default_chart(kind, params)
    if not isinstance(chart, dict):
        raise ParamError("chart", "must be an object")
    extra = sorted(set(chart) - {"kind", "x", "y"})
    if extra:
        raise ParamError(f"chart.{extra[0]}", "is not a chart field (kind, x, y)")
    if chart.get("kind") not in CHART_KINDS:
        raise ParamError("chart.kind", f"must be one of {', '.join(CHART_KINDS)}")
    if chart["kind"] == "table":
        return {"kind": "table"}
    x, y = chart.get("x"), chart.get("y")
    if not isinstance(x, str) or not x:
        raise ParamError("chart.x", "a column name is required for a line or bar chart")
    if isinstance(y, str):
        y = [y]
    if not isinstance(y, list) or not y or not all(isinstance(c, str) and c for c in y):
        raise ParamError("chart.y", "one column name or a list of them is required")
    known = columns_of(kind, params)
    if known is not None:
        for field, name in [("chart.x", x), *(("chart.y", c) for c in y)]:
            if name not in known:
                raise ParamError(field, f"{name!r} is not a column of this report ({', '.join(known)})")
    return {"kind": chart["kind"], "x": x, "y": list(y)}


def builtin_sql(kind: str, params: dict[str, Any], time_range: TimeRange) -> str:
    """The Spark SQL a built-in kind runs over ``src`` (and ``commits`` for consumer lag)."""
    if kind == "throughput":
        w = window_ms(params["window"])
        return (f"SELECT timestamp_millis(floor(unix_millis(timestamp) / {w}) * {w}) AS window_start, "
                "count(*) AS records, "
                "sum(coalesce(octet_length(key), 0) + coalesce(octet_length(value), 0)) AS bytes "
                "FROM src GROUP BY 1 ORDER BY 1")
    if kind == "top_keys":
        return ("SELECT key_str AS key, count(*) AS records FROM src GROUP BY key_str "
                f"ORDER BY records DESC, key ASC NULLS FIRST LIMIT {int(params['limit'])}")
    if kind == "value_size_histogram":
        b = int(params["bucket_bytes"])
        return (f"SELECT floor(coalesce(octet_length(value), 0) / {b}) * {b} AS bucket_start, "
                f"floor(coalesce(octet_length(value), 0) / {b}) * {b} + {b} AS bucket_end, count(*) AS records "
                "FROM src GROUP BY 1, 2 ORDER BY 1")
    if kind == "json_aggregate":
        field = f"CAST(get_json_object(value_str, {sql_string(params['field'])}) AS DOUBLE)"
        exprs = {"count": f"count({field})", "sum": f"sum({field})", "avg": f"avg({field})",
                 "min": f"min({field})", "max": f"max({field})"}
        picked = ", ".join(f"{exprs[f]} AS `{f}`" for f in params["functions"])
        if params.get("group_by"):
            group = f"get_json_object(value_str, {sql_string(params['group_by'])})"
            return f"SELECT {group} AS `group`, {picked} FROM src GROUP BY 1 ORDER BY 1 NULLS FIRST"
        return f"SELECT {picked} FROM src"
    if kind == "consumer_lag":
        return _lag_sql(params, time_range)
    raise ValueError(f"not a built-in kind: {kind}")


def _lag_sql(params: dict[str, Any], time_range: TimeRange) -> str:
    """Per window, each partition's log end (last offset produced before the window's end, + 1) and the
    group's last commit before it, summed over partitions; lag = end - committed (a partition without a
    commit yet counts from 0). Records and commits are bucketed by window, then carried forward, so the cost
    is one pass over each input, not windows x records."""
    w = window_ms(params["window"])
    lo = f"{time_range.start_ms // w}" if time_range.start_ms is not None else "min(b)"
    hi = f"{(time_range.end_ms - 1) // w}" if time_range.end_ms is not None else "max(b)"
    return f"""
WITH p AS (SELECT partition, offset, floor(unix_millis(timestamp) / {w}) AS b FROM src),
c AS (SELECT partition, offset, commit_ts AS ts, floor(commit_ts / {w}) AS b FROM commits),
pb AS (SELECT partition, b, max(offset) + 1 AS end_offset FROM p GROUP BY partition, b),
cb AS (SELECT partition, b, max_by(offset, ts) AS committed FROM c GROUP BY partition, b),
span AS (SELECT {lo} AS lo, {hi} AS hi FROM (SELECT b FROM p UNION ALL SELECT b FROM c)),
buckets AS (SELECT explode(sequence(CAST(lo AS BIGINT), CAST(hi AS BIGINT))) AS b FROM span WHERE lo <= hi),
parts AS (SELECT partition FROM p UNION SELECT partition FROM c),
history AS (SELECT partition, b, end_offset, NULL AS committed FROM pb
            UNION ALL SELECT partition, b, NULL, committed FROM cb),
grid AS (SELECT partition, b, CAST(NULL AS BIGINT) AS end_offset, CAST(NULL AS BIGINT) AS committed
         FROM buckets CROSS JOIN parts),
filled AS (SELECT partition, b,
             coalesce(max(end_offset) OVER w, 0) AS end_offset,
             coalesce(last(committed, true) OVER w, 0) AS committed
           FROM (SELECT * FROM history UNION ALL SELECT * FROM grid)
           WINDOW w AS (PARTITION BY partition ORDER BY b RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))
SELECT timestamp_millis((f.b + 1) * {w}) AS window_end, sum(f.end_offset) AS end_offset,
       sum(f.committed) AS committed_offset, sum(greatest(f.end_offset - f.committed, 0)) AS lag
FROM (SELECT partition, b, max(end_offset) AS end_offset, max(committed) AS committed
      FROM filled GROUP BY partition, b) f
JOIN buckets USING (b)
GROUP BY f.b ORDER BY f.b"""


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a report kind, as a form renders it (the rules are ``normalize_params``'s)."""

    name: str
    type: str  # string | integer | topic | topics | sql | window | json_path | choice | choice_list | offsets
    required: bool
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None


_TOPIC_PARAM = Param("topic", "topic", True, None, "The topic to read.")
_WINDOW_PARAM = Param("window", "window", False, "1 minute",
                "Bucket width: a number and a unit, like '30 seconds', '1 minute', '2 hours' or '1 day'.")
PARAMETERS: dict[str, tuple[Param, ...]] = {
    "sql": (Param("sql", "sql", True, None, "One Spark SQL query (SELECT, WITH … SELECT, or a set operation of "
                  "them) over the topics' views: each topic is a view named after it, other characters as '_'."),
            Param("topics", "topics", True, None, f"The topics the query reads (1 to {MAX_TOPICS})."),
            Param("starting_offsets", "offsets", False, None,
                  "Where to start reading: 'earliest' (the default), 'latest' or Spark's per-partition JSON."),
            Param("ending_offsets", "offsets", False, None,
                  "Where to stop reading: 'latest' (the default) or Spark's per-partition JSON."),
            Param("value_format", "choice", False, "binary",
                  "How values are read: binary, or typed through the cluster's Schema Registry (avro, jsonschema, "
                  "protobuf): "
                  "the view's value column is then a struct (SELECT value.field …).", choices=FORMATS),
            Param("value_subject", "string", False, None, "The subject of the values' schema (default "
                  "'<topic>-value').",),
            Param("value_version", "integer", False, None, "The subject version values are read as (default: the "
                  "latest); records written with other versions of the subject are resolved to it.", minimum=1),
            Param("value_message", "string", False, None, "Protobuf: the message values are read as, by full "
                  "name or relative to the schema's package (default: the schema's first message)."),
            Param("key_format", "choice", False, "binary", "As value_format, for keys.", choices=FORMATS),
            Param("key_subject", "string", False, None, "The subject of the keys' schema (default '<topic>-key')."),
            Param("key_version", "integer", False, None, "As value_version, for keys.", minimum=1),
            Param("key_message", "string", False, None, "As value_message, for keys."),
            Param("mode", "choice", False, "FAILFAST", "A record a typed side cannot decode: FAILFAST fails the run, "
                  "PERMISSIVE reads it as null with its bytes in _corrupt_value (_corrupt_key).", choices=MODES)),
    "throughput": (_TOPIC_PARAM, _WINDOW_PARAM),
    "top_keys": (_TOPIC_PARAM, Param("limit", "integer", False, 10, "How many keys.", minimum=1, maximum=10_000)),
    "value_size_histogram": (_TOPIC_PARAM, Param("bucket_bytes", "integer", False, 100, "Bucket width in bytes.",
                                           minimum=1, maximum=1 << 30)),
    "json_aggregate": (_TOPIC_PARAM,
                       Param("field", "json_path", True, None, "The numeric JSON field: $.total, $.customer.id, "
                             "$.items[0]."),
                       Param("group_by", "json_path", False, None, "Group by this JSON field (optional)."),
                       Param("functions", "choice_list", False, list(AGGREGATES), "The aggregates to compute.",
                             choices=AGGREGATES)),
    "consumer_lag": (_TOPIC_PARAM, Param("group", "string", True, None, "The consumer group id."), _WINDOW_PARAM),
}
DESCRIPTIONS = {
    "sql": "Your own Spark SQL over topic views; the result's columns are the query's.",
    "throughput": "Records and bytes produced per time window.",
    "top_keys": "The most frequent record keys and how many records each has.",
    "value_size_histogram": "How many records fall in each value-size bucket.",
    "json_aggregate": "count, sum, avg, min and max of a numeric JSON field, optionally grouped by another.",
    "consumer_lag": "A consumer group's lag on a topic per time window, from its commits.",
}


def describe_kinds(labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every kind with its parameters (name, type, default, ...), result columns and default chart, so a form
    can be rendered from it; ``labels``: the kinds' display names."""
    out = []
    for kind in KINDS:
        params = PARAMETERS[kind]
        example = {p.name: p.default if p.default is not None else ("x" if p.type != "json_path" else "$.x")
                   for p in params if p.required or p.default is not None}
        out.append({"kind": kind, "label": labels.get(kind, kind), "description": DESCRIPTIONS[kind],
                    "parameters": [{"name": p.name, "type": p.type, "required": p.required, "default": p.default,
                                    "help": p.help, "choices": list(p.choices) if p.choices else None,
                                    "minimum": p.minimum, "maximum": p.maximum} for p in params],
                    "columns": columns_of(kind, normalize_params(kind, example)) if kind != "sql" else None,
                    "default_chart": default_chart(kind, {})})
    return out
