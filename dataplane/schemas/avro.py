"""Avro schemas: parsing (fastavro), the stored and normalized forms, and schema resolution compatibility.

fastavro validates the text (types, names, defaults against their types) and is the codec the wire module
uses; the compatibility check walks our own small model of the schema, because neither library reports
*why* two schemas are incompatible in Confluent's terms.

Compatibility follows the Avro specification's schema resolution (the reader decodes what the writer
encoded), as Java's ``SchemaCompatibility`` implements it and Confluent reports it:

* primitives match themselves and the promotions int→long→float→double, string↔bytes (``TYPE_MISMATCH``);
* a writer union needs every branch readable; a reader union needs a branch that reads the writer
  (``MISSING_UNION_BRANCH``);
* records, enums and fixed match by unqualified name or a reader alias of the writer's full name
  (``NAME_MISMATCH``); a reader field absent from the writer (by name or alias) needs a default
  (``READER_FIELD_MISSING_DEFAULT_VALUE``); writer-only fields are skipped;
* enums: writer symbols the reader lacks, unless the reader has an enum default (``MISSING_ENUM_SYMBOLS``);
* fixed sizes must be equal (``FIXED_SIZE_MISMATCH``); arrays and maps compare their items and values.

Logical types are ignored, as in the resolution rules (a decimal's precision change is not reported).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType, to_parsing_canonical_form

from dataplane.schemas.base import Reference, SchemaError, SchemaType, resolve_reference

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
WRAPPER = "_SluiceValueWrapper"  # no namespace: it must not lend one to the schema it wraps
NAMED = frozenset({"record", "error", "enum", "fixed"})
# The writer types each reader primitive also reads (the spec's promotions).
_PROMOTED_FROM: dict[str, frozenset[str]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
# Key order of the stored form (Avro's own toString order), then any other attribute sorted by name.
_KEY_ORDER = ("type", "name", "namespace", "doc", "fields", "symbols", "items", "values", "size", "default",
              "order", "aliases", "logicalType", "precision", "scale")
# What the normalized form keeps of an attribute-bearing schema: Parsing Canonical Form's keys, plus what
# changes a reader's behaviour (defaults, aliases, field order, logical types).
_NORMALIZED_KEYS = ("name", "type", "fields", "symbols", "items", "values", "size", "default", "order",
                    "aliases", "logicalType", "precision", "scale")


# -- the model the compatibility check walks (mutable only while it is built, for recursive types) ----------

@dataclass(eq=False, slots=True)
class _Primitive:
    type: str


@dataclass(eq=False, slots=True)
class _Field:
    name: str
    type: _Node
    has_default: bool
    aliases: frozenset[str]


@dataclass(eq=False, slots=True)
class _Record:
    fullname: str
    aliases: frozenset[str]
    fields: list[_Field] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Enum:
    fullname: str
    aliases: frozenset[str]
    symbols: tuple[str, ...]
    default: str | None


@dataclass(eq=False, slots=True)
class _Fixed:
    fullname: str
    aliases: frozenset[str]
    size: int


@dataclass(eq=False, slots=True)
class _Array:
    items: _Node


@dataclass(eq=False, slots=True)
class _Map:
    values: _Node


@dataclass(eq=False, slots=True)
class _Union:
    branches: tuple[_Node, ...]


_Node = _Primitive | _Record | _Enum | _Fixed | _Array | _Map | _Union
_Named = _Record | _Enum | _Fixed


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _short(fullname: str) -> str:
    return fullname.rsplit(".", 1)[-1]


class _Builder:
    """Builds the model from JSON fastavro has already validated, sharing named types across references."""

    def __init__(self) -> None:
        self.named: dict[str, _Named] = {}

    def build(self, raw: Any, namespace: str | None = None) -> _Node:
        if isinstance(raw, list):
            return _Union(tuple(self.build(branch, namespace) for branch in raw))
        if isinstance(raw, str):
            if raw in PRIMITIVES:
                return _Primitive(raw)
            return self._lookup(raw, namespace)
        kind = raw["type"]
        if isinstance(kind, (dict, list)):
            return self.build(kind, namespace)
        if kind in PRIMITIVES:
            return _Primitive(kind)
        if kind == "array":
            return _Array(self.build(raw["items"], namespace))
        if kind == "map":
            return _Map(self.build(raw["values"], namespace))
        if kind not in NAMED:
            return self._lookup(kind, namespace)
        fullname = _fullname(raw["name"], raw.get("namespace", namespace))
        inner = fullname.rsplit(".", 1)[0] if "." in fullname else None
        aliases = frozenset(_fullname(alias, inner) for alias in raw.get("aliases", ()))
        node: _Named
        if kind == "fixed":
            node = _Fixed(fullname, aliases, int(raw["size"]))
        elif kind == "enum":
            node = _Enum(fullname, aliases, tuple(raw["symbols"]), raw.get("default"))
        else:
            node = _Record(fullname, aliases)
        self.named[fullname] = node
        if isinstance(node, _Record):
            node.fields = [
                _Field(f["name"], self.build(f["type"], inner), "default" in f, frozenset(f.get("aliases", ())))
                for f in raw["fields"]
            ]
        return node

    def _lookup(self, name: str, namespace: str | None) -> _Named:
        for candidate in (_fullname(name, namespace), name):
            if candidate in self.named:
                return self.named[candidate]
        raise SchemaError(f"Invalid schema: unknown type {name!r}")


# -- the parsed schema ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, eq=False)
class AvroSchema:
    """A parsed Avro schema: its JSON, references, and the fastavro schema the codec uses."""

    raw: Any
    references: tuple[Reference, ...]
    root: _Node = field(repr=False)
    # The fastavro schema the codec uses: the schema as the one field of a wrapper record, which encodes
    # to the same bytes as the schema alone and carries the referenced named types whatever the top level is.
    codec: Any = field(repr=False)

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.AVRO

    def canonical(self) -> str:
        """Compact JSON with a fixed key order and ``{"type": "int"}`` written ``"int"``; keeps every attribute.

        Not the Parsing Canonical Form: that form drops defaults, aliases and docs, so two schemas that
        resolve differently would share one id (see ``parsing_canonical_form`` for identity of the data).
        """
        return _dumps(_ordered(self.raw))

    def normalized(self) -> str:
        """Parsing Canonical Form's rules (full names, no namespace/doc/custom attributes, fixed key order)
        extended with what changes resolution: defaults, field order, aliases (full names) and logical types."""
        return _dumps(_normalize(self.raw, None, _NORMALIZED_KEYS, set()))

    def parsing_canonical_form(self) -> str:
        """The Avro specification's Parsing Canonical Form: equal for schemas that encode data identically."""
        return str(to_parsing_canonical_form(self.raw))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())


def parse_avro(
    text: str, references: Sequence[Reference] = (), resolved: Mapping[str, str] | None = None
) -> AvroSchema:
    """Parse ``text``; named types of the referenced schemas (``resolved``: name → text, transitively) are known.

    Referenced schemas are parsed in dependency order whatever order the mapping has.
    """
    resolved = resolved or {}
    for ref in references:
        resolve_reference(ref.name, resolved)
    named: dict[str, Any] = {}
    builder = _Builder()
    pending = {name: _load(src, f"reference {name!r}") for name, src in resolved.items()}
    while pending:
        progressed = False
        for name, raw in list(pending.items()):
            trial = dict(named)
            try:
                fastavro.parse_schema(raw, named_schemas=trial)
            except UnknownType:
                continue
            except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise SchemaError(f"Invalid schema: reference {name!r}: {_describe(exc)}") from None
            named = trial
            builder.build(raw)
            del pending[name]
            progressed = True
        if not progressed:
            raise SchemaError(f"Invalid schema: references {sorted(pending)} use types no reference defines")
    raw = _load(text, "schema")
    try:
        fastavro.parse_schema(raw, named_schemas=dict(named))
        codec = fastavro.parse_schema({"type": "record", "name": WRAPPER, "fields": [{"name": "v", "type": raw}]},
                                      named_schemas=dict(named))
        root = builder.build(raw)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SchemaError(f"Invalid schema: {_describe(exc)}") from None
    return AvroSchema(raw, tuple(references), root, codec)


def _load(text: str, what: str) -> Any:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"Invalid schema: {what} is not JSON: {exc}") from None
    if not isinstance(raw, (str, list, dict)):
        raise SchemaError(f"Invalid schema: {what} must be a JSON string, array or object")
    return raw


def _describe(exc: Exception) -> str:
    if isinstance(exc, UnknownType):
        return f"unknown type {exc.name!r} (not defined here or in a reference)"
    if isinstance(exc, KeyError):
        return f"missing attribute {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _ordered(raw: Any) -> Any:
    if isinstance(raw, list):
        return [_ordered(item) for item in raw]
    if not isinstance(raw, dict):
        return raw
    if set(raw) == {"type"} and isinstance(raw["type"], str | list | dict):
        return _ordered(raw["type"])
    keys = [k for k in _KEY_ORDER if k in raw] + sorted(k for k in raw if k not in _KEY_ORDER)
    out: dict[str, Any] = {}
    for key in keys:
        value = raw[key]
        if key in ("type", "items", "values"):
            out[key] = _ordered(value)
        elif key == "fields":
            out[key] = [_ordered(f) for f in value]
        else:
            out[key] = value
    return out


def _normalize(raw: Any, namespace: str | None, keys: tuple[str, ...], seen: set[str]) -> Any:
    if isinstance(raw, list):
        return [_normalize(branch, namespace, keys, seen) for branch in raw]
    if isinstance(raw, str):
        return raw if raw in PRIMITIVES else _fullname(raw, namespace)
    kind = raw["type"]
    if not isinstance(kind, str) or (kind not in NAMED and kind not in ("array", "map")):
        extra = {k: raw[k] for k in ("logicalType", "precision", "scale") if k in raw}
        inner = _normalize(kind, namespace, keys, seen)
        return {"type": inner, **extra} if extra else inner
    out: dict[str, Any] = {}
    inner_ns = namespace
    if kind in NAMED:
        fullname = _fullname(raw["name"], raw.get("namespace", namespace))
        inner_ns = fullname.rsplit(".", 1)[0] if "." in fullname else None
        seen.add(fullname)
        out["name"] = fullname
    for key in keys:
        if key == "name" or key not in raw:
            continue
        value = raw[key]
        if key == "type":
            out["type"] = kind
        elif key == "fields":
            out["fields"] = [_normalize_field(f, inner_ns, keys, seen) for f in value]
        elif key in ("items", "values"):
            out[key] = _normalize(value, inner_ns, keys, seen)
        elif key == "aliases":
            out[key] = sorted(_fullname(a, inner_ns) for a in value)
        else:
            out[key] = value
    return out


def _normalize_field(raw: dict[str, Any], namespace: str | None, keys: tuple[str, ...], seen: set[str]) -> Any:
    out: dict[str, Any] = {"name": raw["name"], "type": _normalize(raw["type"], namespace, keys, seen)}
    for key in ("default", "order", "aliases"):
        if key in raw and not (key == "order" and raw[key] == "ascending"):
            out[key] = sorted(raw[key]) if key == "aliases" else raw[key]
    return out


# -- compatibility -------------------------------------------------------------------------------------------

def avro_compatibility(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why ``reader`` cannot decode every datum ``writer`` encodes: Confluent-style messages, empty if it can."""
    return _Checker().check(reader.root, writer.root, "")


def _message(error: str, path: str, description: str, info: str) -> str:
    return f"{{errorType:'{error}', description:'{description}', additionalInfo:'{info}'}} at '{path or '/'}'"


def _type_name(node: _Node) -> str:
    if isinstance(node, _Primitive):
        return node.type.upper()
    return type(node).__name__.lstrip("_").upper()


class _Checker:
    def __init__(self) -> None:
        self._in_progress: set[tuple[int, int]] = set()

    def check(self, reader: _Node, writer: _Node, path: str) -> list[str]:
        key = (id(reader), id(writer))
        if key in self._in_progress:  # a recursive type: assume compatible while the outer pair is checked
            return []
        self._in_progress.add(key)
        try:
            return self._check(reader, writer, path)
        finally:
            self._in_progress.discard(key)

    def _check(self, reader: _Node, writer: _Node, path: str) -> list[str]:
        if isinstance(writer, _Union):
            problems: list[str] = []
            for branch in writer.branches:
                problems += self.check(reader, branch, path)
            return problems
        if isinstance(reader, _Union):
            for branch in reader.branches:
                if not self.check(branch, writer, path):
                    return []
            return [_message("MISSING_UNION_BRANCH", path,
                             "The reader union has no branch that reads the writer type",
                             f"reader union lacking writer type: {_type_name(writer)}")]
        if isinstance(reader, _Primitive) and isinstance(writer, _Primitive):
            if reader.type == writer.type or writer.type in _PROMOTED_FROM.get(reader.type, frozenset()):
                return []
            return [self._mismatch(reader, writer, path)]
        if isinstance(reader, _Array) and isinstance(writer, _Array):
            return self.check(reader.items, writer.items, f"{path}/items")
        if isinstance(reader, _Map) and isinstance(writer, _Map):
            return self.check(reader.values, writer.values, f"{path}/values")
        if isinstance(reader, _Record) and isinstance(writer, _Record):
            return self._name(reader, writer, path) or self._record(reader, writer, path)
        if isinstance(reader, _Enum) and isinstance(writer, _Enum):
            return self._name(reader, writer, path) or self._enum(reader, writer, path)
        if isinstance(reader, _Fixed) and isinstance(writer, _Fixed):
            if problems := self._name(reader, writer, path):
                return problems
            if reader.size != writer.size:
                return [_message("FIXED_SIZE_MISMATCH", f"{path}/size",
                                 "The size of the fixed type differs between reader and writer",
                                 f"expected: {writer.size}, found: {reader.size}")]
            return []
        return [self._mismatch(reader, writer, path)]

    @staticmethod
    def _mismatch(reader: _Node, writer: _Node, path: str) -> str:
        return _message("TYPE_MISMATCH", path, "The reader type does not match the writer type",
                        f"reader type: {_type_name(reader)} not compatible with writer type: {_type_name(writer)}")

    @staticmethod
    def _name(reader: _Named, writer: _Named, path: str) -> list[str]:
        if _short(reader.fullname) == _short(writer.fullname) or writer.fullname in reader.aliases:
            return []
        return [_message("NAME_MISMATCH", f"{path}/name", "The name of the schema has changed",
                         f"expected: {writer.fullname}")]

    def _record(self, reader: _Record, writer: _Record, path: str) -> list[str]:
        by_name = {f.name: f for f in writer.fields}
        problems: list[str] = []
        for index, reader_field in enumerate(reader.fields):
            writer_field = by_name.get(reader_field.name)
            if writer_field is None:
                writer_field = next((by_name[a] for a in sorted(reader_field.aliases) if a in by_name), None)
            if writer_field is None:
                if not reader_field.has_default:
                    problems.append(_message(
                        "READER_FIELD_MISSING_DEFAULT_VALUE", f"{path}/fields/{index}",
                        f"The field '{reader_field.name}' in the reader schema has no default value "
                        "and is missing in the writer schema", reader_field.name))
                continue
            problems += self.check(reader_field.type, writer_field.type, f"{path}/fields/{index}/type")
        return problems

    @staticmethod
    def _enum(reader: _Enum, writer: _Enum, path: str) -> list[str]:
        missing = [s for s in writer.symbols if s not in reader.symbols]
        if not missing or (reader.default is not None and reader.default in reader.symbols):
            return []
        return [_message("MISSING_ENUM_SYMBOLS", f"{path}/symbols",
                         f"The reader enum lacks the writer's symbols {missing}", f"[{', '.join(missing)}]")]


# -- Avro's JSON encoding, checked before fastavro converts it (for errors that name the place) --------------

def json_encoding_error(schema: AvroSchema, value: Any) -> str | None:
    """Why ``value`` is not ``schema``'s Avro JSON encoding (with the JSON path), or None when it is."""
    return _json_error(schema.root, value, "$")


_JSON_PRIMITIVE: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (int, float), "double": (int, float),
    "string": (str,), "bytes": (str,),
}


def _branch_name(node: _Node) -> str:
    if isinstance(node, _Primitive):
        return node.type
    if isinstance(node, (_Record, _Enum, _Fixed)):
        return node.fullname
    return "array" if isinstance(node, _Array) else "map" if isinstance(node, _Map) else "union"


def _json_error(node: _Node, value: Any, path: str) -> str | None:
    if isinstance(node, _Primitive):
        datum: Any = value
        if node.type == "null":
            return None if value is None else f"{path}: expected null"
        if not isinstance(value, _JSON_PRIMITIVE[node.type]) or (isinstance(value, bool) and node.type != "boolean"):
            return f"{path}: expected {node.type}, got {type(value).__name__}"
        if node.type == "int" and not -(2**31) <= datum < 2**31:
            return f"{path}: {datum} is out of range for int"
        if node.type == "long" and not -(2**63) <= datum < 2**63:
            return f"{path}: {datum} is out of range for long"
        if node.type == "bytes" and any(ord(c) > 255 for c in datum):
            return f"{path}: bytes are written as ISO-8859-1 characters (\\u0000-\\u00ff)"
        return None
    if isinstance(node, _Union):
        if value is None and any(_branch_name(b) == "null" for b in node.branches):
            return None
        names = [_branch_name(b) for b in node.branches]
        if not isinstance(value, dict) or len(value) != 1:
            return f"{path}: a union value is written {{\"<branch>\": value}} with a branch among {names}"
        (name, inner), = value.items()
        for branch in node.branches:
            if name in (_branch_name(branch), _short(_branch_name(branch))):
                return _json_error(branch, inner, f"{path}.{name}")
        return f"{path}: {name!r} is not a branch of the union {names}"
    if isinstance(node, _Record):
        if not isinstance(value, dict):
            return f"{path}: expected an object for record {node.fullname}"
        if unknown := sorted(set(value) - {f.name for f in node.fields}):
            return f"{path}: record {node.fullname} has no field {unknown[0]!r}"
        for f in node.fields:
            if f.name in value:
                if problem := _json_error(f.type, value[f.name], f"{path}.{f.name}"):
                    return problem
            elif not f.has_default:
                return f"{path}: missing field {f.name!r} (it has no default)"
        return None
    if isinstance(node, _Enum):
        return None if value in node.symbols else f"{path}: {value!r} is not a symbol of {list(node.symbols)}"
    if isinstance(node, _Fixed):
        if not isinstance(value, str) or len(value) != node.size or any(ord(c) > 255 for c in value):
            return f"{path}: expected {node.size} ISO-8859-1 characters for fixed {node.fullname}"
        return None
    if isinstance(node, _Array):
        if not isinstance(value, list):
            return f"{path}: expected an array"
        return next((p for i, v in enumerate(value) if (p := _json_error(node.items, v, f"{path}[{i}]"))), None)
    if not isinstance(value, dict):
        return f"{path}: expected an object (map)"
    return next((p for k, v in value.items() if (p := _json_error(node.values, v, f"{path}.{k}"))), None)


class JsonEncodingMismatch(ValueError):
    """A value that is not its schema's Avro JSON encoding; the message names the JSON path."""


def native_of_json(schema: AvroSchema, value: Any) -> Any:
    """``value`` in Avro's JSON encoding as the Python value fastavro's writer takes, checked on the way (the same
    rules as :func:`json_encoding_error`): union values become ``(branch, value)`` so the writer takes exactly the
    branch named, bytes and fixed their ISO-8859-1 bytes. Raises :class:`JsonEncodingMismatch`."""
    return _native(schema.root, value, "$")


def _native(node: _Node, value: Any, path: str) -> Any:
    if isinstance(node, _Primitive):
        if node.type in ("string", "int", "long", "boolean", "null", "double", "float") and type(value) is \
                _EXACT.get(node.type):
            limit = _INT_LIMITS.get(node.type)
            number: Any = value
            if limit is not None and not -limit <= number < limit:
                raise JsonEncodingMismatch(f"{path}: {value} is out of range for {node.type}")
            return value
        if problem := _json_error(node, value, path):
            raise JsonEncodingMismatch(problem)
        return value.encode("latin-1") if node.type == "bytes" else value
    if isinstance(node, _Record):
        if type(value) is not dict:
            raise JsonEncodingMismatch(f"{path}: expected an object for record {node.fullname}")
        out = {}
        for f in node.fields:
            if f.name in value:
                out[f.name] = _native(f.type, value[f.name], f"{path}.{f.name}")
            elif not f.has_default:
                raise JsonEncodingMismatch(f"{path}: missing field {f.name!r} (it has no default)")
        if len(out) != len(value) and (unknown := sorted(set(value) - {f.name for f in node.fields})):
            raise JsonEncodingMismatch(f"{path}: record {node.fullname} has no field {unknown[0]!r}")
        return out
    if isinstance(node, _Union):
        if value is None and any(_branch_name(b) == "null" for b in node.branches):
            return None
        if problem := _union_shape_error(node, value, path):
            raise JsonEncodingMismatch(problem)
        (name, inner), = value.items()
        for branch in node.branches:
            full = _branch_name(branch)
            if name in (full, _short(full)):
                return (full, _native(branch, inner, f"{path}.{name}"))
        raise JsonEncodingMismatch(f"{path}: {name!r} is not a branch of the union "
                                   f"{[_branch_name(b) for b in node.branches]}")
    if isinstance(node, _Enum):
        if value not in node.symbols:
            raise JsonEncodingMismatch(f"{path}: {value!r} is not a symbol of {list(node.symbols)}")
        return value
    if isinstance(node, _Fixed):
        if problem := _json_error(node, value, path):
            raise JsonEncodingMismatch(problem)
        return value.encode("latin-1")
    if isinstance(node, _Array):
        if type(value) is not list:
            raise JsonEncodingMismatch(f"{path}: expected an array")
        return [_native(node.items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if type(value) is not dict:
        raise JsonEncodingMismatch(f"{path}: expected an object (map)")
    return {k: _native(node.values, v, f"{path}.{k}") for k, v in value.items()}


_INT_LIMITS = {"int": 2**31, "long": 2**63}
_EXACT: dict[str, type] = {"string": str, "int": int, "long": int, "boolean": bool, "null": type(None),
                           "double": float, "float": float}


def _union_shape_error(node: _Union, value: Any, path: str) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        return None
    names = [_branch_name(b) for b in node.branches]
    return f"{path}: a union value is written {{\"<branch>\": value}} with a branch among {names}"


class _Unusual(Exception):
    """A value the compiled converter leaves to :func:`_native` (which returns it or raises the exact error)."""


_Convert = Callable[[Any], Any]


def native_converter(schema: AvroSchema) -> _Convert:
    """:func:`native_of_json` for many values of one schema: the same results and errors, at about half the cost.

    The schema is compiled once into one closure per node, which checks the usual shapes with exact type tests
    and builds no JSON path as it goes. Anything else (a value that does not fit, a ``double`` written as a JSON
    integer, bytes, fixed) makes the closure give up, and :func:`native_of_json` converts that value again from
    the top: it alone says what is wrong, so every message stays its own."""
    fast = _compile(schema.root, {})

    def convert(value: Any) -> Any:
        try:
            return fast(value)
        except (_Unusual, JsonEncodingMismatch):
            return _native(schema.root, value, "$")
    return convert


def _unusual(_value: Any) -> Any:
    raise _Unusual


def _compile(node: _Node, done: dict[int, _Convert]) -> _Convert:
    """One node's converter; ``done`` holds the named types compiled so far (a recursive type refers to itself)."""
    if id(node) in done:
        return done[id(node)]
    if isinstance(node, _Primitive):
        return _compile_primitive(node.type)
    if isinstance(node, _Record):
        fields: list[tuple[str, _Convert, bool]] = []

        def record(value: Any) -> Any:
            if type(value) is not dict:
                raise _Unusual
            out = {}
            for name, convert, has_default in fields:
                if name in value:
                    out[name] = convert(value[name])
                elif not has_default:
                    raise _Unusual
            if len(out) != len(value):  # a key that is no field
                raise _Unusual
            return out
        done[id(node)] = record  # before the fields: they may refer to this record
        fields.extend((f.name, _compile(f.type, done), f.has_default) for f in node.fields)
        return record
    if isinstance(node, _Union):
        return _compile_union(node, done)
    if isinstance(node, _Enum):
        symbols = frozenset(node.symbols)

        def enum(value: Any) -> Any:
            if type(value) is str and value in symbols:
                return value
            raise _Unusual
        return enum
    if isinstance(node, _Array):
        items = _compile(node.items, done)

        def array(value: Any) -> Any:
            if type(value) is not list:
                raise _Unusual
            return [items(v) for v in value]
        return array
    if isinstance(node, _Map):
        values = _compile(node.values, done)

        def mapping(value: Any) -> Any:
            if type(value) is not dict:
                raise _Unusual
            return {k: values(v) for k, v in value.items()}
        return mapping
    return _unusual  # fixed: rare, left to _native


def _compile_primitive(name: str) -> _Convert:
    exact = _EXACT.get(name)
    limit = _INT_LIMITS.get(name)
    if exact is None:  # bytes: ISO-8859-1 text to encode, left to _native
        return _unusual
    if limit is not None:
        def integer(value: Any) -> Any:
            if type(value) is int and -limit <= value < limit:
                return value
            raise _Unusual
        return integer

    def primitive(value: Any) -> Any:
        if type(value) is exact:
            return value
        raise _Unusual
    return primitive


def _compile_union(node: _Union, done: dict[int, _Convert]) -> _Convert:
    nullable = any(_branch_name(b) == "null" for b in node.branches)
    table: dict[str, tuple[str, _Convert]] = {}
    for branch in node.branches:  # a name is the first branch it names, by full or short name (as _native)
        full = _branch_name(branch)
        entry = (full, _compile(branch, done))
        table.setdefault(full, entry)
        table.setdefault(_short(full), entry)

    def union(value: Any) -> Any:
        if value is None and nullable:
            return None
        if type(value) is not dict or len(value) != 1:
            raise _Unusual
        (name, inner), = value.items()
        hit = table.get(name)
        if hit is None:
            raise _Unusual
        return (hit[0], hit[1](inner))
    return union
