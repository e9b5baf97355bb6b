"""JSON Schema: drafts, parse errors, stored forms, references and Confluent's compatibility rules.

Outcomes follow Confluent's SchemaDiff: a change is compatible when the schema that must accept the other's
data widens (BACKWARD: old → new; FORWARD: new → old).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dataplane.schemas import Reference, SchemaError, json_schema_compatibility, parse_json_schema


def obj(props: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": props, **extra})


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}

# (case, old, new, error for BACKWARD (new accepts old data), error for FORWARD (old accepts new data))
CASES = [
    ("property_added_to_open_model", obj({"a": S}), obj({"a": S, "b": INT}),
     "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", None),
    ("property_removed_from_open_model", obj({"a": S, "b": INT}), obj({"a": S}),
     None, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    ("property_added_to_closed_model", obj({"a": S}, additionalProperties=False),
     obj({"a": S, "b": INT}, additionalProperties=False), None, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    ("property_with_empty_schema_added_to_open_model", obj({"a": S}), obj({"a": S, "b": {}}), None, None),
    ("property_added_covered_by_partially_open_model", obj({"a": S}, additionalProperties=S),
     obj({"a": S, "b": S}, additionalProperties=S), None, None),
    ("property_added_not_covered_by_partially_open_model", obj({"a": S}, additionalProperties=S),
     obj({"a": S, "b": INT}, additionalProperties=S),
     "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
     "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
    ("content_model_closed", obj({"a": S}), obj({"a": S}, additionalProperties=False),
     "ADDITIONAL_PROPERTIES_REMOVED", None),
    ("required_added", obj({"a": S, "b": INT}, required=["a"]), obj({"a": S, "b": INT}, required=["a", "b"]),
     "REQUIRED_ATTRIBUTE_ADDED", None),
    ("required_added_with_default", obj({"a": S, "b": INT}), obj({"a": S, "b": {**INT, "default": 0}}, required=["b"]),
     None, None),
    ("integer_widened_to_number", obj({"a": INT}), obj({"a": N}), None, "TYPE_NARROWED"),
    ("type_added_to_type_list", obj({"a": {"type": ["string"]}}), obj({"a": {"type": ["string", "null"]}}),
     None, "TYPE_NARROWED"),
    ("type_changed", obj({"a": S}), obj({"a": INT}), "TYPE_CHANGED", "TYPE_CHANGED"),
    ("enum_extended", obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x", "y", "z"]}}),
     None, "ENUM_ARRAY_NARROWED"),
    ("enum_replaced", obj({"a": {"enum": ["x"]}}), obj({"a": {"enum": ["y"]}}),
     "ENUM_ARRAY_CHANGED", "ENUM_ARRAY_CHANGED"),
    ("max_length_increased", obj({"a": {**S, "maxLength": 5}}), obj({"a": {**S, "maxLength": 10}}),
     None, "MAX_LENGTH_DECREASED"),
    ("min_length_increased", obj({"a": {**S, "minLength": 1}}), obj({"a": {**S, "minLength": 3}}),
     "MIN_LENGTH_INCREASED", None),
    ("minimum_added", obj({"a": INT}), obj({"a": {**INT, "minimum": 0}}), "MINIMUM_ADDED", None),
    ("maximum_removed", obj({"a": {**INT, "maximum": 10}}), obj({"a": INT}), None, "MAXIMUM_ADDED"),
    ("exclusive_maximum_decreased", obj({"a": {**N, "exclusiveMaximum": 10}}),
     obj({"a": {**N, "exclusiveMaximum": 5}}), "EXCLUSIVE_MAXIMUM_DECREASED", None),
    ("multiple_of_reduced_to_divisor", obj({"a": {**INT, "multipleOf": 4}}), obj({"a": {**INT, "multipleOf": 2}}),
     None, "MULTIPLE_OF_CHANGED"),
    ("pattern_added", obj({"a": S}), obj({"a": {**S, "pattern": "^x"}}), "PATTERN_ADDED", None),
    ("array_items_narrowed", obj({"a": {"type": "array", "items": N}}), obj({"a": {"type": "array", "items": INT}}),
     "TYPE_NARROWED", None),
    ("max_items_added", obj({"a": {"type": "array"}}), obj({"a": {"type": "array", "maxItems": 3}}),
     "MAX_ITEMS_ADDED", None),
    ("unique_items_added", obj({"a": {"type": "array"}}), obj({"a": {"type": "array", "uniqueItems": True}}),
     "UNIQUE_ITEMS_ADDED", None),
    ("one_of_branch_added", obj({"a": {"oneOf": [S, INT]}}), obj({"a": {"oneOf": [S, INT, {"type": "boolean"}]}}),
     None, "SUM_TYPE_NARROWED"),
    ("any_of_branch_removed", obj({"a": {"anyOf": [S, INT]}}), obj({"a": {"anyOf": [S]}}),
     "SUM_TYPE_NARROWED", None),
    ("type_became_one_of_including_it", obj({"a": S}), obj({"a": {"oneOf": [S, INT]}}), None, "SUM_TYPE_NARROWED"),
    ("one_of_became_any_of", obj({"a": {"oneOf": [S, INT]}}), obj({"a": {"anyOf": [S, INT]}}),
     None, "COMBINED_TYPE_CHANGED"),
    ("all_of_branch_added", obj({"a": {"allOf": [S]}}), obj({"a": {"allOf": [S, {"maxLength": 3}]}}),
     "PRODUCT_TYPE_EXTENDED", None),
    ("nested_property_type_changed", obj({"o": json.loads(obj({"x": S}))}), obj({"o": json.loads(obj({"x": INT}))}),
     "'#/properties/o/properties/x/type'", "'#/properties/o/properties/x/type'"),
    ("local_ref_target_changed", json.dumps({"definitions": {"A": S}, "$ref": "#/definitions/A"}),
     json.dumps({"definitions": {"A": INT}, "$ref": "#/definitions/A"}), "TYPE_CHANGED", "TYPE_CHANGED"),
    ("anything_to_empty_schema", obj({"a": S}, required=["a"]), "{}", None, "TYPE_NARROWED"),
    ("tuple_item_added_to_closed_tuple",
     json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [S], "items": False}),
     json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [S, INT], "items": False}),
     None, "'#/prefixItems/1'"),
]


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_backward_new_accepts_old(old: str, new: str, error: str | None) -> None:
    problems = json_schema_compatibility(parse_json_schema(old), parse_json_schema(new))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


@pytest.mark.parametrize(("old", "new", "error"), [(c[1], c[2], c[4]) for c in CASES], ids=[c[0] for c in CASES])
def test_forward_old_accepts_new(old: str, new: str, error: str | None) -> None:
    problems = json_schema_compatibility(parse_json_schema(new), parse_json_schema(old))
    assert (problems == []) if error is None else any(error in p for p in problems), problems


DRAFTS = [
    ("draft4_boolean_exclusive_maximum", {"$schema": "http://json-schema.org/draft-04/schema#",
                                          "type": "number", "maximum": 3, "exclusiveMaximum": True}),
    ("draft6_const", {"$schema": "http://json-schema.org/draft-06/schema#", "const": 1}),
    ("draft7_if_then", {"$schema": "http://json-schema.org/draft-07/schema#", "if": S, "then": {"minLength": 1}}),
    ("draft2019_defs", {"$schema": "https://json-schema.org/draft/2019-09/schema", "$defs": {"a": S},
                        "$ref": "#/$defs/a"}),
    ("draft2020_prefix_items", {"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [S]}),
    ("no_schema_keyword_means_draft7", {"type": "object"}),
    ("boolean_schema", True),
]


@pytest.mark.parametrize("schema", [c[1] for c in DRAFTS], ids=[c[0] for c in DRAFTS])
def test_each_draft_parses(schema: Any) -> None:
    parse_json_schema(json.dumps(schema))


PARSE_ERRORS = [
    ("not_json", "{", "is not JSON"),
    ("array_is_not_a_schema", "[]", "must be a JSON object or boolean"),
    ("unknown_type_name", json.dumps({"type": "strin"}), "'strin' is not valid under any of the given schemas"),
    ("negative_max_length", json.dumps({"maxLength": -1}), "at '#/maxLength'"),
    ("draft4_numeric_exclusive_minimum", json.dumps({"$schema": "http://json-schema.org/draft-04/schema#",
                                                     "minimum": 1, "exclusiveMinimum": 5}), "is not of type 'boolean'"),
    ("unsupported_draft", json.dumps({"$schema": "http://json-schema.org/draft-03/schema#"}),
     "unsupported $schema"),
    ("unresolved_ref", json.dumps({"$ref": "address.json"}), "$ref 'address.json' cannot be resolved"),
    ("dangling_local_ref", json.dumps({"$ref": "#/definitions/missing"}), "cannot be resolved"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in PARSE_ERRORS], ids=[c[0] for c in PARSE_ERRORS])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(SchemaError) as caught:
        parse_json_schema(text)
    assert caught.value.message.startswith("Invalid schema: ")
    assert message in caught.value.message


def test_canonical_ignores_formatting_and_normalized_ignores_key_and_required_order() -> None:
    one = parse_json_schema('{"type": "object",\n "required": ["b", "a"], "properties": {"a": {}, "b": {}}}')
    same = parse_json_schema('{"type":"object","required":["b","a"],"properties":{"a":{},"b":{}}}')
    reordered = parse_json_schema('{"properties": {"b": {}, "a": {}}, "required": ["a", "b"], "type": "object"}')
    assert one.canonical() == same.canonical() == '{"type":"object","required":["b","a"],"properties":{"a":{},"b":{}}}'
    assert one.canonical() != reordered.canonical()
    assert one.normalized() == reordered.normalized()


ADDRESS = json.dumps({"type": "object", "properties": {"street": S}, "required": ["street"]})


def test_references_resolve_and_validate_through_the_mapping() -> None:
    schema = parse_json_schema(obj({"home": {"$ref": "address.json"}}), [Reference("address.json", "address", 1)],
                               {"address.json": ADDRESS})
    assert schema.validator.is_valid({"home": {"street": "x"}})
    assert not schema.validator.is_valid({"home": {}})


def test_compatibility_follows_references() -> None:
    text = obj({"home": {"$ref": "address.json"}})
    old = parse_json_schema(text, [], {"address.json": ADDRESS})
    new = parse_json_schema(text, [], {"address.json": json.dumps({"type": "object", "properties": {"street": INT}})})
    assert any("'#/properties/home/properties/street/type'" in p for p in json_schema_compatibility(old, new))


def test_reference_missing_from_the_mapping() -> None:
    with pytest.raises(SchemaError, match=r"reference 'address\.json' was not resolved"):
        parse_json_schema(obj({}), [Reference("address.json", "address", 1)], {})
