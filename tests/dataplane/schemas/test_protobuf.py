"""Protobuf: parse errors, stored forms, imports, message indexes and Confluent's compatibility rules.

Outcomes follow Confluent's protobuf SchemaDiff (fields matched by number; compatible: additions, field
removal and renaming, enum value changes, wire-compatible scalar groups), plus our stricter package rule.
"""

from __future__ import annotations

import pytest

from dataplane.schemas import (
    Reference,
    SchemaError,
    message_indexes,
    message_name,
    parse_protobuf,
    protobuf_compatibility,
)


def p3(body: str, package: str = "acme") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def msg(fields: str, name: str = "M") -> str:
    return p3(f"message {name} {{ {fields} }}")


def p2(fields: str) -> str:
    return f'syntax = "proto2";\npackage acme;\nmessage M {{ {fields} }}\n'


TWO = "message Other { string s = 1; } message Third { int32 t = 1; }"
# (case, old, new, error for BACKWARD (old → new), error for FORWARD (new → old))
CASES = [
    ("field_added", msg("int32 a = 1;"), msg("int32 a = 1; string b = 2;"), None, None),
    ("field_removed", msg("int32 a = 1; string b = 2;"), msg("int32 a = 1;"), None, None),
    ("field_removed_and_reserved", msg("int32 a = 1; string b = 2;"), msg("int32 a = 1; reserved 2;"), None, None),
    ("field_renamed", msg("int32 a = 1;"), msg("int32 renamed = 1;"), None, None),
    ("field_renumbered_is_a_removal_plus_an_addition", msg("int32 a = 1;"), msg("int32 a = 2;"), None, None),
    ("int32_to_int64", msg("int32 a = 1;"), msg("int64 a = 1;"), None, None),
    ("uint64_to_bool", msg("uint64 a = 1;"), msg("bool a = 1;"), None, None),
    ("int32_to_sint32", msg("int32 a = 1;"), msg("sint32 a = 1;"),
     "FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"),
    ("sint32_to_sint64", msg("sint32 a = 1;"), msg("sint64 a = 1;"), None, None),
    ("fixed32_to_sfixed32", msg("fixed32 a = 1;"), msg("sfixed32 a = 1;"), None, None),
    ("fixed32_to_fixed64", msg("fixed32 a = 1;"), msg("fixed64 a = 1;"),
     "FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"),
    ("float_to_double", msg("float a = 1;"), msg("double a = 1;"),
     "FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"),
    ("string_to_bytes", msg("string a = 1;"), msg("bytes a = 1;"), None, None),
    ("string_to_int32", msg("string a = 1;"), msg("int32 a = 1;"),
     "FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"),
    ("scalar_to_message", p3("message M { string a = 1; } message N {}"), p3("message M { N a = 1; } message N {}"),
     "FIELD_KIND_CHANGED", "FIELD_KIND_CHANGED"),
    ("message_type_changed", p3(f"message M {{ Other a = 1; }} {TWO}"), p3(f"message M {{ Third a = 1; }} {TWO}"),
     "FIELD_NAMED_TYPE_CHANGED", "FIELD_NAMED_TYPE_CHANGED"),
    ("message_removed", p3(f"message M {{ int32 a = 1; }} {TWO}"), p3("message M { int32 a = 1; }"),
     "MESSAGE_REMOVED", None),
    ("nested_message_field_changed", msg("message N { int32 x = 1; } N n = 1;"),
     msg("message N { string x = 1; } N n = 1;"), "'#/M.N/1'", "'#/M.N/1'"),
    ("enum_value_added", msg("enum E { A = 0; B = 1; } E e = 1;"), msg("enum E { A = 0; B = 1; C = 2; } E e = 1;"),
     None, None),
    ("enum_value_renamed", msg("enum E { A = 0; B = 1; } E e = 1;"), msg("enum E { A = 0; BEE = 1; } E e = 1;"),
     None, None),
    ("enum_type_changed", p3("message M { E e = 1; } enum E { A = 0; } enum F { X = 0; }"),
     p3("message M { F e = 1; } enum E { A = 0; } enum F { X = 0; }"),
     "FIELD_NAMED_TYPE_CHANGED", "FIELD_NAMED_TYPE_CHANGED"),
    ("repeated_numeric_to_singular", msg("repeated int32 a = 1;"), msg("int32 a = 1;"),
     "FIELD_NUMERIC_LABEL_CHANGED", "FIELD_NUMERIC_LABEL_CHANGED"),
    ("repeated_string_to_singular", msg("repeated string a = 1;"), msg("string a = 1;"), None, None),
    ("proto3_implicit_to_optional", msg("int32 a = 1;"), msg("optional int32 a = 1;"), None, None),
    ("proto2_required_field_added", p2("optional int32 a = 1;"), p2("optional int32 a = 1; required int32 b = 2;"),
     "REQUIRED_FIELD_ADDED", "REQUIRED_FIELD_REMOVED"),
    ("proto2_optional_became_required", p2("optional int32 a = 1;"), p2("required int32 a = 1;"),
     "REQUIRED_FIELD_ADDED", "REQUIRED_FIELD_REMOVED"),
    ("package_changed", msg("int32 a = 1;"), p3("message M { int32 a = 1; }", package="other"),
     "PACKAGE_CHANGED", "PACKAGE_CHANGED"),
    ("oneof_field_removed", msg("oneof o { int32 a = 1; string b = 2; }"), msg("oneof o { int32 a = 1; }"),
     "ONEOF_FIELD_REMOVED", None),
    ("one_field_moved_to_new_oneof", msg("int32 a = 1;"), msg("oneof o { int32 a = 1; }"), None, None),
    ("two_fields_moved_to_new_oneof", msg("int32 a = 1; string b = 2;"), msg("oneof o { int32 a = 1; string b = 2; }"),
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF", None),
    ("field_moved_to_existing_oneof", msg("oneof o { int32 a = 1; } string b = 2;"),
     msg("oneof o { int32 a = 1; string b = 2; }"), "FIELD_MOVED_TO_EXISTING_ONEOF", "ONEOF_FIELD_REMOVED"),
    ("reserved_number_reused_is_not_reported_as_in_confluent", msg("int32 a = 1; reserved 2;"),
     msg("int32 a = 1; string b = 2;"), None, None),
    ("map_value_type_changed", msg("map<string, int32> m = 1;"), msg("map<string, string> m = 1;"),
     "FIELD_SCALAR_KIND_CHANGED", "FIELD_SCALAR_KIND_CHANGED"),
    ("map_to_scalar", msg("map<string, int32> m = 1;"), msg("int32 m = 1;"),
     "FIELD_KIND_CHANGED", "FIELD_KIND_CHANGED"),
    ("well_known_type_changed",
     p3('import "google/protobuf/timestamp.proto";\nimport "google/protobuf/duration.proto";\n'
        "message M { google.protobuf.Timestamp t = 1; }"),
     p3('import "google/protobuf/timestamp.proto";\nimport "google/protobuf/duration.proto";\n'
        "message M { google.protobuf.Duration t = 1; }"),
     "FIELD_NAMED_TYPE_CHANGED", "FIELD_NAMED_TYPE_CHANGED"),
]


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_backward(old: str, new: str, error: str | None) -> None:
    problems = protobuf_compatibility(parse_protobuf(old), parse_protobuf(new))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[4]) for c in CASES], ids=[c[0] for c in CASES])
def test_forward(old: str, new: str, error: str | None) -> None:
    problems = protobuf_compatibility(parse_protobuf(new), parse_protobuf(old))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


PARSE_ERRORS = [
    ("syntax_error", "message {", "line 1:8"),
    ("unknown_type", msg("Foo a = 1;"), "type 'Foo' used in 'acme.M' is not defined or imported"),
    ("duplicate_field_number", msg("int32 a = 1; int32 b = 1;"), "reuses number 1 of 'a'"),
    ("reserved_number_used", msg("reserved 2 to 4; int32 a = 3;"), "uses a reserved number or name"),
    ("reserved_name_used", msg('reserved "a"; int32 a = 1;'), "uses a reserved number or name"),
    ("field_number_zero", msg("int32 a = 0;"), "invalid number 0"),
    ("field_number_in_implementation_range", msg("int32 a = 19000;"), "invalid number 19000"),
    ("proto3_required", msg("required int32 a = 1;"), "required fields are not allowed in proto3"),
    ("proto3_enum_first_value_not_zero", msg("enum E { A = 1; }"), "must be zero in proto3"),
    ("unresolved_import", p3('import "other.proto";\nmessage M {}'), "import 'other.proto' was not resolved"),
    ("duplicate_message", p3("message M {} message M {}"), "'acme.M' is already defined"),
    ("float_map_key", msg("map<float, string> m = 1;"), "mismatched input 'float'"),
    ("editions_unsupported", 'edition = "2023";\nmessage M {}', "unsupported syntax '2023'"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in PARSE_ERRORS], ids=[c[0] for c in PARSE_ERRORS])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(SchemaError) as caught:
        parse_protobuf(text)
    assert caught.value.message.startswith("Invalid schema: ")
    assert message in caught.value.message


def test_canonical_ignores_comments_and_formatting() -> None:
    spaced = '// header\nsyntax="proto3";   package acme;\nmessage M {\n  int32 a = 1; // the a\n  string b = 2;}'
    tidy = 'syntax = "proto3";\npackage acme;\nmessage M { int32 a = 1; /* c */ string b = 2; }'
    assert parse_protobuf(spaced).canonical() == parse_protobuf(tidy).canonical()
    assert parse_protobuf(spaced) == parse_protobuf(tidy)


def test_normalized_ignores_declaration_order_and_name_qualification() -> None:
    one = parse_protobuf(p3("message M { N n = 2; int32 a = 1; } message N {}"))
    other = parse_protobuf(p3("message N {} message M { int32 a = 1; .acme.N n = 2; }"))
    assert one.canonical() != other.canonical()
    assert one.normalized() == other.normalized()


COMMON = p3('import "money.proto";\nmessage Address { string street = 1; acme.money.Money rent = 2; }')
MONEY = 'syntax = "proto3";\npackage acme.money;\nmessage Money { int64 cents = 1; }'


def test_imports_resolve_through_the_mapping_transitively() -> None:
    schema = parse_protobuf(
        p3('import "address.proto";\nmessage User { Address home = 1; }'),
        [Reference("address.proto", "address-value", 1)],
        {"address.proto": COMMON, "money.proto": MONEY},
    )
    assert schema.messages["acme.User"].fields[1].type == ".acme.Address"


def test_import_missing_from_the_mapping() -> None:
    with pytest.raises(SchemaError, match=r"reference 'address\.proto' was not resolved"):
        parse_protobuf(p3('import "address.proto";\nmessage U {}'), [Reference("address.proto", "a", 1)], {})


NESTED = p3("""
message A { message A1 {} message A2 { message Deep {} } }
enum Skipped { Z = 0; }
message B { enum E { X = 0; } message B1 {} }
""")
INDEXES = [
    ("first_message", "acme.A", [0]),
    ("second_message_enums_not_counted", "acme.B", [1]),
    ("nested", "acme.A.A2", [0, 1]),
    ("deeply_nested", "acme.A.A2.Deep", [0, 1, 0]),
    ("without_package", "B.B1", [1, 0]),
]


@pytest.mark.parametrize(("name", "indexes"), [c[1:] for c in INDEXES], ids=[c[0] for c in INDEXES])
def test_message_indexes_and_back(name: str, indexes: list[int]) -> None:
    schema = parse_protobuf(NESTED)
    assert message_indexes(schema, name) == indexes
    assert message_name(schema, indexes) == (name if name.startswith("acme.") else f"acme.{name}")


def test_unknown_message_and_indexes() -> None:
    schema = parse_protobuf(NESTED)
    with pytest.raises(KeyError):
        message_indexes(schema, "acme.Nope")
    with pytest.raises(KeyError):
        message_name(schema, [5])
