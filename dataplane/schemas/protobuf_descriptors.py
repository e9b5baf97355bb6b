"""A parsed Protobuf schema as the ``FileDescriptorProto``s protoc would produce, and a descriptor pool of them.

The syntax tree from ``proto-schema-parser`` is converted here (no protoc at run time, decision 0027): types
come already resolved from ``parse_protobuf`` (``.full.Name``), map fields get protoc's synthetic
``XxxEntry`` messages, groups their nested message, proto3 ``optional`` its synthetic oneof. Google's
well-known files come from the ``protobuf`` and ``googleapis-common-protos`` packages, Confluent's two from
the short texts below, so a schema never needs references for them.
"""

from __future__ import annotations

import base64
import codecs
import importlib
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from proto_schema_parser import ast

from dataplane.schemas.base import SchemaError
from dataplane.schemas.protobuf import WELL_KNOWN, ProtobufSchema, parse_protobuf
from dataplane.schemas.protobuf_text import (
    MAX_ENUM,
    MAX_FIELD_END,
    SCALAR_TYPES,
    json_name,
    map_entry_name,
)

F = descriptor_pb2.FieldDescriptorProto  # (untyped: protobuf ships no stubs)
MAIN_FILE = "schema.proto"
_LABELS = {"OPTIONAL": F.LABEL_OPTIONAL, "REQUIRED": F.LABEL_REQUIRED, "REPEATED": F.LABEL_REPEATED}

# Confluent's own files (as Confluent ships them, options and extensions aside: the wire does not need them).
CONFLUENT_FILES = {
    "confluent/meta.proto": 'syntax = "proto3";\npackage confluent;\nimport "google/protobuf/descriptor.proto";\n'
                            "message Meta {\n  string doc = 1;\n  map<string, string> params = 2;\n"
                            "  repeated string tags = 3;\n}\n",
    "confluent/type/decimal.proto": 'syntax = "proto3";\npackage confluent.type;\n'
                                    "message Decimal {\n  bytes value = 1;\n  uint32 precision = 2;\n"
                                    "  int32 scale = 3;\n}\n",
}


def file_descriptors(schema: ProtobufSchema, name: str = MAIN_FILE) -> list[descriptor_pb2.FileDescriptorProto]:
    """The schema's own file (named ``name``, or a variant of it that no import uses) last, after the user files
    it imports, each after its imports. Well-known files are not included: :func:`build_pool` adds them."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    done: set[str] = set()

    def add(path: str) -> None:
        if path in done or path not in schema.imports:
            return
        done.add(path)
        imported = parse_protobuf(schema.imports[path], (), schema.imports)
        for dependency in _imports(imported.tree):
            add(dependency.name)
        out.append(file_descriptor(imported, path))

    for dependency in _imports(schema.tree):
        add(dependency.name)
    while name in done or name in WELL_KNOWN:  # the schema's own file has no path: any free name does
        name = "_" + name
    out.append(file_descriptor(schema, name))
    return out


def serialized_descriptor(schema: ProtobufSchema) -> str:
    """The schema's own ``FileDescriptorProto`` in base64: Confluent's ``format=serialized`` answer, which its
    Python and Go deserializers ask for (they load it, and each reference likewise, into their pool)."""
    return base64.b64encode(file_descriptors(schema)[-1].SerializeToString()).decode("ascii")


def build_pool(schema: ProtobufSchema) -> descriptor_pool.DescriptorPool:
    """A private pool holding the schema's file (as :data:`MAIN_FILE`), its imports and the well-known files."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for proto in file_descriptors(schema):
        for dependency in proto.dependency:
            _add_well_known(pool, dependency, added)
        pool.AddSerializedFile(proto.SerializeToString())
        added.add(proto.name)
    return pool


def _add_well_known(pool: descriptor_pool.DescriptorPool, name: str, added: set[str]) -> None:
    if name in added or name not in WELL_KNOWN:
        return
    added.add(name)
    if name in CONFLUENT_FILES:
        parsed = parse_protobuf(CONFLUENT_FILES[name])
        for dependency in _imports(parsed.tree):
            _add_well_known(pool, dependency.name, added)
        pool.AddSerializedFile(file_descriptor(parsed, name).SerializeToString())
        return
    module_name = name.removesuffix(".proto").replace("/", ".") + "_pb2"
    try:
        module: Any = importlib.import_module(module_name)
    except ImportError:
        raise SchemaError(f"Invalid schema: {name!r} is not available (install googleapis-common-protos)") from None
    for dependency in module.DESCRIPTOR.dependencies:
        _add_well_known(pool, dependency.name, added)
    pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)


def _imports(tree: ast.File) -> list[ast.Import]:
    return [e for e in tree.file_elements if isinstance(e, ast.Import)]


def file_descriptor(schema: ProtobufSchema, name: str) -> descriptor_pb2.FileDescriptorProto:
    """One file's descriptor, as protoc writes it (json names filled in, type names fully qualified)."""
    proto = descriptor_pb2.FileDescriptorProto(name=name)
    if schema.package:
        proto.package = schema.package
    if schema.syntax == "proto3":
        proto.syntax = "proto3"
    for index, imported in enumerate(_imports(schema.tree)):
        proto.dependency.append(imported.name)
        if imported.public:
            proto.public_dependency.append(index)
        if imported.weak:
            proto.weak_dependency.append(index)
    builder = _Builder(schema)
    for element in schema.tree.file_elements:
        if isinstance(element, ast.Message):
            full = f"{schema.package}.{element.name}" if schema.package else element.name
            builder.message(element, full, proto.message_type.add())
        elif isinstance(element, ast.Enum):
            _enum(element, proto.enum_type.add())
    return proto


class _Builder:
    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        self.proto3 = schema.syntax == "proto3"

    def message(self, message: ast.Message, full: str, out: descriptor_pb2.DescriptorProto) -> None:
        out.name = message.name
        resolved = self.schema.messages[full].fields
        synthetic: list[Any] = []
        for element in message.elements:
            if isinstance(element, ast.Field):
                field = self.field(element, resolved[element.number].type, out.field.add())
                if self.proto3 and element.cardinality == ast.FieldCardinality.OPTIONAL:
                    field.proto3_optional = True
                    synthetic.append(field)
            elif isinstance(element, ast.MapField):
                self.map_field(element, resolved[element.number].type, full, out)
            elif isinstance(element, ast.Group):
                self.group(element, full, out)
            elif isinstance(element, ast.OneOf):
                out.oneof_decl.add(name=element.name)
                index = len(out.oneof_decl) - 1
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        self.field(member, resolved[member.number].type, out.field.add()).oneof_index = index
                    elif isinstance(member, ast.Group):
                        self.group(member, full, out).oneof_index = index
            elif isinstance(element, ast.Message):
                self.message(element, f"{full}.{element.name}", out.nested_type.add())
            elif isinstance(element, ast.Enum):
                _enum(element, out.enum_type.add())
            elif isinstance(element, ast.ExtensionRange):
                for start, end in _spans(element.ranges, MAX_FIELD_END - 1):
                    out.extension_range.add(start=start, end=end + 1)
            elif isinstance(element, ast.Reserved):
                for start, end in _spans(element.ranges, MAX_FIELD_END - 1):
                    out.reserved_range.add(start=start, end=end + 1)
                out.reserved_name.extend(n.strip("\"'") for n in element.names)
        taken = {o.name for o in out.oneof_decl} | {f.name for f in out.field}
        for field in synthetic:  # after the real oneofs, as protoc places them
            oneof = "_" + field.name
            while oneof in taken:
                oneof = "X" + oneof
            taken.add(oneof)
            out.oneof_decl.add(name=oneof)
            field.oneof_index = len(out.oneof_decl) - 1

    def field(self, element: ast.Field, resolved: str, out: Any) -> Any:
        out.name, out.number = element.name, element.number
        out.label = _LABELS[(element.cardinality or ast.FieldCardinality.OPTIONAL).value]
        self.typed(resolved, out)
        out.json_name = json_name(element.name)
        for option in element.options:
            if option.name == "json_name":
                out.json_name = str(option.value)
            elif option.name == "packed":
                out.options.packed = option.value is True
            elif option.name == "default":
                out.default_value = _default(option.value, out.type)
            elif option.name == "deprecated":
                out.options.deprecated = option.value is True
        return out

    def typed(self, resolved: str, out: Any) -> None:
        if resolved in SCALAR_TYPES:
            out.type = SCALAR_TYPES[resolved]
            return
        out.type_name = resolved
        kind = self.schema.types.get(resolved.lstrip("."), "message")
        out.type = F.TYPE_ENUM if kind == "enum" else F.TYPE_MESSAGE

    def map_field(self, element: ast.MapField, value_type: str, scope: str,
                  out: descriptor_pb2.DescriptorProto) -> None:
        entry = out.nested_type.add(name=map_entry_name(element.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, json_name="key")
        key.type = SCALAR_TYPES[element.key_type]
        value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, json_name="value")
        self.typed(value_type, value)
        field = out.field.add(name=element.name, number=element.number, label=F.LABEL_REPEATED,
                              type=F.TYPE_MESSAGE, type_name=f".{scope}.{entry.name}",
                              json_name=json_name(element.name))
        for option in element.options:
            if option.name == "json_name":
                field.json_name = str(option.value)

    def group(self, element: ast.Group, scope: str, out: Any) -> Any:
        self.message(ast.Message(name=element.name, elements=element.elements), f"{scope}.{element.name}",
                     out.nested_type.add())
        name = element.name.lower()
        return out.field.add(name=name, number=element.number, type=F.TYPE_GROUP, type_name=f".{scope}.{element.name}",
                             label=_LABELS[(element.cardinality or ast.FieldCardinality.OPTIONAL).value],
                             json_name=json_name(name))


def _enum(enum: ast.Enum, out: descriptor_pb2.EnumDescriptorProto) -> None:
    out.name = enum.name
    for element in enum.elements:
        if isinstance(element, ast.EnumValue):
            out.value.add(name=element.name, number=element.number)
        elif isinstance(element, ast.Option) and element.name == "allow_alias":
            out.options.allow_alias = element.value is True
        elif isinstance(element, ast.EnumReserved):
            for start, end in _spans(element.ranges, MAX_ENUM):
                out.reserved_range.add(start=start, end=end)
            out.reserved_name.extend(n.strip("\"'") for n in element.names)


def _spans(specs: Sequence[str], maximum: int) -> list[tuple[int, int]]:
    """Inclusive (start, end) pairs of ``a``, ``a to b``, ``a to max``."""
    spans = []
    for spec in specs:
        low, _, high = spec.partition(" to ")
        end = maximum if high.strip() == "max" else int(high or low, 0)
        spans.append((int(low, 0), end))
    return spans


def _default(value: Any, field_type: int) -> str:
    """A ``[default = ...]`` as a descriptor carries it: strings unescaped, bytes left C-escaped."""
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and field_type == F.TYPE_STRING and "\\" in value:
        raw: Any = codecs.escape_decode(value.encode())[0]  # bytes (typeshed says str)
        return str(raw.decode("utf-8", "replace"))
    return str(value)
