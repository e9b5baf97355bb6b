import { wizardAcls } from "./Acls";

describe("wizardAcls", () => {
  it("grants a producer write and describe on the topic", () => {
    const acls = wizardAcls("producer", "User:sa-1", "orders", false, "");
    expect(acls.map((a) => `${a.resource_type}:${a.operation}:${a.pattern_type}`)).toEqual(["TOPIC:WRITE:LITERAL", "TOPIC:DESCRIBE:LITERAL"]);
  });
  it("grants a consumer read on the topic prefix and its group", () => {
    const acls = wizardAcls("consumer", "User:sa-1", "orders.", true, "billing");
    expect(acls.map((a) => `${a.resource_type}:${a.resource_name}:${a.operation}:${a.pattern_type}`)).toEqual([
      "TOPIC:orders.:READ:PREFIXED", "TOPIC:orders.:DESCRIBE:PREFIXED", "GROUP:billing:READ:LITERAL",
    ]);
  });
});
