import { buildFilter } from "./filters";

describe("buildFilter", () => {
  it("is undefined with no fields", () => {
    expect(buildFilter({})).toBeUndefined();
  });
  it("ands the fields, quoting strings safely", () => {
    expect(buildFilter({ key: "it's", value: "a\\b" })).toBe("contains(key, 'it\\'s') && contains(value, 'a\\\\b')");
  });
  it("compares headers and JSON fields", () => {
    expect(buildFilter({ header: "trace-id=7" })).toBe(`headers."trace-id" == '7'`);
    expect(buildFilter({ header: "x" })).toBe(`headers."x" != null`);
    expect(buildFilter({ jsonPath: "order.total", jsonValue: "5" })).toBe('value_json."order"."total" == `5`');
    expect(buildFilter({ jsonPath: "status", jsonValue: "paid" })).toBe('value_json."status" == `"paid"`');
  });
  it("keeps a raw expression in parentheses", () => {
    expect(buildFilter({ key: "a", expression: "partition == `1`" })).toBe("contains(key, 'a') && (partition == `1`)");
  });
});
