"""Protobuf schemas: ``.proto`` text (proto2/proto3) parsed with ``proto-schema-parser``, resolved, compared.

Imports are resolved through the caller's mapping (import path → text), except Google's well-known types
and Confluent's own ``confluent/*.proto``, which are known without references (as Confluent knows them).

Compatibility follows Confluent's ``SchemaDiff`` (original = old, update = new for BACKWARD; swapped for
FORWARD); fields are matched by number, as the wire matches them. Incompatible:

* ``PACKAGE_CHANGED`` (every message's full name changes; Confluent 7.x+ tolerates it, we do not);
* ``MESSAGE_REMOVED``;
* ``FIELD_KIND_CHANGED`` (scalar ↔ message/enum ↔ map), ``FIELD_SCALAR_KIND_CHANGED`` (outside a
  wire-compatible group: int32/uint32/int64/uint64/bool; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64;
  string/bytes; float; double), ``FIELD_NAMED_TYPE_CHANGED``;
* ``FIELD_NUMERIC_LABEL_CHANGED`` (a numeric field becomes or stops being repeated);
* ``REQUIRED_FIELD_ADDED``/``REQUIRED_FIELD_REMOVED`` (proto2);
* ``ONEOF_FIELD_REMOVED``, ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``, ``FIELD_MOVED_TO_EXISTING_ONEOF``.

A schema that uses its own reserved numbers or names does not parse (protoc's rule). A number reserved by
the old schema and reused by the new one is not reported: neither schema's data carries it, so the two
read each other; only versions before the reservation are at risk (as in Confluent, not checked).

Compatible, as in Confluent: messages, enums, fields, oneofs added; fields removed (by number: a
renumbered field is a removal plus an addition); field renamed; enum values added, renamed or removed
(proto3 enums are open); string/bytes/message fields becoming repeated or singular.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.generator import Generator
from proto_schema_parser.parser import Parser

from dataplane.schemas.base import Reference, SchemaError, SchemaType, resolve_reference
from dataplane.schemas.protobuf_text import descriptor_text

SCALARS = frozenset({"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                     "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"})
# Scalars whose encodings read each other (Confluent's groups): a change inside a group is compatible.
_WIRE_GROUP = {
    **dict.fromkeys(("int32", "uint32", "int64", "uint64", "bool"), "varint"),
    **dict.fromkeys(("sint32", "sint64"), "zigzag"),
    **dict.fromkeys(("fixed32", "sfixed32"), "fixed32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "fixed64"),
    **dict.fromkeys(("string", "bytes"), "length"),
    "float": "float",
    "double": "double",
}
_NUMERIC = frozenset(SCALARS - {"string", "bytes"})
_MAX_FIELD = 2**29 - 1

# Files every Protobuf schema may import without a reference: (package, messages, enums).
WELL_KNOWN: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "google/protobuf/any.proto": ("google.protobuf", ("Any",), ()),
    "google/protobuf/api.proto": ("google.protobuf", ("Api", "Method", "Mixin"), ()),
    "google/protobuf/descriptor.proto": ("google.protobuf", (
        "FileDescriptorSet", "FileDescriptorProto", "DescriptorProto", "FieldDescriptorProto",
        "OneofDescriptorProto", "EnumDescriptorProto", "EnumValueDescriptorProto", "ServiceDescriptorProto",
        "MethodDescriptorProto", "FileOptions", "MessageOptions", "FieldOptions", "OneofOptions",
        "EnumOptions", "EnumValueOptions", "ServiceOptions", "MethodOptions"), ()),
    "google/protobuf/duration.proto": ("google.protobuf", ("Duration",), ()),
    "google/protobuf/empty.proto": ("google.protobuf", ("Empty",), ()),
    "google/protobuf/field_mask.proto": ("google.protobuf", ("FieldMask",), ()),
    "google/protobuf/source_context.proto": ("google.protobuf", ("SourceContext",), ()),
    "google/protobuf/struct.proto": ("google.protobuf", ("Struct", "Value", "ListValue"), ("NullValue",)),
    "google/protobuf/timestamp.proto": ("google.protobuf", ("Timestamp",), ()),
    "google/protobuf/type.proto": ("google.protobuf", ("Type", "Field", "Enum", "EnumValue", "Option"),
                                   ("Syntax",)),
    "google/protobuf/wrappers.proto": ("google.protobuf", (
        "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue",
        "StringValue", "BytesValue"), ()),
    "google/type/calendar_period.proto": ("google.type", (), ("CalendarPeriod",)),
    "google/type/color.proto": ("google.type", ("Color",), ()),
    "google/type/date.proto": ("google.type", ("Date",), ()),
    "google/type/datetime.proto": ("google.type", ("DateTime", "TimeZone"), ()),
    "google/type/dayofweek.proto": ("google.type", (), ("DayOfWeek",)),
    "google/type/expr.proto": ("google.type", ("Expr",), ()),
    "google/type/fraction.proto": ("google.type", ("Fraction",), ()),
    "google/type/latlng.proto": ("google.type", ("LatLng",), ()),
    "google/type/money.proto": ("google.type", ("Money",), ()),
    "google/type/month.proto": ("google.type", (), ("Month",)),
    "google/type/postal_address.proto": ("google.type", ("PostalAddress",), ()),
    "google/type/quaternion.proto": ("google.type", ("Quaternion",), ()),
    "google/type/timeofday.proto": ("google.type", ("TimeOfDay",), ()),
    "confluent/meta.proto": ("confluent", ("Meta",), ()),
    "confluent/type/decimal.proto": ("confluent.type", ("Decimal",), ()),
}


@dataclass(frozen=True, slots=True)
class ProtoField:
    """A field as the wire sees it: number, resolved type (scalar name or ``.full.Name``), label, oneof."""

    name: str
    number: int
    type: str
    label: str  # "optional" (singular, proto3 implicit included), "required" or "repeated"
    oneof: str | None = None
    map_key: str | None = None  # set for map<key, type> fields


@dataclass(frozen=True, slots=True)
class ProtoMessage:
    full_name: str
    fields: Mapping[int, ProtoField]
    reserved: frozenset[int]


@dataclass(frozen=True, slots=True, eq=False)
class ProtobufSchema:
    """A parsed ``.proto`` file: its syntax tree, package, messages by full name and the message tree."""

    tree: ast.File = field(repr=False)
    references: tuple[Reference, ...]
    package: str
    messages: Mapping[str, ProtoMessage] = field(repr=False)
    # Full names of the messages at each nesting level, in declaration order (for message indexes).
    nesting: Mapping[str, tuple[str, ...]] = field(repr=False)
    syntax: str = "proto2"
    # The texts of the files it imports (transitively), by import path; well-known files are not in it.
    imports: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Every type it can name, over the file and its imports: full name → "message" | "enum".
    types: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Derived objects the payload codec builds once per schema (its descriptor pool); schemas are immutable.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.PROTOBUF

    def canonical(self) -> str:
        """The file re-rendered without comments, in Protobuf's standard layout."""
        return str(Generator().generate(_strip(self.tree)))

    def normalized(self) -> str:
        """Also order-free: imports and options sorted, fields by number, nested types by name, and field
        types fully qualified (``.pkg.Msg``), so equal schemas written differently compare equal."""
        return str(Generator().generate(_normalize(_strip(self.tree), self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtobufSchema) and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())


class _Raise(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:
        raise SchemaError(f"Invalid schema: line {line}:{column}: {msg}")


def _setup(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def _parse_tree(text: str, what: str) -> ast.File:
    try:
        return Parser(setup_lexer=_setup, setup_parser=_setup).parse(text)
    except SchemaError as exc:
        if what == "schema":
            raise
        raise SchemaError(f"Invalid schema: {what}: {exc.message.removeprefix('Invalid schema: ')}") from None
    except Exception as exc:  # the parser's own failures on malformed input
        raise SchemaError(f"Invalid schema: {what}: {exc}") from None


def parse_protobuf(
    text: str, references: Sequence[Reference] = (), resolved: Mapping[str, str] | None = None
) -> ProtobufSchema:
    """Parse ``text`` (``.proto``, or a base64 ``FileDescriptorProto``); its imports come from ``resolved``
    (import path → text, transitively) or WELL_KNOWN."""
    resolved = resolved or {}
    for ref in references:
        resolve_reference(ref.name, resolved)
    tree = _parse_tree(_text_of(text), "schema")
    syntax = tree.syntax or "proto2"
    if tree.edition is not None or syntax not in ("proto2", "proto3"):
        raise SchemaError(f"Invalid schema: unsupported syntax {tree.edition or syntax!r} (proto2 or proto3)")
    known: dict[str, str] = {}  # full name → "message" | "enum", over this file and its imports
    seen: set[str] = set()
    _imported_types(tree, resolved, known, seen)
    package = _package(tree)
    collector = _Collector(package, syntax, known)
    collector.declare(tree.file_elements, package)
    collector.collect(tree.file_elements, package)
    imports = {name: _text_of(resolved[name]) for name in sorted(seen) if name in resolved}
    return ProtobufSchema(tree, tuple(references), package, collector.messages, collector.nesting, syntax,
                          imports, dict(known))


def _text_of(text: str) -> str:
    """``.proto`` text; a base64 ``FileDescriptorProto`` (what Confluent's Python and Go serializers register,
    and Confluent's registry accepts) is rendered as ``.proto`` text first."""
    return descriptor_text(text) or text


def _package(tree: ast.File) -> str:
    return next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")


def _imported_types(tree: ast.File, resolved: Mapping[str, str], known: dict[str, str], seen: set[str]) -> None:
    for element in tree.file_elements:
        if not isinstance(element, ast.Import) or element.name in seen:
            continue
        seen.add(element.name)
        if element.name in resolved:
            imported = _parse_tree(_text_of(resolved[element.name]), f"import {element.name!r}")
            _imported_types(imported, resolved, known, seen)
            _declare_types(imported.file_elements, _package(imported), known)
        elif element.name in WELL_KNOWN:
            package, messages, enums = WELL_KNOWN[element.name]
            known.update({f"{package}.{m}": "message" for m in messages})
            known.update({f"{package}.{e}": "enum" for e in enums})
        else:
            raise SchemaError(f"Invalid schema: import {element.name!r} was not resolved (add it as a reference)")


def _declare_types(elements: Sequence[Any], scope: str, known: dict[str, str]) -> None:
    for element in elements:
        if isinstance(element, (ast.Message, ast.Enum)):
            full = f"{scope}.{element.name}" if scope else element.name
            if full in known:
                raise SchemaError(f"Invalid schema: {full!r} is already defined")
            known[full] = "message" if isinstance(element, ast.Message) else "enum"
            if isinstance(element, ast.Message):
                _declare_types(element.elements, full, known)
                for group in _groups(element.elements):
                    known[f"{full}.{group.name}"] = "message"


def _groups(elements: Sequence[Any]) -> list[ast.Group]:
    out = [e for e in elements if isinstance(e, ast.Group)]
    for oneof in (e for e in elements if isinstance(e, ast.OneOf)):
        out += [e for e in oneof.elements if isinstance(e, ast.Group)]
    return out


def _ranges(specs: Sequence[str]) -> set[int]:
    numbers: set[int] = set()
    for spec in specs:
        low, _, high = spec.partition(" to ")
        end = _MAX_FIELD if high.strip() == "max" else int(high or low, 0)
        if end - int(low, 0) > 100_000:  # a huge range: keep its ends (enough to detect reuse at the edges)
            numbers.update((int(low, 0), end))
            continue
        numbers.update(range(int(low, 0), end + 1))
    return numbers


class _Collector:
    """Validates declarations and builds the message table: numbers, reserved names, type resolution."""

    def __init__(self, package: str, syntax: str, known: dict[str, str]) -> None:
        self.package, self.syntax, self.known = package, syntax, known
        self.messages: dict[str, ProtoMessage] = {}
        self.nesting: dict[str, tuple[str, ...]] = {}

    def declare(self, elements: Sequence[Any], scope: str) -> None:
        local: dict[str, str] = {}
        _declare_types(elements, scope, local)
        for name in local:
            if name in self.known:
                raise SchemaError(f"Invalid schema: {name!r} is already defined")
        self.known.update(local)

    def collect(self, elements: Sequence[Any], scope: str) -> None:
        nested = [e for e in elements if isinstance(e, ast.Message)]
        self.nesting[scope] = tuple(f"{scope}.{m.name}" if scope else m.name for m in nested)
        for element in elements:
            if isinstance(element, ast.Message):
                self._message(element, f"{scope}.{element.name}" if scope else element.name)
            elif isinstance(element, ast.Enum):
                self._enum(element, f"{scope}.{element.name}" if scope else element.name)

    def _enum(self, enum: ast.Enum, full: str) -> None:
        values = [e for e in enum.elements if isinstance(e, ast.EnumValue)]
        if not values:
            raise SchemaError(f"Invalid schema: enum {full!r} has no values")
        if self.syntax == "proto3" and values[0].number != 0:
            raise SchemaError(f"Invalid schema: the first value of enum {full!r} must be zero in proto3")

    def _message(self, message: ast.Message, full: str) -> None:
        reserved: set[int] = set()
        reserved_names: set[str] = set()
        for element in message.elements:
            if isinstance(element, ast.Reserved):
                reserved |= _ranges(element.ranges)
                reserved_names.update(n.strip("\"'") for n in element.names)
        fields: dict[int, ProtoField] = {}
        for element, oneof in _fields(message.elements):
            proto_field = self._field(element, oneof, full)
            where = f"field {proto_field.name!r} of {full!r}"
            if not 1 <= proto_field.number <= _MAX_FIELD or 19000 <= proto_field.number <= 19999:
                raise SchemaError(f"Invalid schema: {where} has an invalid number {proto_field.number}")
            if proto_field.number in fields:
                raise SchemaError(f"Invalid schema: {where} reuses number {proto_field.number} "
                                  f"of {fields[proto_field.number].name!r}")
            if proto_field.number in reserved or proto_field.name in reserved_names:
                raise SchemaError(f"Invalid schema: {where} uses a reserved number or name")
            fields[proto_field.number] = proto_field
        self.messages[full] = ProtoMessage(full, fields, frozenset(reserved))
        groups = [ast.Message(name=g.name, elements=g.elements) for g in _groups(message.elements)]
        self.collect([*message.elements, *groups], full)

    def _field(self, element: Any, oneof: str | None, scope: str) -> ProtoField:
        if isinstance(element, ast.MapField):
            key = element.key_type
            if key not in SCALARS or key in ("float", "double", "bytes"):
                raise SchemaError(f"Invalid schema: map field {element.name!r} has an invalid key type {key!r}")
            return ProtoField(element.name, element.number, self.resolve(element.value_type, scope), "repeated",
                              oneof, key)
        if isinstance(element, ast.Group):
            label = (element.cardinality or ast.FieldCardinality.OPTIONAL).value.lower()
            return ProtoField(element.name.lower(), element.number, f".{scope}.{element.name}", label, oneof)
        label = (element.cardinality or ast.FieldCardinality.OPTIONAL).value.lower()
        if label == "required" and self.syntax == "proto3":
            raise SchemaError(f"Invalid schema: field {element.name!r}: required fields are not allowed in proto3")
        return ProtoField(element.name, element.number, self.resolve(element.type, scope), label, oneof)

    def resolve(self, name: str, scope: str) -> str:
        """A type reference as ``.full.Name`` (or the scalar), searched from the innermost scope out."""
        if name in SCALARS:
            return name
        if name.startswith("."):
            if name[1:] in self.known:
                return name
        else:
            parts = scope.split(".") if scope else []
            for depth in range(len(parts), -1, -1):
                candidate = ".".join([*parts[:depth], name])
                if candidate in self.known:
                    return f".{candidate}"
        raise SchemaError(f"Invalid schema: type {name!r} used in {scope!r} is not defined or imported")


def _fields(elements: Sequence[Any]) -> list[tuple[Any, str | None]]:
    out: list[tuple[Any, str | None]] = []
    for element in elements:
        if isinstance(element, (ast.Field, ast.MapField, ast.Group)):
            out.append((element, None))
        elif isinstance(element, ast.OneOf):
            out += [(e, element.name) for e in element.elements if isinstance(e, (ast.Field, ast.Group))]
    return out


def _strip(node: Any) -> Any:
    """The tree without comments."""
    for attr in ("file_elements", "elements"):
        if hasattr(node, attr):
            kept = [_strip(e) for e in getattr(node, attr) if not isinstance(e, ast.Comment)]
            return dataclasses.replace(node, **{attr: kept})
    return node


def _normalize(node: Any, schema: ProtobufSchema, scope: str | None = None) -> Any:
    if isinstance(node, ast.File):
        imports = sorted((e for e in node.file_elements if isinstance(e, ast.Import)), key=lambda e: e.name)
        options = sorted((e for e in node.file_elements if isinstance(e, ast.Option)), key=lambda e: e.name)
        package = [e for e in node.file_elements if isinstance(e, ast.Package)]
        types = sorted((_normalize(e, schema, schema.package) for e in node.file_elements
                        if isinstance(e, (ast.Message, ast.Enum))), key=lambda e: e.name)
        rest: list[Any] = [e for e in node.file_elements if not isinstance(e, (ast.Import, ast.Option, ast.Package,
                                                                       ast.Message, ast.Enum))]
        return dataclasses.replace(node, file_elements=[*package, *imports, *options, *types, *rest])
    if isinstance(node, ast.Message):
        full = f"{scope}.{node.name}" if scope else node.name
        message = schema.messages.get(full)

        def qualified(element: Any) -> Any:
            if message is None or not isinstance(element, (ast.Field, ast.MapField)):
                return element
            resolved = message.fields[element.number].type
            if isinstance(element, ast.MapField):
                return dataclasses.replace(element, value_type=resolved)
            return dataclasses.replace(element, type=resolved)

        def number(element: Any) -> int:
            if isinstance(element, ast.OneOf):
                return min((e.number for e in element.elements if hasattr(e, "number")), default=0)
            return int(element.number)

        options = sorted((e for e in node.elements if isinstance(e, ast.Option)), key=lambda e: e.name)
        fields = sorted(
            (qualified(e) if not isinstance(e, ast.OneOf)
             else dataclasses.replace(e, elements=sorted((qualified(f) for f in e.elements), key=number))
             for e in node.elements if isinstance(e, (ast.Field, ast.MapField, ast.Group, ast.OneOf))), key=number)
        types = sorted((_normalize(e, schema, full) for e in node.elements if isinstance(e, (ast.Message, ast.Enum))),
                       key=lambda e: e.name)
        placed = (ast.Option, ast.Field, ast.MapField, ast.Group, ast.OneOf, ast.Message, ast.Enum)
        others: list[Any] = [e for e in node.elements if not isinstance(e, placed)]
        return dataclasses.replace(node, elements=[*options, *fields, *types, *others])
    return node


def message_indexes(schema: ProtobufSchema, full_name: str) -> list[int]:
    """Confluent's message indexes of ``full_name`` (with or without the package): the position of the
    message among its siblings at each nesting level, outermost first (``[0]``: the first message)."""
    name = full_name.lstrip(".")
    if name not in schema.messages and schema.package:
        name = f"{schema.package}.{name}"
    if name not in schema.messages:
        raise KeyError(f"no message {full_name!r} in the schema")
    indexes: list[int] = []
    scope = name
    while scope != schema.package and scope:
        parent = scope.rsplit(".", 1)[0] if "." in scope else ""
        indexes.append(schema.nesting[parent].index(scope))
        scope = parent
    return indexes[::-1]


def message_name(schema: ProtobufSchema, indexes: Sequence[int]) -> str:
    """The full name of the message that ``indexes`` designate (the inverse of ``message_indexes``)."""
    scope = schema.package
    for index in indexes or [0]:
        siblings = schema.nesting.get(scope, ())
        if not 0 <= index < len(siblings):
            raise KeyError(f"message indexes {list(indexes)} designate no message")
        scope = siblings[index]
    return scope


# -- compatibility -------------------------------------------------------------------------------------------

def _relative(name: str, package: str) -> str:
    """A full name without the package, so messages are matched across a package change once."""
    name = name.lstrip(".")
    return name[len(package) + 1:] if package and name.startswith(package + ".") else name


def protobuf_compatibility(original: ProtobufSchema, update: ProtobufSchema) -> list[str]:
    """The incompatible differences from ``original`` to ``update`` (Confluent's rules, see the module)."""
    problems: list[str] = []
    if original.package != update.package:
        problems.append(f"PACKAGE_CHANGED at '#/': {original.package!r} to {update.package!r}")
    updated = {_relative(n, update.package): m for n, m in update.messages.items()}
    for name, message in original.messages.items():
        relative = _relative(name, original.package)
        if relative not in updated:
            problems.append(f"MESSAGE_REMOVED at '#/{relative}': message {relative!r} was removed")
            continue
        problems += _compare_message(message, updated[relative], original.package, update.package, relative)
    return problems


def _compare_message(original: ProtoMessage, update: ProtoMessage, o_pkg: str, u_pkg: str, where: str) -> list[str]:
    problems: list[str] = []
    for number, new in update.fields.items():
        path = f"#/{where}/{number}"
        old = original.fields.get(number)
        if old is None:
            if new.label == "required":
                problems.append(f"REQUIRED_FIELD_ADDED at '{path}': required field {new.name!r} added")
            continue
        problems += _compare_field(old, new, o_pkg, u_pkg, path)
    for number, old in original.fields.items():
        if number in update.fields:
            continue
        path = f"#/{where}/{number}"
        if old.label == "required":
            problems.append(f"REQUIRED_FIELD_REMOVED at '{path}': required field {old.name!r} removed")
        if old.oneof is not None and any(f.oneof == old.oneof for f in update.fields.values()):
            problems.append(f"ONEOF_FIELD_REMOVED at '{path}': field {old.name!r} left oneof {old.oneof!r}")
    problems += _compare_oneofs(original, update, where)
    return problems


def _compare_field(old: ProtoField, new: ProtoField, o_pkg: str, u_pkg: str, path: str) -> list[str]:
    problems: list[str] = []
    old_scalar, new_scalar = old.type in SCALARS, new.type in SCALARS
    if (old.map_key is None) != (new.map_key is None) or old_scalar != new_scalar:
        problems.append(f"FIELD_KIND_CHANGED at '{path}': {_describe(old)} to {_describe(new)}")
        return problems
    if old.map_key is not None and new.map_key is not None and _WIRE_GROUP[old.map_key] != _WIRE_GROUP[new.map_key]:
        problems.append(f"FIELD_SCALAR_KIND_CHANGED at '{path}': map key {old.map_key} to {new.map_key}")
    if old_scalar:
        if _WIRE_GROUP[old.type] != _WIRE_GROUP[new.type]:
            problems.append(f"FIELD_SCALAR_KIND_CHANGED at '{path}': {old.type} to {new.type}")
    elif _relative(old.type, o_pkg) != _relative(new.type, u_pkg):
        problems.append(f"FIELD_NAMED_TYPE_CHANGED at '{path}': {old.type.lstrip('.')} to {new.type.lstrip('.')}")
    if old.label != new.label:
        if "required" in (old.label, new.label):
            kind = "REQUIRED_FIELD_ADDED" if new.label == "required" else "REQUIRED_FIELD_REMOVED"
            problems.append(f"{kind} at '{path}': {old.label} to {new.label}")
        elif old.type in _NUMERIC or new.type in _NUMERIC:
            problems.append(f"FIELD_NUMERIC_LABEL_CHANGED at '{path}': {old.label} to {new.label}")
    return problems


def _describe(f: ProtoField) -> str:
    if f.map_key is not None:
        return f"map<{f.map_key}, {f.type.lstrip('.')}>"
    return f.type.lstrip(".")


def _compare_oneofs(original: ProtoMessage, update: ProtoMessage, where: str) -> list[str]:
    problems: list[str] = []
    old_oneofs = {f.oneof for f in original.fields.values() if f.oneof}
    moved: dict[str, list[int]] = {}
    for number, new in update.fields.items():
        old = original.fields.get(number)
        if old is None or new.oneof is None or old.oneof == new.oneof:
            continue
        if old.oneof is None and new.oneof in old_oneofs:
            problems.append(f"FIELD_MOVED_TO_EXISTING_ONEOF at '#/{where}/{number}': "
                            f"{new.name!r} moved into oneof {new.oneof!r}")
        else:
            moved.setdefault(new.oneof, []).append(number)
    for oneof, numbers in moved.items():
        if len(numbers) > 1:
            problems.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF at '#/{where}/{oneof}': fields {numbers} moved into "
                            f"oneof {oneof!r}")
    for number, old in original.fields.items():
        new_field = update.fields.get(number)
        if old.oneof and new_field is not None and new_field.oneof is None \
                and any(f.oneof == old.oneof for f in update.fields.values()):
            problems.append(f"ONEOF_FIELD_REMOVED at '#/{where}/{number}': {old.name!r} left oneof {old.oneof!r}")
    return problems
