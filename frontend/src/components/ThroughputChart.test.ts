import { axisMax, sumByMinute } from "./ThroughputChart";

const point = (name: string, at: string, rin: number, rout: number) => ({
  name, at, seconds: 60, records_in: 0, bytes_in: 0, records_out: 0, bytes_out: 0, records_in_per_sec: rin, bytes_in_per_sec: 0, records_out_per_sec: rout, bytes_out_per_sec: 0,
});

describe("sumByMinute", () => {
  it("adds the brokers of each minute and orders by time", () => {
    const rows = sumByMinute([point("1", "2026-01-01T00:01:00Z", 5, 1), point("2", "2026-01-01T00:01:00Z", 2.4, 0), point("1", "2026-01-01T00:00:00Z", 1, 1)]);
    expect(rows.map((r) => [r.in, r.out])).toEqual([[1, 1], [7.4, 1]]);
  });

  it("keeps low traffic visible: fractions are not rounded to 0, and the axis scales to them", () => {
    const rows = sumByMinute([point("1", "2026-01-01T00:00:00Z", 0.05, 0.02), point("1", "2026-01-01T00:01:00Z", 0.1, 0)]);
    expect(rows.map((r) => r.in)).toEqual([0.05, 0.1]);
    expect(axisMax(rows)).toBeGreaterThanOrEqual(0.1);
    expect(axisMax(rows)).toBeLessThanOrEqual(0.2);
    expect(axisMax([{ in: 0, out: 0 }])).toBe(1);
    expect(axisMax([{ in: 1234, out: 10 }])).toBe(2000);
  });
});
