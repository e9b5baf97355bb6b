import { actionLabel, detailPairs } from "./audit";

describe("audit details", () => {
  it("shows times as dates, never epoch floats or raw JSON", () => {
    const pairs = detailPairs({ first_at: 1764300000.123456, last_at: "2026-11-28T03:20:00Z", partitions: 3, configs: { "retention.ms": "1" } });
    const text = Object.fromEntries(pairs);
    expect(text["first at"]).toBe(new Date(1764300000123.456).toLocaleString());
    expect(text["first at"]).not.toContain("1764300000");
    expect(text["last at"]).toBe(new Date(Date.parse("2026-11-28T03:20:00Z")).toLocaleString());
    expect(text.partitions).toBe("3");
    expect(text.configs).toBe("retention.ms=1");
    expect(pairs.map(([, v]) => v).join(" ")).not.toMatch(/[{}"]/);
  });

  it("shortens long lists and strings", () => {
    const text = Object.fromEntries(detailPairs({ ids: [1, 2, 3, 4, 5, 6, 7], note: "x".repeat(200) }));
    expect(text.ids).toBe("1, 2, 3, 4, 5 (+2 more)");
    expect(text.note.length).toBe(118);
    expect(detailPairs(null)).toEqual([]);
    expect(actionLabel("api_key.revoke")).toBe("api key revoke");
  });
});
