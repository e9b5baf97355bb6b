"""The registry's Protobuf specifics through the real views: base64 descriptors as schemas, ``format=serialized``,
subjects named after import paths (``%2F``), well-known imports without references, normalized lookups."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from dataplane.schemas import parse_protobuf
from tests.registry.conftest import Registry

pytestmark = pytest.mark.django_db(transaction=True)

COMMON = 'syntax = "proto3";\npackage e2e.common;\nmessage Address { string city = 1; }\n'
USER = ('syntax = "proto3";\npackage e2e;\nimport "google/protobuf/timestamp.proto";\nimport "e2e/common.proto";\n'
        "message User { string name = 1; google.protobuf.Timestamp at = 2; e2e.common.Address home = 3; }\n")
# the same as USER, written differently (declaration order, relative names, comments)
USER_REORDERED = ('syntax = "proto3";\npackage e2e;\nimport "e2e/common.proto";\n'
                  'import "google/protobuf/timestamp.proto";\n// a comment\n'
                  "message User { .e2e.common.Address home = 3; string name = 1; google.protobuf.Timestamp at = 2; }\n")
REF = [{"name": "e2e/common.proto", "subject": "e2e/common.proto", "version": 1}]


def _descriptor(body: dict[str, str]) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body["schema"]))


def test_references_by_import_path_and_format_serialized(reg: Registry) -> None:
    assert reg.call("POST", "/subjects/e2e%2Fcommon.proto/versions",
                    {"schema": COMMON, "schemaType": "PROTOBUF"}).body == {"id": 1}
    assert reg.call("GET", "/subjects").body == ["e2e/common.proto"]
    assert reg.call("GET", "/subjects/e2e%2Fcommon.proto/versions/1/").body["version"] == 1
    user = reg.call("POST", "/subjects/users-value/versions",
                    {"schema": USER, "schemaType": "PROTOBUF", "references": REF})
    assert user.body == {"id": 2}
    assert reg.call("GET", "/subjects/e2e%2Fcommon.proto/versions/1/referencedby").body == [2]

    plain = reg.call("GET", "/schemas/ids/2").body
    assert plain["references"] == REF and "message User" in plain["schema"]
    served = _descriptor(reg.call("GET", "/schemas/ids/2?format=serialized").body)
    assert list(served.dependency) == ["google/protobuf/timestamp.proto", "e2e/common.proto"]
    assert [f.type_name for f in served.message_type[0].field] == ["", ".google.protobuf.Timestamp",
                                                                    ".e2e.common.Address"]
    version = reg.call("GET", "/subjects/e2e%2Fcommon.proto/versions/1?format=serialized").body
    assert _descriptor(version).message_type[0].name == "Address"
    # other formats and types: the stored text
    assert reg.call("GET", "/schemas/ids/2?format=resolved").body["schema"] == plain["schema"]


def test_a_base64_descriptor_is_stored_as_proto_text(reg: Registry) -> None:
    proto = descriptor_pb2.FileDescriptorProto(name="whatever.proto", package="acme", syntax="proto3")
    message = proto.message_type.add(name="M")
    message.field.add(name="n", number=1, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, json_name="n")
    encoded = base64.b64encode(proto.SerializeToString()).decode()
    assert reg.call("POST", "/subjects/m/versions", {"schema": encoded, "schemaType": "PROTOBUF"}).body == {"id": 1}
    stored = reg.call("GET", "/subjects/m/versions/1").body["schema"]
    assert parse_protobuf(stored) == parse_protobuf('syntax = "proto3"; package acme; message M { int32 n = 1; }')
    # the text form of the same schema is the same schema: same id, no new version
    text = 'syntax = "proto3";\npackage acme;\nmessage M {\n  int32 n = 1;\n}\n'
    assert reg.call("POST", "/subjects/m/versions", {"schema": text, "schemaType": "PROTOBUF"}).body == {"id": 1}
    assert reg.call("POST", "/subjects/m", {"schema": encoded, "schemaType": "PROTOBUF"}).body["version"] == 1
    not_a_schema = reg.call("POST", "/subjects/m/versions", {"schema": "bm90IGEgZGVzY3JpcHRvcg==",
                                                            "schemaType": "PROTOBUF"})
    assert not_a_schema.status == 422 and not_a_schema.body["error_code"] == 42201


def test_normalize_finds_a_plainly_registered_schema(reg: Registry) -> None:
    reg.call("POST", "/subjects/e2e%2Fcommon.proto/versions", {"schema": COMMON, "schemaType": "PROTOBUF"})
    body = {"schema": USER, "schemaType": "PROTOBUF", "references": REF}
    assert reg.call("POST", "/subjects/u/versions", body).body == {"id": 2}
    reordered = {**body, "schema": USER_REORDERED}
    assert reg.call("POST", "/subjects/u", reordered).status == 404
    found = reg.call("POST", "/subjects/u?normalize=true", reordered).body
    assert (found["id"], found["version"]) == (2, 1)
    assert reg.call("POST", "/subjects/u/versions?normalize=true", reordered).body == {"id": 2}
    assert reg.call("GET", "/subjects/u/versions").body == [1]


def test_a_well_known_import_needs_no_reference_and_an_unknown_one_is_42201(reg: Registry) -> None:
    text = ('syntax = "proto3"; import "google/type/money.proto"; import "confluent/type/decimal.proto";'
            " message Price { google.type.Money money = 1; confluent.type.Decimal exact = 2; }")
    assert reg.call("POST", "/subjects/p/versions", {"schema": text, "schemaType": "PROTOBUF"}).body == {"id": 1}
    served = _descriptor(reg.call("GET", "/schemas/ids/1?format=serialized").body)
    assert list(served.dependency) == ["google/type/money.proto", "confluent/type/decimal.proto"]
    missing = reg.call("POST", "/subjects/q/versions", {"schema": 'syntax = "proto3"; import "nope.proto";',
                                                        "schemaType": "PROTOBUF"})
    assert missing.status == 422 and "nope.proto" in missing.body["message"]
