import { chartText, paramPairs, progressOf, timeRangeText } from "./reportText";

describe("report definition in words", () => {
  it("labels parameters instead of showing JSON", () => {
    expect(paramPairs({ topic: "orders", limit: 10, bucket_bytes: 1024, functions: ["sum", "avg"] })).toEqual([
      ["Topic", "orders"], ["How many keys", "10"], ["Bucket width", "1 KiB"], ["Aggregates", "sum, avg"],
    ]);
    expect(paramPairs(null)).toEqual([]);
  });

  it("says the time range and chart", () => {
    expect(timeRangeText({})).toBe("every record");
    expect(timeRangeText({ last_minutes: 15 })).toBe("the last 15 minutes");
    expect(chartText(null)).toBe("the kind's default");
    expect(chartText({ kind: "line", x: "minute", y: ["records"] })).toBe("line chart of records by minute");
  });

  it("computes progress from the API's percent or task counts", () => {
    expect(progressOf({ status: "running", progress_percent: 40 })).toBe(40);
    expect(progressOf({ status: "running", progress: { tasks: 8, tasks_done: 2 } })).toBe(25);
    expect(progressOf({ status: "queued", progress: {} })).toBeNull();
    expect(progressOf({ status: "succeeded" })).toBe(100);
  });
});
