"""Spark types of registry schemas, and the conversions between decoded values and Spark's Arrow values.

Avro follows spark-avro's ``SchemaConverters`` (what ``from_avro`` yields): records → structs (a field is
nullable when its type is a union with null), arrays and maps (string keys), a union of null and one type →
that type, nullable; ``[int, long]`` → long and ``[float, double]`` → double; any other union → a struct of
``member0``, ``member1``, … (one set, the others null); enums → string; bytes and fixed → binary; logical
types ``date`` → date, ``timestamp-millis``/``-micros`` → timestamp, ``local-timestamp-*`` → timestamp_ntz,
``decimal`` → decimal(p, s). Recursive records have no Spark type and are refused, as spark-avro does.

JSON Schema: an object with ``properties`` → a struct of them (all nullable: JSON Schema fields are optional
unless required, and required is a validation rule, not a type), ``string``/``integer``/``number``/
``boolean`` → string/long/double/boolean, arrays with one ``items`` schema → arrays, objects with only an
``additionalProperties`` schema → maps; a type list or ``oneOf``/``anyOf`` with ``null`` and one other type →
that type; local ``$ref``s are followed. Anything else becomes a string holding the value's JSON text.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dataplane.client.spark.options import SparkSourceError
from dataplane.schemas import AvroSchema, JsonSchema

Convert = Callable[[Any], Any]

_AVRO_PRIMITIVE: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}


# -- Avro → Spark ---------------------------------------------------------------------------------------------

def avro_spark_type(schema: AvroSchema) -> tuple[DataType, Convert | None]:
    """The Spark type of ``schema``'s values and the conversion of fastavro's values to it (None: as they are)."""
    codec = schema.codec
    walker = _AvroWalker(codec.get("__named_schemas", {}))
    data_type, _nullable, convert = walker.walk(codec["fields"][0]["type"])
    return data_type, convert


def _each(convert: Convert) -> Convert:
    return lambda v: None if v is None else [convert(x) for x in v]


def _each_value(convert: Convert) -> Convert:
    return lambda v: None if v is None else {k: convert(x) for k, x in v.items()}


class _AvroWalker:
    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.stack: list[str] = []

    def walk(self, node: Any) -> tuple[DataType, bool, Convert | None]:
        """(Spark type, nullable, conversion or None) of one Avro schema node."""
        if isinstance(node, list):
            return self._union(node)
        if isinstance(node, str):
            if node in _AVRO_PRIMITIVE:
                return _AVRO_PRIMITIVE[node], node == "null", None
            return self.walk(self.named[node])
        kind = node["type"]
        logical = node.get("logicalType")
        if logical == "date" and kind == "int":
            return DateType(), False, None
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False, None
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return TimestampNTZType(), False, None
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(node["precision"]), int(node.get("scale", 0))
            if precision > 38:  # Spark's DecimalType.MAX_PRECISION
                raise SparkSourceError(f"Avro decimal({precision}, {scale}) is wider than Spark's decimal(38)")
            return DecimalType(precision, scale), False, None
        if kind == "record" or kind == "error":
            return self._record(node)
        if kind == "enum":
            return StringType(), False, None
        if kind == "fixed":
            return BinaryType(), False, None
        if kind == "array":
            items, nullable, convert = self.walk(node["items"])
            return ArrayType(items, nullable), False, None if convert is None else _each(convert)
        if kind == "map":
            values, nullable, convert = self.walk(node["values"])
            return MapType(StringType(), values, nullable), False, None if convert is None else _each_value(convert)
        if isinstance(kind, (dict, list)) or kind in self.named or kind in _AVRO_PRIMITIVE:
            return self.walk(kind)  # {"type": "string"} and the like
        raise SparkSourceError(f"Avro type {kind!r} has no Spark type")

    def _record(self, node: dict[str, Any]) -> tuple[DataType, bool, Convert | None]:
        name = node["name"]
        if name in self.stack:
            raise SparkSourceError(f"Avro record {name!r} is recursive: Spark columns cannot hold recursive types")
        self.stack.append(name)
        fields: list[StructField] = []
        converts: dict[str, Convert] = {}
        for f in node["fields"]:
            data_type, nullable, convert = self.walk(f["type"])
            fields.append(StructField(f["name"], data_type, nullable))
            if convert is not None:
                converts[f["name"]] = convert
        self.stack.pop()
        if not converts:
            return StructType(fields), False, None

        def conv(v: Any) -> Any:
            if v is None:
                return None
            out = dict(v)
            for key, c in converts.items():
                out[key] = c(out.get(key))
            return out
        return StructType(fields), False, conv

    def _union(self, branches: list[Any]) -> tuple[DataType, bool, Convert | None]:
        nullable = "null" in branches
        others = [b for b in branches if b != "null"]
        if not others:
            return NullType(), True, None
        if len(others) == 1:
            data_type, _, convert = self.walk(others[0])
            return data_type, True, convert
        if set(map(str, others)) in ({"int", "long"},):
            return LongType(), nullable, None
        if set(map(str, others)) in ({"float", "double"},):
            return DoubleType(), nullable, None
        members = [self.walk(b) for b in others]
        tests = [self._test(b) for b in others]
        fields = [StructField(f"member{i}", t, True) for i, (t, _, _) in enumerate(members)]
        converts = [c for _, _, c in members]

        def conv(v: Any) -> Any:
            if v is None:
                return None
            out: dict[str, Any] = {f"member{i}": None for i in range(len(tests))}
            for i, test in enumerate(tests):
                if test(v):
                    value = v[1] if isinstance(v, tuple) else v
                    c = converts[i]
                    out[f"member{i}"] = c(value) if c is not None else value
                    return out
            return out
        return StructType(fields), nullable, conv

    def _test(self, node: Any) -> Callable[[Any], bool]:
        """Whether a fastavro value came from this union branch (records named when a union has several)."""
        if isinstance(node, str) and node in self.named:
            node = self.named[node]
        kind = node if isinstance(node, str) else node["type"]
        logical = None if isinstance(node, str) else node.get("logicalType")
        if kind in ("record", "error"):
            name = node["name"]
            return lambda v: (isinstance(v, tuple) and v[0] == name) or isinstance(v, dict)
        if logical == "date":
            return lambda v: isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
        if logical and "timestamp" in logical:
            return lambda v: isinstance(v, datetime.datetime)
        if logical == "decimal":
            return lambda v: isinstance(v, decimal.Decimal)
        simple: dict[str, Callable[[Any], bool]] = {
            "boolean": lambda v: isinstance(v, bool),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, float), "double": lambda v: isinstance(v, float),
            "string": lambda v: isinstance(v, str), "enum": lambda v: isinstance(v, str),
            "bytes": lambda v: isinstance(v, bytes), "fixed": lambda v: isinstance(v, bytes),
            "array": lambda v: isinstance(v, list), "map": lambda v: isinstance(v, dict),
        }
        return simple.get(kind, lambda v: False)


# -- Spark → Avro (the sink) ----------------------------------------------------------------------------------

def avro_write_convert(schema: AvroSchema) -> Convert | None:
    """Spark values (plain dicts and lists) to what fastavro writes, where the read mapping is not its own inverse:
    a union of several types is a ``member0``, ``member1``, … struct with one member set, which becomes that
    branch's value (a record branch as fastavro's ``(full name, value)`` tuple, so the branch is the one named
    even when records look alike). None when the schema has no such union: the values go as they are."""
    codec = schema.codec
    return _AvroWriteWalker(codec.get("__named_schemas", {})).walk(codec["fields"][0]["type"])


class _AvroWriteWalker:
    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.stack: list[str] = []

    def walk(self, node: Any) -> Convert | None:
        if isinstance(node, list):
            return self._union(node)
        if isinstance(node, str):
            if node in self.named and node not in self.stack:
                return self.walk(self.named[node])
            return None  # a primitive, or a recursive reference (planning refuses those)
        kind = node["type"]
        if kind in ("record", "error"):
            self.stack.append(node["name"])
            converts = {f["name"]: c for f in node["fields"] if (c := self.walk(f["type"])) is not None}
            self.stack.pop()
            if not converts:
                return None

            def record(v: Any) -> Any:
                if not isinstance(v, dict):
                    return v
                out = dict(v)
                for key, c in converts.items():
                    if out.get(key) is not None:
                        out[key] = c(out[key])
                return out
            return record
        if kind == "array":
            items = self.walk(node["items"])
            return None if items is None else _each(items)
        if kind == "map":
            values = self.walk(node["values"])
            return None if values is None else _each_value(values)
        if isinstance(kind, (dict, list)) or kind in self.named:
            return self.walk(kind)
        return None

    def _union(self, branches: list[Any]) -> Convert | None:
        others = [b for b in branches if b != "null"]
        if len(others) <= 1:
            return self.walk(others[0]) if others else None
        if set(map(str, others)) in ({"int", "long"}, {"float", "double"}):
            return None
        members = [(self._record_name(b), self.walk(b)) for b in others]

        def union(v: Any) -> Any:
            if not isinstance(v, dict) or not any(f"member{i}" in v for i in range(len(members))):
                return v  # not the member struct: fastavro's validation names what is wrong with it
            for i, (name, convert) in enumerate(members):
                value = v.get(f"member{i}")
                if value is not None:
                    value = convert(value) if convert is not None else value
                    return (name, value) if name is not None else value
            return None  # no member set: null (refused by validation when the union has no null)
        return union

    def _record_name(self, node: Any) -> str | None:
        if isinstance(node, str):
            node = self.named.get(node, node)
        return str(node["name"]) if isinstance(node, dict) and node.get("type") in ("record", "error") else None


# -- JSON Schema → Spark --------------------------------------------------------------------------------------

def json_spark_type(schema: JsonSchema) -> DataType:
    """The Spark type of values of ``schema`` (see the module docstring for the mapping)."""
    return _json_type(schema.raw, schema.raw, 0)


def _deref(root: Any, node: Any, depth: int) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#") \
            and depth < 32:
        target: Any = root
        for part in node["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return {}
            target = target[part]
        node, depth = target, depth + 1
    return node


def _json_type(root: Any, node: Any, depth: int) -> DataType:
    if depth > 32:
        return StringType()
    node = _deref(root, node, depth)
    if not isinstance(node, dict):
        return StringType()
    types = node.get("type")
    if types is None:
        for key in ("oneOf", "anyOf"):
            branches = node.get(key)
            if isinstance(branches, list):
                others = [b for b in branches if _deref(root, b, depth) != {"type": "null"}]
                if len(others) == 1:
                    return _json_type(root, others[0], depth + 1)
                return StringType()
        types = "object" if "properties" in node else None
    if isinstance(types, list):
        others = [t for t in types if t != "null"]
        if len(others) != 1:
            return StringType()
        types = others[0]
    if types == "object":
        props = node.get("properties")
        if isinstance(props, dict) and props:
            return StructType([StructField(name, _json_type(root, sub, depth + 1), True)
                               for name, sub in props.items()])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return MapType(StringType(), _json_type(root, extra, depth + 1), True)
        return StringType()
    if types == "array":
        items = node.get("items")
        return ArrayType(_json_type(root, items, depth + 1), True) if isinstance(items, dict) else StringType()
    return {"string": StringType(), "integer": LongType(), "number": DoubleType(),
            "boolean": BooleanType()}.get(str(types), StringType())


def json_to_spark(data_type: DataType, value: Any) -> Any:
    """A decoded JSON value as Spark's Arrow conversion takes it for ``data_type``."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        if not isinstance(value, dict):
            return None
        return {f.name: json_to_spark(f.dataType, value.get(f.name)) for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        return [json_to_spark(data_type.elementType, x) for x in value] if isinstance(value, list) else None
    if isinstance(data_type, MapType):
        return {k: json_to_spark(data_type.valueType, x) for k, x in value.items()} if isinstance(value, dict) \
            else None
    if isinstance(data_type, StringType):
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(data_type, LongType):
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(data_type, DoubleType):
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(data_type, BooleanType):
        return value if isinstance(value, bool) else None
    return value


# -- Spark → Avro (schemas the sink registers) ---------------------------------------------------------------

def spark_avro_schema(data_type: DataType, name: str = "topLevelRecord", namespace: str = "") -> Any:
    """An Avro schema for values of ``data_type`` (spark-avro's ``toAvroType``, nullable → ``["null", T]``
    with a null default so later versions can drop or add fields compatibly)."""
    return _to_avro(data_type, name, namespace)


def _to_avro(data_type: DataType, name: str, namespace: str) -> Any:
    if isinstance(data_type, StructType):
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        fields = []
        inner = f"{namespace}.{name}" if namespace else name
        for f in data_type.fields:
            avro = _to_avro(f.dataType, f.name, inner)
            if f.nullable:
                fields.append({"name": f.name, "type": ["null", avro], "default": None})
            else:
                fields.append({"name": f.name, "type": avro})
        record["fields"] = fields
        return record
    if isinstance(data_type, ArrayType):
        items = _to_avro(data_type.elementType, name, namespace)
        return {"type": "array", "items": ["null", items] if data_type.containsNull else items}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise SparkSourceError(f"Avro maps have string keys; {data_type.simpleString()} has no Avro schema")
        values = _to_avro(data_type.valueType, name, namespace)
        return {"type": "map", "values": ["null", values] if data_type.valueContainsNull else values}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision,
                "scale": data_type.scale}
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    simple = {BooleanType: "boolean", IntegerType: "int", LongType: "long", FloatType: "float",
              DoubleType: "double", BinaryType: "bytes", StringType: "string"}
    for cls, avro_name in simple.items():
        if isinstance(data_type, cls):
            return avro_name
    from pyspark.sql.types import ByteType, ShortType
    if isinstance(data_type, (ByteType, ShortType)):
        return "int"
    raise SparkSourceError(f"Spark type {data_type.simpleString()} has no Avro schema")
