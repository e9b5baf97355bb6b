"""``StaticSchemas``: a registry's answers given up front (what the report runner reads typed topics with), and
the source's internal ``schema.registry.inline`` option."""

from __future__ import annotations

import json

import pytest

from dataplane.client.registry import RegistryError, StaticSchemas
from dataplane.client.spark.options import SparkSourceError
from dataplane.client.spark.schema_options import parse_schema_options
from dataplane.schemas import AvroSchema, SchemaType

GEO = {"type": "record", "name": "Geo", "namespace": "x", "fields": [{"name": "lat", "type": "double"}]}
PLACE = {"type": "record", "name": "Place", "namespace": "x", "fields": [{"name": "at", "type": "x.Geo"}]}
PLACE_V2 = {**PLACE, "fields": [*PLACE["fields"], {"name": "name", "type": "string", "default": ""}]}
INLINE = json.dumps({
    "schemas": {"3": {"schema": json.dumps(GEO)},
                "7": {"schemaType": "AVRO", "schema": json.dumps(PLACE),
                      "references": [{"name": "x.Geo", "subject": "geo", "version": 1}]},
                "9": {"schema": json.dumps(PLACE_V2),
                      "references": [{"name": "x.Geo", "subject": "geo", "version": 1}]}},
    "subjects": {"places-value": {"1": 7, "2": 9}, "geo": {"1": 3}},
    "source": "the schemas of subject 'places-value'"})


def test_versions_ids_and_references_are_answered_from_what_was_given() -> None:
    lookup = StaticSchemas(INLINE)
    latest = lookup.version("places-value")
    assert (latest.id, latest.version, latest.subject, latest.schema_type) == (9, 2, "places-value", SchemaType.AVRO)
    assert lookup.version("places-value", 1).id == 7
    assert isinstance(lookup.schema_by_id(7).parsed, AvroSchema)  # its reference resolved from the given subjects
    assert lookup.schema_by_id(7) is lookup.schema_by_id(7)  # parsed once
    for ask, what in ((lambda: lookup.schema_by_id(8), "schema id 8"),
                      (lambda: lookup.version("places-value", 3), "version 3 of subject 'places-value'"),
                      (lambda: lookup.version("other-value"), "subject 'other-value'")):
        with pytest.raises(RegistryError) as caught:
            ask()
        assert caught.value.status == 404
        assert str(caught.value) == f"{what} is not among the schemas of subject 'places-value'"
    with pytest.raises(RegistryError, match="read-only"):
        lookup.register("places-value", SchemaType.AVRO, json.dumps(GEO))
    with pytest.raises(RegistryError, match="are not"):
        StaticSchemas("[]")


def test_the_inline_option_replaces_the_registry_url() -> None:
    parsed = parse_schema_options({"subscribe": "places", "value.format": "avro", "schema.registry.inline": INLINE},
                                  topic="places", sink=False)
    assert parsed is not None and parsed.registry.inline == INLINE and parsed.registry.url == ""
    assert parsed.registry.key is None and parsed.value is not None and parsed.value.subject == "places-value"
    with pytest.raises(SparkSourceError, match="exclude each other"):
        parse_schema_options({"value.format": "avro", "schema.registry.inline": INLINE,
                              "schema.registry.url": "http://registry"}, topic="places", sink=False)
