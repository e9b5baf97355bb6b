import { render, toCsv, toJson } from "./records";
import type { TailRecord } from "./tail";

const rec: TailRecord = {
  partition: 2, offset: 7, timestamp: Date.UTC(2026, 0, 1), key: "k,1", key_encoding: "utf-8",
  value: '{"a":"say \\"hi\\""}', value_encoding: "utf-8", headers: [{ key: "h", value: "x", encoding: "utf-8" }],
};

describe("render", () => {
  it("pretty-prints JSON and falls back to text", () => {
    expect(render('{"a":1}', "utf-8", "json")).toBe('{\n  "a": 1\n}');
    expect(render("plain", "utf-8", "json")).toBe("plain");
  });
  it("shows bytes as a hex dump", () => {
    expect(render("AAE=", "base64", "bytes")).toBe("00000000  00 01" + " ".repeat(42) + "  ..");
    expect(render("AB", "utf-8", "bytes")).toMatch(/^00000000  41 42 /);
  });
});

describe("export", () => {
  it("quotes CSV cells that need it", () => {
    const csv = toCsv([rec]).split("\r\n");
    expect(csv[0]).toBe("partition,offset,timestamp,key,value,headers");
    expect(csv[1]).toBe('2,7,2026-01-01T00:00:00.000Z,"k,1","{""a"":""say \\""hi\\""""}","{""h"":""x""}"');
  });
  it("exports JSON that parses back", () => {
    expect(JSON.parse(toJson([rec]))[0].offset).toBe(7);
  });
});

describe("schema'd records", () => {
  it("shows a value decoded with its registry schema as pretty JSON", () => {
    expect(render('{"name":"ada","age":36}', "schema", "json")).toBe('{\n  "name": "ada",\n  "age": 36\n}');
    expect(render('{"name":"ada"}', "schema", "text")).toBe('{"name":"ada"}');
  });
});
