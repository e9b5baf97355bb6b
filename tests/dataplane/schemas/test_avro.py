"""Avro: parse errors, stored/normalized forms, references and schema-resolution compatibility.

Expected outcomes follow the Avro specification's resolution rules as Java's SchemaCompatibility (and so
Confluent and Karapace) report them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dataplane.schemas import Reference, SchemaError, avro_compatibility, parse_avro


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(symbols: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": "E", "symbols": symbols, **extra}


# (case, old, new, error expected for BACKWARD (new reads old), error expected for FORWARD (old reads new))
CASES = [
    ("field_added_with_default", rec(f("a", "int")), rec(f("a", "int"), f("b", "string", default="")), None, None),
    ("field_added_without_default", rec(f("a", "int")), rec(f("a", "int"), f("b", "string")),
     "READER_FIELD_MISSING_DEFAULT_VALUE", None),
    ("field_removed_with_default", rec(f("a", "int"), f("b", "int", default=0)), rec(f("a", "int")), None, None),
    ("field_removed_without_default", rec(f("a", "int"), f("b", "int")), rec(f("a", "int")),
     None, "READER_FIELD_MISSING_DEFAULT_VALUE"),
    ("int_promoted_to_long", rec(f("a", "int")), rec(f("a", "long")), None, "TYPE_MISMATCH"),
    ("long_demoted_to_int", rec(f("a", "long")), rec(f("a", "int")), "TYPE_MISMATCH", None),
    ("int_promoted_to_float", rec(f("a", "int")), rec(f("a", "float")), None, "TYPE_MISMATCH"),
    ("long_promoted_to_double", rec(f("a", "long")), rec(f("a", "double")), None, "TYPE_MISMATCH"),
    ("float_promoted_to_double", rec(f("a", "float")), rec(f("a", "double")), None, "TYPE_MISMATCH"),
    ("string_to_bytes", rec(f("a", "string")), rec(f("a", "bytes")), None, None),
    ("int_to_string", rec(f("a", "int")), rec(f("a", "string")), "TYPE_MISMATCH", "TYPE_MISMATCH"),
    ("boolean_to_int", rec(f("a", "boolean")), rec(f("a", "int")), "TYPE_MISMATCH", "TYPE_MISMATCH"),
    ("enum_symbol_added", rec(f("e", enum(["A", "B"]))), rec(f("e", enum(["A", "B", "C"]))),
     None, "MISSING_ENUM_SYMBOLS"),
    ("enum_symbol_removed", rec(f("e", enum(["A", "B", "C"]))), rec(f("e", enum(["A", "B"]))),
     "MISSING_ENUM_SYMBOLS", None),
    ("enum_symbol_added_reader_has_enum_default", rec(f("e", enum(["A", "B"], default="A"))),
     rec(f("e", enum(["A", "B", "C"], default="A"))), None, None),
    ("field_made_nullable_union", rec(f("a", "string")), rec(f("a", ["null", "string"], default=None)),
     None, "TYPE_MISMATCH"),
    ("union_branch_removed", rec(f("a", ["null", "string", "int"])), rec(f("a", ["null", "string"])),
     "MISSING_UNION_BRANCH", None),
    ("union_branch_added", rec(f("a", ["null", "string"])), rec(f("a", ["null", "string", "int"])),
     None, "MISSING_UNION_BRANCH"),
    ("union_branch_promoted", rec(f("a", ["null", "int"])), rec(f("a", ["null", "long"])),
     None, "MISSING_UNION_BRANCH"),
    ("union_to_single_type", rec(f("a", ["null", "int"])), rec(f("a", "int")), "TYPE_MISMATCH", None),
    ("array_items_promoted", rec(f("a", {"type": "array", "items": "int"})),
     rec(f("a", {"type": "array", "items": "long"})), None, "TYPE_MISMATCH"),
    ("map_values_changed", rec(f("a", {"type": "map", "values": "string"})),
     rec(f("a", {"type": "map", "values": "int"})), "TYPE_MISMATCH", "TYPE_MISMATCH"),
    ("array_to_map", rec(f("a", {"type": "array", "items": "int"})),
     rec(f("a", {"type": "map", "values": "int"})), "TYPE_MISMATCH", "TYPE_MISMATCH"),
    ("fixed_size_changed", rec(f("a", {"type": "fixed", "name": "F", "size": 4})),
     rec(f("a", {"type": "fixed", "name": "F", "size": 8})), "FIXED_SIZE_MISMATCH", "FIXED_SIZE_MISMATCH"),
    ("fixed_renamed", rec(f("a", {"type": "fixed", "name": "F", "size": 4})),
     rec(f("a", {"type": "fixed", "name": "G", "size": 4})), "NAME_MISMATCH", "NAME_MISMATCH"),
    ("record_renamed_without_alias", rec(f("a", "int"), name="A"), rec(f("a", "int"), name="B"),
     "NAME_MISMATCH", "NAME_MISMATCH"),
    ("record_renamed_with_alias", rec(f("a", "int"), name="A"), rec(f("a", "int"), name="B", aliases=["A"]),
     None, "NAME_MISMATCH"),
    ("record_namespace_changed", rec(f("a", "int"), namespace="x"), rec(f("a", "int"), namespace="y"), None, None),
    ("field_renamed_with_alias", rec(f("a", "int")), rec(f("b", "int", aliases=["a"])),
     None, "READER_FIELD_MISSING_DEFAULT_VALUE"),
    ("field_renamed_without_alias", rec(f("a", "int")), rec(f("b", "int")),
     "READER_FIELD_MISSING_DEFAULT_VALUE", "READER_FIELD_MISSING_DEFAULT_VALUE"),
    ("nested_record_field_added_without_default", rec(f("n", json.loads(rec(f("x", "int"), name="N")))),
     rec(f("n", json.loads(rec(f("x", "int"), f("y", "int"), name="N")))),
     "/fields/0/type/fields/1", None),
    ("recursive_list_field_added_with_default",
     rec(f("v", "int"), f("next", ["null", "R"])),
     rec(f("v", "int"), f("next", ["null", "R"]), f("w", "int", default=0)), None, None),
    ("doc_only_change", rec(f("a", "int")), rec(f("a", "int", doc="the a"), doc="R's doc"), None, None),
]


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_backward_new_reads_old(old: str, new: str, error: str | None) -> None:
    problems = avro_compatibility(parse_avro(new), parse_avro(old))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[4]) for c in CASES], ids=[c[0] for c in CASES])
def test_forward_old_reads_new(old: str, new: str, error: str | None) -> None:
    problems = avro_compatibility(parse_avro(old), parse_avro(new))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


def test_message_carries_confluent_error_type_path_and_field() -> None:
    [problem] = avro_compatibility(parse_avro(rec(f("a", "int"), f("b", "string"))), parse_avro(rec(f("a", "int"))))
    assert problem.startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert "additionalInfo:'b'" in problem
    assert problem.endswith("at '/fields/1'")


PARSE_ERRORS = [
    ("not_json", "{not json", "is not JSON"),
    ("unknown_type", rec(f("a", "Foo")), "unknown type 'Foo'"),
    ("default_of_wrong_type", rec(f("a", "int", default="x")), "Default value <x> must match schema type: int"),
    ("record_without_fields", json.dumps({"type": "record", "name": "R"}), "missing attribute 'fields'"),
    ("unknown_primitive", json.dumps("integer"), "unknown type 'integer'"),
    ("number_is_not_a_schema", "42", "must be a JSON string, array or object"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in PARSE_ERRORS], ids=[c[0] for c in PARSE_ERRORS])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(SchemaError) as caught:
        parse_avro(text)
    assert caught.value.message.startswith("Invalid schema: ")
    assert message in caught.value.message


SAME_SCHEMA = [
    ("whitespace_and_key_order",
     '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}',
     '{\n  "fields": [ {"type": "int", "name": "a"} ],\n  "name": "R",\n  "type": "record"\n}'),
    ("primitive_object_collapsed", rec(f("a", {"type": "int"})), rec(f("a", "int"))),
    ("top_level_primitive_object", '{"type": "string"}', '"string"'),
]


@pytest.mark.parametrize(("one", "other"), [c[1:] for c in SAME_SCHEMA], ids=[c[0] for c in SAME_SCHEMA])
def test_canonical_form_equal_for_differently_written_schemas(one: str, other: str) -> None:
    assert parse_avro(one).canonical() == parse_avro(other).canonical()
    assert parse_avro(one) == parse_avro(other)


def test_canonical_keeps_defaults_but_parsing_canonical_form_drops_them() -> None:
    with_default, without = parse_avro(rec(f("a", "int", default=1))), parse_avro(rec(f("a", "int")))
    assert with_default.canonical() != without.canonical()
    assert with_default.parsing_canonical_form() == without.parsing_canonical_form()
    assert with_default.parsing_canonical_form() == '{"name":"R","type":"record","fields":[{"name":"a","type":"int"}]}'


def test_normalized_is_equal_across_namespace_spellings_and_docs() -> None:
    dotted = parse_avro(rec(f("a", "int"), name="com.x.R", doc="d"))
    namespaced = parse_avro(rec(f("a", "int"), namespace="com.x"))
    assert dotted.canonical() != namespaced.canonical()
    assert dotted.normalized() == namespaced.normalized()
    assert '"name":"com.x.R"' in dotted.normalized()


ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "com.x",
                      "fields": [{"name": "street", "type": "string"}, {"name": "geo", "type": "com.x.Geo"}]})
GEO = json.dumps({"type": "record", "name": "Geo", "namespace": "com.x", "fields": [{"name": "lat", "type": "double"}]})


def test_references_resolve_named_types_in_dependency_order() -> None:
    schema = parse_avro(
        rec(f("home", "com.x.Address"), name="com.x.User"),
        [Reference("com.x.Address", "address-value", 1)],
        {"com.x.Address": ADDRESS, "com.x.Geo": GEO},  # Address needs Geo, which comes after it
    )
    assert schema.references == (Reference("com.x.Address", "address-value", 1),)


def test_reference_missing_from_the_mapping() -> None:
    with pytest.raises(SchemaError, match=r"reference 'com\.x\.Address' was not resolved"):
        parse_avro(rec(f("home", "com.x.Address")), [Reference("com.x.Address", "address-value", 1)], {})


def test_reference_using_an_undefined_type() -> None:
    with pytest.raises(SchemaError, match="use types no reference defines"):
        parse_avro(rec(f("home", "com.x.Address")), [], {"com.x.Address": ADDRESS})


def test_compatibility_follows_referenced_types() -> None:
    geo2 = json.dumps({"type": "record", "name": "Geo", "namespace": "com.x",
                       "fields": [{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]})
    text = rec(f("home", "com.x.Address"), name="com.x.User")
    old = parse_avro(text, [], {"com.x.Address": ADDRESS, "com.x.Geo": GEO})
    new = parse_avro(text, [], {"com.x.Address": ADDRESS, "com.x.Geo": geo2})
    assert any("/fields/0/type/fields/1/type/fields/1" in p for p in avro_compatibility(new, old))
    assert avro_compatibility(old, new) == []
