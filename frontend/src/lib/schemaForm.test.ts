import { draftBody, draftProblem, topicOfSubject, typeOf, verdictOf } from "./schemaForm";

describe("the schema draft", () => {
  it("asks for a schema, valid JSON for Avro and JSON Schema, a message for Protobuf", () => {
    expect(draftProblem({ schemaType: "AVRO", schema: "  " })).toBe("Write the schema first.");
    expect(draftProblem({ schemaType: "AVRO", schema: '{"type": "record",' })).toMatch(/^The schema is not valid JSON/);
    expect(draftProblem({ schemaType: "JSON", schema: '{"type": "object"}' })).toBeNull();
    expect(draftProblem({ schemaType: "PROTOBUF", schema: 'syntax = "proto3";' })).toMatch(/message or an enum/);
    expect(draftProblem({ schemaType: "PROTOBUF", schema: 'syntax = "proto3"; message A { string a = 1; }' })).toBeNull();
  });
  it("leaves schemaType out for Avro, as Confluent's clients do", () => {
    expect(draftBody({ schemaType: "AVRO", schema: ' "string" ' })).toEqual({ schema: '"string"' });
    expect(draftBody({ schemaType: "JSON", schema: "{}" })).toEqual({ schema: "{}", schemaType: "JSON" });
    expect(typeOf({})).toBe("AVRO");
    expect(typeOf({ schemaType: "PROTOBUF" })).toBe("PROTOBUF");
  });
  it("reads a compatibility answer", () => {
    expect(verdictOf({ is_compatible: true })).toEqual({ compatible: true });
    expect(verdictOf({ is_compatible: false, messages: ["READER_FIELD_MISSING_DEFAULT_VALUE: email", ""] }))
      .toEqual({ compatible: false, reasons: ["READER_FIELD_MISSING_DEFAULT_VALUE: email"] });
    expect(verdictOf({ is_compatible: false })).toEqual({ compatible: false, reasons: ["The registry found the draft incompatible."] });
  });
  it("maps TopicNameStrategy subjects to their topics", () => {
    expect(topicOfSubject("orders-value")).toEqual({ topic: "orders", part: "value" });
    expect(topicOfSubject("my-topic-key")).toEqual({ topic: "my-topic", part: "key" });
    expect(topicOfSubject("com.acme.Order")).toBeNull();
    expect(topicOfSubject("-value")).toBeNull();
  });
});
