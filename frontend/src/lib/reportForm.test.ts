import { emptyReport, formFieldOf, type ReportForm, reportSchema, toRequest } from "./reportForm";

function check(changes: Partial<ReportForm>) {
  const parsed = reportSchema.safeParse({ ...emptyReport, name: "daily", topic: "orders", ...changes });
  const problems = parsed.success ? {} : Object.fromEntries(parsed.error.issues.map((i) => [String(i.path[0]), i.message]));
  return { parsed, problems };
}

describe("report form rules", () => {
  it("turns a built-in kind into the API's request", () => {
    const { parsed } = check({ kind: "top_keys", limit: "5", schedule_mode: "cron", cron: " */5  * * * * " });
    expect(parsed.success).toBe(true);
    expect(toRequest(parsed.data!)).toEqual({
      name: "daily", description: "", kind: "top_keys", params: { topic: "orders", limit: 5 }, time_range: null, chart: null,
      schedule: { cron: "*/5 * * * *" },
    });
  });

  it("builds SQL params, a time range and a chart", () => {
    const { parsed } = check({
      kind: "sql", sql: "SELECT 1 AS a, 2 AS b", topics: "orders, payments", ending_offsets: "latest", range_mode: "between",
      start: "2026-01-31T12:00:00Z", end: "", chart_kind: "bar", chart_x: "a", chart_y: "b, a", schedule_mode: "interval", interval_seconds: "60",
    });
    expect(parsed.success).toBe(true);
    expect(toRequest(parsed.data!)).toMatchObject({
      params: { sql: "SELECT 1 AS a, 2 AS b", topics: ["orders", "payments"], ending_offsets: "latest" },
      time_range: { start: "2026-01-31T12:00:00.000Z" }, chart: { kind: "bar", x: "a", y: ["b", "a"] }, schedule: { interval_seconds: 60 },
    });
  });

  it("reads values typed through the registry only when asked", () => {
    const sql = { kind: "sql" as const, sql: "SELECT value.customer FROM orders", topics: "orders" };
    expect(toRequest(check({ ...sql, value_subject: "ignored" }).parsed.data!).params).toEqual({ sql: sql.sql, topics: ["orders"] });
    expect(toRequest(check({ ...sql, value_format: "avro" }).parsed.data!).params).toEqual({
      sql: sql.sql, topics: ["orders"], value_format: "avro",
    });
    expect(toRequest(check({ ...sql, value_format: "jsonschema", value_subject: " orders-v " }).parsed.data!).params).toMatchObject({
      value_format: "jsonschema", value_subject: "orders-v",
    });
    expect(formFieldOf("params.value_subject", "sql")).toBe("value_subject");
    expect(toRequest(check({ ...sql, value_format: "protobuf", value_message: " shop.Order " }).parsed.data!).params).toMatchObject({
      value_format: "protobuf", value_message: "shop.Order",
    });
    expect(toRequest(check({ ...sql, value_format: "avro", value_message: "ignored" }).parsed.data!).params).not.toHaveProperty("value_message");
    expect(formFieldOf("params.value_message", "sql")).toBe("value_message");
    expect(formFieldOf("params.value_format", "sql")).toBe("value_format");
  });

  it("names every wrong field at once", () => {
    expect(check({ name: " bad/name", topic: "", window: "soon" }).problems).toMatchObject({
      name: expect.stringContaining("Letters"), topic: "Choose the topic to read.", window: expect.stringContaining("1 minute"),
    });
    expect(check({ kind: "json_aggregate", field: "total", group_by: "$.ok", functions: [] }).problems).toEqual({
      field: expect.stringContaining("$.total"), functions: "Pick at least one aggregate.",
    });
    expect(check({ kind: "top_keys", limit: "0" }).problems).toEqual({ limit: "A whole number from 1 to 10,000." });
    expect(check({ kind: "consumer_lag", group: "" }).problems).toEqual({ group: "Name the consumer group." });
    expect(check({ kind: "sql", sql: "", topics: "", starting_offsets: "{nope" }).problems).toEqual({
      sql: "Write a Spark SQL query.", topics: expect.stringContaining("topics"), starting_offsets: expect.stringContaining("JSON"),
    });
    expect(check({ range_mode: "last", last_minutes: "x", schedule_mode: "cron", cron: "* * *" }).problems).toEqual({
      last_minutes: expect.stringContaining("whole number"), cron: expect.stringContaining("Five fields"),
    });
    expect(check({ range_mode: "between", start: "2026-01-02T00:00", end: "2026-01-01T00:00" }).problems).toEqual({
      end: "The end must be after the start.",
    });
    expect(check({ chart_kind: "line", chart_x: "", chart_y: " , " }).problems).toEqual({
      chart_x: expect.any(String), chart_y: expect.any(String),
    });
  });

  it("maps the API's field names to the form's", () => {
    expect(formFieldOf("params.topic", "throughput")).toBe("topic");
    expect(formFieldOf("params.topics", "sql")).toBe("topics");
    expect(formFieldOf("params", "sql")).toBe("sql");
    expect(formFieldOf("schedule.cron", "top_keys")).toBe("cron");
    expect(formFieldOf("time_range.end", "top_keys")).toBe("end");
    expect(formFieldOf("chart.y", "sql")).toBe("chart_y");
    expect(formFieldOf("non_field_errors", "sql")).toBeNull();
  });
});
