"""Protobuf messages as Spark types, and messages ↔ the Python values Spark's Arrow conversion takes (pure).

The type follows spark-protobuf's ``SchemaConverters`` (what ``from_protobuf`` yields), with the options that
keep values exact and usable chosen for you:

* int32, sint32, sfixed32 → int; int64, sint64, sfixed64 → long; float, double, bool, string; bytes → binary;
* uint32 → long, uint64, fixed64 → decimal(20, 0), fixed32 → long (``upcast.unsigned.ints=true``: spark-protobuf's
  default reinterprets values above 2^31 / 2^63 as negative numbers);
* enum → string (the value's name; a number the reader's enum lacks, as proto3's open enums allow, reads as
  its decimal text);
* repeated → array (no null elements), map → map (no null values), message → struct; a oneof's fields are
  plain nullable fields, at most one set;
* ``google.protobuf.Timestamp`` → timestamp (microseconds: nanoseconds are truncated), ``Duration`` → interval day
  to second, as spark-protobuf; the wrappers (``Int64Value``, ``StringValue``, …) → their scalar, null when
  absent (``unwrap.primitive.wrapper.types=true``); ``Any`` → struct<type_url: string, value: binary> as
  spark-protobuf; ``Struct``, ``Value`` and ``ListValue`` → a string holding their JSON (spark-protobuf refuses
  them: they are recursive);
* a recursive message is refused at planning (spark-protobuf's default ``recursive.fields.max.depth``); a field
  whose message has no fields (``google.protobuf.Empty``) is dropped, as spark-protobuf drops it.

Values: a field with presence (message fields, proto3 ``optional``, oneof members, proto2 fields) is null when
not set; a field without presence (proto3 scalars, enums, repeated, maps) reads its default (0, "", the first
enum value, []), as the message's getters and Confluent's deserializer give it (spark-protobuf's
``emit.default.values=true``). Fields are nullable unless proto2 ``required``.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dataplane.client.spark.options import SparkSourceError
from dataplane.schemas.base import PayloadError

Read = Callable[[Any], Any]
_F = FieldDescriptor
_UINT64 = DecimalType(20, 0)
_SCALARS: dict[int, DataType] = {
    _F.TYPE_INT32: IntegerType(), _F.TYPE_SINT32: IntegerType(), _F.TYPE_SFIXED32: IntegerType(),
    _F.TYPE_INT64: LongType(), _F.TYPE_SINT64: LongType(), _F.TYPE_SFIXED64: LongType(),
    _F.TYPE_UINT32: LongType(), _F.TYPE_FIXED32: LongType(), _F.TYPE_UINT64: _UINT64, _F.TYPE_FIXED64: _UINT64,
    _F.TYPE_FLOAT: FloatType(), _F.TYPE_DOUBLE: DoubleType(), _F.TYPE_BOOL: BooleanType(),
    _F.TYPE_STRING: StringType(), _F.TYPE_BYTES: BinaryType(), _F.TYPE_ENUM: StringType(),
}
TIMESTAMP, DURATION, ANY = "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.Any"
_JSON_TYPES = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})
_WRAPPERS: dict[str, DataType] = {
    "google.protobuf.DoubleValue": DoubleType(), "google.protobuf.FloatValue": FloatType(),
    "google.protobuf.Int64Value": LongType(), "google.protobuf.UInt64Value": _UINT64,
    "google.protobuf.Int32Value": IntegerType(), "google.protobuf.UInt32Value": LongType(),
    "google.protobuf.BoolValue": BooleanType(), "google.protobuf.StringValue": StringType(),
    "google.protobuf.BytesValue": BinaryType(),
}
_ANY_TYPE = StructType([StructField("type_url", StringType(), True), StructField("value", BinaryType(), True)])
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.type == _F.TYPE_MESSAGE and fd.is_repeated and bool(fd.message_type.GetOptions().map_entry)


# -- Protobuf → Spark type ------------------------------------------------------------------------------------

def protobuf_spark_type(descriptor: Descriptor) -> StructType:
    """The Spark type of ``descriptor``'s messages (the module docstring has the mapping)."""
    return _struct(descriptor, [descriptor.full_name])


def _struct(descriptor: Descriptor, stack: list[str]) -> StructType:
    fields = []
    for fd in descriptor.fields:
        data_type = _field_type(fd, stack)
        if data_type is not None:
            fields.append(StructField(fd.name, data_type, not fd.is_required))
    return StructType(fields)


def _field_type(fd: FieldDescriptor, stack: list[str]) -> DataType | None:
    if _is_map(fd):
        key, value = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        key_type, value_type = _element_type(key, stack), _element_type(value, stack)
        return None if key_type is None or value_type is None else MapType(key_type, value_type, False)
    element = _element_type(fd, stack)
    if element is None or not fd.is_repeated:
        return element
    return ArrayType(element, False)


def _element_type(fd: FieldDescriptor, stack: list[str]) -> DataType | None:
    if fd.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return _SCALARS[fd.type]
    name = fd.message_type.full_name
    special = _special_type(name)
    if special is not None:
        return special
    if name in stack:
        raise SparkSourceError(f"Protobuf message {name!r} is recursive (field {fd.full_name}): Spark columns cannot "
                               "hold recursive types")
    struct = _struct(fd.message_type, [*stack, name])
    return struct if struct.fields else None


def _special_type(name: str) -> DataType | None:
    if name == TIMESTAMP:
        return TimestampType()
    if name == DURATION:
        return DayTimeIntervalType()
    if name == ANY:
        return _ANY_TYPE
    if name in _JSON_TYPES:
        return StringType()
    return _WRAPPERS.get(name)


# -- message → Spark values -----------------------------------------------------------------------------------

def message_reader(descriptor: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """A function from messages of ``descriptor`` to dicts of the values of ``protobuf_spark_type``'s fields
    (built once per reader: the per-field work is decided here, not per record)."""
    return _message_reader(descriptor, [descriptor.full_name])


def _message_reader(descriptor: Descriptor, stack: list[str]) -> Callable[[Message], dict[str, Any]]:
    readers: list[tuple[str, bool, Read]] = []
    for fd in descriptor.fields:
        read = _field_reader(fd, stack)
        if read is not None:
            readers.append((fd.name, fd.has_presence and not fd.is_repeated, read))

    def read_message(message: Message) -> dict[str, Any]:
        return {name: None if presence and not message.HasField(name) else read(getattr(message, name))
                for name, presence, read in readers}
    return read_message


def _field_reader(fd: FieldDescriptor, stack: list[str]) -> Read | None:
    if _field_type(fd, stack) is None:
        return None
    if _is_map(fd):
        key = _element_reader(fd.message_type.fields_by_name["key"], stack)
        value = _element_reader(fd.message_type.fields_by_name["value"], stack)
        return lambda m: {key(k): value(v) for k, v in m.items()}
    element = _element_reader(fd, stack)
    if fd.is_repeated:
        return lambda v: [element(x) for x in v]
    return element


def _identity(value: Any) -> Any:
    return value


def _element_reader(fd: FieldDescriptor, stack: list[str]) -> Read:
    if fd.type in (_F.TYPE_UINT64, _F.TYPE_FIXED64):
        return decimal.Decimal
    if fd.type == _F.TYPE_ENUM:
        names = {v.number: v.name for v in fd.enum_type.values}
        return lambda v: names.get(v, str(v))
    if fd.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return _identity
    name = fd.message_type.full_name
    if name == TIMESTAMP:  # to_datetime refuses years Python cannot hold; seconds+micros stay exact
        return lambda m: _EPOCH + datetime.timedelta(seconds=m.seconds, microseconds=m.nanos // 1000)
    if name == DURATION:
        return lambda m: datetime.timedelta(seconds=m.seconds, microseconds=int(m.nanos / 1000))
    if name == ANY:
        return lambda m: {"type_url": m.type_url, "value": m.value}
    if name in _JSON_TYPES:
        return lambda m: json.dumps(_whole(json_format.MessageToDict(m)), separators=(",", ":"), ensure_ascii=False,
                                     sort_keys=True)  # a Struct is a map: no order of its own
    if name in _WRAPPERS:
        unwrap = decimal.Decimal if name == "google.protobuf.UInt64Value" else _identity
        return lambda m: unwrap(m.value)
    return _message_reader(fd.message_type, [*stack, name])


def _whole(value: Any) -> Any:
    """``Value`` holds every number as a double: print the whole ones as integers, as they were most likely written."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


# -- Spark values → message -----------------------------------------------------------------------------------

class _FieldError(PayloadError):
    """A value that does not fit, with the path of the field that refused it (``address.city``)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"field {path}: {reason}")
        self.path, self.reason = path, reason


def fill_message(message: Message, value: dict[str, Any]) -> None:
    """Set ``message``'s fields from a row's struct value (Arrow's Python values, maps as dicts), by field name;
    null leaves a field unset. PayloadError names the field a value does not fit."""
    fields = message.DESCRIPTOR.fields_by_name
    for name, item in value.items():
        if item is None:
            continue
        fd = fields.get(name)
        if fd is None:
            raise _FieldError(name, f"message {message.DESCRIPTOR.full_name!r} has no such field")
        try:
            _set_field(message, fd, item)
        except _FieldError as exc:
            raise _FieldError(f"{name}.{exc.path}", exc.reason) from None
        except (PayloadError, TypeError, ValueError, KeyError, ArithmeticError) as exc:
            raise _FieldError(name, str(exc)) from None


def _set_field(message: Message, fd: FieldDescriptor, value: Any) -> None:
    target = getattr(message, fd.name)
    if _is_map(fd):
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        for k, v in _items(value):
            if v is None:
                continue
            if value_fd.type == _F.TYPE_MESSAGE:
                _set_message(target[_scalar(key_fd, k)], v)
            else:
                target[_scalar(key_fd, k)] = _scalar(value_fd, v)
    elif fd.is_repeated:
        for v in value:
            if v is None:
                raise PayloadError("repeated fields cannot hold null")
            if fd.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
                _set_message(target.add(), v)
            else:
                target.append(_scalar(fd, v))
    elif fd.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        _set_message(target, value)
    else:
        setattr(message, fd.name, _scalar(fd, value))


def _items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, dict) else [tuple(x) for x in value]


def _set_message(target: Message, value: Any) -> None:
    target.SetInParent()  # an empty struct still marks the field present
    name = target.DESCRIPTOR.full_name
    if name == TIMESTAMP:
        if not isinstance(value, datetime.datetime):
            raise PayloadError(f"expected a timestamp, got {type(value).__name__}")
        at = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        delta = at - _EPOCH
        target.seconds = delta.days * 86_400 + delta.seconds
        target.nanos = delta.microseconds * 1000
    elif name == DURATION:
        if not isinstance(value, datetime.timedelta):
            raise PayloadError(f"expected an interval, got {type(value).__name__}")
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        seconds = int(micros / 1_000_000)  # toward zero: seconds and nanos share the sign
        target.seconds, target.nanos = seconds, (micros - seconds * 1_000_000) * 1000
    elif name in _JSON_TYPES:
        try:
            json_format.Parse(value if isinstance(value, str) else json.dumps(value), target)
        except json_format.Error as exc:
            raise PayloadError(f"not the JSON of a {name}: {exc}") from None
    elif name in _WRAPPERS:
        _set_field(target, target.DESCRIPTOR.fields_by_name["value"], value)
    elif isinstance(value, dict):
        fill_message(target, value)
    else:
        raise PayloadError(f"expected a struct for message {name!r}, got {type(value).__name__}")


def _scalar(fd: FieldDescriptor, value: Any) -> Any:
    """A Spark value as the field's Python type; protobuf range-checks what is set (ValueError)."""
    kind = fd.type
    if kind == _F.TYPE_ENUM:
        if isinstance(value, str):
            found = fd.enum_type.values_by_name.get(value)
            if found is None:
                raise PayloadError(f"enum {fd.enum_type.full_name} has no value {value!r}")
            return found.number
        return int(value)
    if kind == _F.TYPE_STRING:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).decode()
        if not isinstance(value, str):
            raise PayloadError(f"expected a string, got {type(value).__name__}")
        return value
    if kind == _F.TYPE_BYTES:
        if isinstance(value, str):
            return value.encode()
        if not isinstance(value, (bytes, bytearray)):
            raise PayloadError(f"expected binary, got {type(value).__name__}")
        return bytes(value)
    if kind in (_F.TYPE_FLOAT, _F.TYPE_DOUBLE):
        return float(value) if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool) \
            else value
    if kind == _F.TYPE_BOOL:
        return value
    if isinstance(value, decimal.Decimal):
        if value != value.to_integral_value():
            raise PayloadError(f"{value} is not a whole number")
        return int(value)
    return value
