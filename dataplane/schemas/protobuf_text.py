"""A ``FileDescriptorProto`` rendered as ``.proto`` text, and the naming rules protoc applies to descriptors.

Confluent's Python and Go serializers register a Protobuf schema as its base64 ``FileDescriptorProto``, and
Confluent's registry turns it into ``.proto`` text; :func:`descriptor_text` does the same so the registry
stores, compares and serves one form. Only what the wire and the JSON mapping need is rendered: messages,
fields (labels, ``packed``, ``json_name``, ``default``), maps, groups, oneofs, enums, reserved and extension
ranges, imports and the package; options other than those, extensions and services are dropped.
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

F = descriptor_pb2.FieldDescriptorProto
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
MAX_FIELD_END = 536_870_912  # 2^29: the exclusive end of ``max`` in a descriptor's field ranges
MAX_ENUM = 2_147_483_647

SCALAR_TYPES: dict[str, int] = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
_SCALAR_NAMES = {number: name for name, number in SCALAR_TYPES.items()}


def json_name(field_name: str) -> str:
    """protoc's default JSON name: underscores dropped, the letter after each one upper-cased."""
    out: list[str] = []
    upper = False
    for char in field_name:
        if char == "_":
            upper = True
        else:
            out.append(char.upper() if upper else char)
            upper = False
    return "".join(out)


def map_entry_name(field_name: str) -> str:
    """protoc's name for a map field's synthetic entry message (``my_map`` → ``MyMapEntry``)."""
    camel = json_name(field_name)
    return camel[:1].upper() + camel[1:] + "Entry"


def descriptor_text(text: str) -> str | None:
    """``text`` read as a base64 ``FileDescriptorProto``, rendered as ``.proto``; None when it is not one."""
    if not _BASE64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not (proto.message_type or proto.enum_type or proto.package or proto.syntax or proto.dependency):
        return None
    return render(proto)


def render(proto: descriptor_pb2.FileDescriptorProto) -> str:
    lines = [f'syntax = "{proto.syntax or "proto2"}";']
    if proto.package:
        lines.append(f"package {proto.package};")
    for index, dependency in enumerate(proto.dependency):
        kind = "public " if index in proto.public_dependency else "weak " if index in proto.weak_dependency else ""
        lines.append(f'import {kind}"{dependency}";')
    proto3 = proto.syntax == "proto3"
    for message in proto.message_type:
        lines += _message(message, proto3, "")
    for enum in proto.enum_type:
        lines += _enum(enum, "")
    return "\n".join(lines) + "\n"


def _ranges(ranges: list[tuple[int, int]], maximum: int) -> str:
    """``a``, ``a to b``, ``a to max`` from inclusive (start, end) pairs."""
    parts = []
    for start, end in ranges:
        if end >= maximum:
            parts.append(f"{start} to max")
        else:
            parts.append(str(start) if start == end else f"{start} to {end}")
    return ", ".join(parts)


def _message(message: descriptor_pb2.DescriptorProto, proto3: bool, indent: str) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}message {message.name} {{"]
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    groups = {f.type_name.rsplit(".", 1)[-1] for f in message.field if f.type == F.TYPE_GROUP}
    real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
    done_oneofs: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            if field.oneof_index in done_oneofs:
                continue
            done_oneofs.add(field.oneof_index)
            lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                    lines += _field(member, message, entries, proto3, inner + "  ", in_oneof=True)
            lines.append(f"{inner}}}")
            continue
        lines += _field(field, message, entries, proto3, inner, in_oneof=False)
    for nested in message.nested_type:
        if nested.name not in entries and nested.name not in groups:
            lines += _message(nested, proto3, inner)
    for enum in message.enum_type:
        lines += _enum(enum, inner)
    if message.extension_range:
        spans = [(r.start, r.end - 1) for r in message.extension_range]
        lines.append(f"{inner}extensions {_ranges(spans, MAX_FIELD_END - 1)};")
    if message.reserved_range:
        spans = [(r.start, r.end - 1) for r in message.reserved_range]
        lines.append(f"{inner}reserved {_ranges(spans, MAX_FIELD_END - 1)};")
    if message.reserved_name:
        lines.append(f"{inner}reserved {', '.join(_quote(n) for n in message.reserved_name)};")
    lines.append(f"{indent}}}")
    return lines


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return _SCALAR_NAMES.get(field.type) or field.type_name


def _field(field: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto,
           entries: dict[str, descriptor_pb2.DescriptorProto], proto3: bool, indent: str, *,
           in_oneof: bool) -> list[str]:
    options = _field_options(field)
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type == F.TYPE_MESSAGE else None
    if entry is not None and field.label == F.LABEL_REPEATED:
        key, value = entry.field[0], entry.field[1]
        return [f"{indent}map<{_type(key)}, {_type(value)}> {field.name} = {field.number}{options};"]
    if in_oneof:
        label = ""
    elif field.label == F.LABEL_REPEATED:
        label = "repeated "
    elif field.label == F.LABEL_REQUIRED:
        label = "required "
    elif not proto3 or field.proto3_optional:
        label = "optional "
    else:
        label = ""
    if field.type == F.TYPE_GROUP:
        group = next(n for n in message.nested_type if n.name == field.type_name.rsplit(".", 1)[-1])
        body = _message(group, proto3, indent)
        return [f"{indent}{label}group {group.name} = {field.number}{options} {{", *body[1:]]
    return [f"{indent}{label}{_type(field)} {field.name} = {field.number}{options};"]


def _field_options(field: descriptor_pb2.FieldDescriptorProto) -> str:
    options: list[str] = []
    if field.HasField("default_value"):
        if field.type == F.TYPE_STRING:
            options.append(f"default = {_quote(field.default_value)}")
        elif field.type == F.TYPE_BYTES:
            options.append(f'default = "{field.default_value}"')  # already C-escaped in a descriptor
        else:
            options.append(f"default = {field.default_value}")
    if field.HasField("json_name") and field.json_name != json_name(field.name):
        options.append(f"json_name = {_quote(field.json_name)}")
    if field.options.HasField("packed"):
        options.append(f"packed = {str(field.options.packed).lower()}")
    if field.options.deprecated:
        options.append("deprecated = true")
    return f" [{', '.join(options)}]" if options else ""


def _enum(enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}enum {enum.name} {{"]
    if enum.options.allow_alias:
        lines.append(f"{inner}option allow_alias = true;")
    lines += [f"{inner}{value.name} = {value.number};" for value in enum.value]
    if enum.reserved_range:
        lines.append(f"{inner}reserved {_ranges([(r.start, r.end) for r in enum.reserved_range], MAX_ENUM)};")
    if enum.reserved_name:
        lines.append(f"{inner}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    lines.append(f"{indent}}}")
    return lines


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
