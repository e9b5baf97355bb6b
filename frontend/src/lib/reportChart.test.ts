import { chartFrom } from "./reportChart";

const columns = [{ name: "window_start", type: "timestamp" }, { name: "records", type: "bigint" }, { name: "bytes", type: "bigint" }];

describe("chartFrom", () => {
  it("maps the chart description's axes onto the rows", () => {
    const spec = chartFrom({ kind: "line", x: "window_start", y: ["records", "bytes"] }, columns, [
      { window_start: "2023-11-14T22:13:00Z", records: 3, bytes: "120" },
      { window_start: "2023-11-14T22:14:00.000Z", records: null, bytes: 7 },
    ]);
    expect(spec).toEqual({
      kind: "line", x: "window_start", series: [{ key: "y0", name: "records" }, { key: "y1", name: "bytes" }],
      data: [{ x: "2023-11-14 22:13:00", y0: 3, y1: 120 }, { x: "2023-11-14 22:14:00", y0: null, y1: 7 }],
    });
  });

  it("labels null and text keys, takes one y column as a string, keeps only known columns", () => {
    const spec = chartFrom({ kind: "bar", x: "key", y: "records" }, [{ name: "key", type: "string" }, { name: "records", type: "bigint" }],
      [{ key: null, records: 2 }, { key: "a.b", records: 6 }]);
    expect(spec?.data).toEqual([{ x: "(null)", y0: 2 }, { x: "a.b", y0: 6 }]);
    expect(chartFrom({ kind: "bar", x: "key", y: ["records", "gone"] }, [{ name: "key" }, { name: "records" }], [])?.series)
      .toEqual([{ key: "y0", name: "records" }]);
  });

  it("draws nothing for a table or for columns the result does not have", () => {
    expect(chartFrom({ kind: "table" }, columns, [])).toBeNull();
    expect(chartFrom(null, columns, [])).toBeNull();
    expect(chartFrom({ kind: "line", x: "nope", y: ["records"] }, columns, [])).toBeNull();
    expect(chartFrom({ kind: "line", x: "window_start", y: ["nope"] }, columns, [])).toBeNull();
  });
});
