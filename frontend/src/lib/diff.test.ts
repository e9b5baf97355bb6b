import { diffStats, layout, lineDiff } from "./diff";

describe("lineDiff", () => {
  it("keeps common lines and marks removals before additions", () => {
    expect(lineDiff("a\nb\nc", "a\nx\nc\nd")).toEqual([
      { op: " ", text: "a" }, { op: "-", text: "b" }, { op: "+", text: "x" }, { op: " ", text: "c" }, { op: "+", text: "d" },
    ]);
  });
  it("handles empty sides and identical texts", () => {
    expect(lineDiff("", "a")).toEqual([{ op: "+", text: "a" }]);
    expect(lineDiff("a\nb", "")).toEqual([{ op: "-", text: "a" }, { op: "-", text: "b" }]);
    expect(diffStats(lineDiff("a\nb", "a\nb"))).toEqual({ added: 0, removed: 0 });
  });
  it("finds the longest common part, not the first match", () => {
    const lines = lineDiff("x\na\nb\nc", "a\nb\nc\nx");
    expect(diffStats(lines)).toEqual({ added: 1, removed: 1 });
    expect(lines.filter((l) => l.op === " ").map((l) => l.text)).toEqual(["a", "b", "c"]);
  });
  it("shows an added Avro field as added lines once the schemas are laid out", () => {
    const v1 = JSON.stringify({ type: "record", name: "User", fields: [{ name: "name", type: "string" }] });
    const v2 = JSON.stringify({ type: "record", name: "User", fields: [{ name: "name", type: "string" }, { name: "age", type: "int", default: 0 }] });
    const lines = lineDiff(layout(v1), layout(v2));
    const added = lines.filter((l) => l.op === "+").map((l) => l.text.trim());
    expect(added).toContain('"name": "age",');
    expect(lines.filter((l) => l.op === "-").length).toBeLessThanOrEqual(1); // at most the closing brace's comma
  });
  it("leaves non-JSON (Protobuf) text as written", () => {
    expect(layout('syntax = "proto3";\nmessage A {}')).toBe('syntax = "proto3";\nmessage A {}');
  });
});
