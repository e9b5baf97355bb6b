// The report definition form: its zod rules (the control plane's, from controlplane/reports/kinds.py and
// services.py, so most mistakes are caught before a round trip), the request body it becomes, and where an API
// field error (``params.topic``, ``schedule.cron``…) is shown in the form.
import { z } from "zod";
import type { Schemas } from "../api/client";

export type Kind = Schemas["ReportKindEnum"];
export const KINDS: { value: Kind; label: string }[] = [
  { value: "throughput", label: "Throughput per time window" },
  { value: "top_keys", label: "Top keys" },
  { value: "value_size_histogram", label: "Value-size histogram" },
  { value: "json_aggregate", label: "Aggregates of a JSON field" },
  { value: "consumer_lag", label: "Consumer-lag trend" },
  { value: "sql", label: "Spark SQL" },
];
export const AGGREGATES = ["count", "sum", "avg", "min", "max"] as const;
export const VALUE_FORMATS = [
  { value: "binary", label: "Binary (value, value_str)" },
  { value: "avro", label: "Avro (Schema Registry)" },
  { value: "jsonschema", label: "JSON Schema (Schema Registry)" },
  { value: "protobuf", label: "Protobuf (Schema Registry)" },
] as const;

const WINDOW = /^\s*(\d+)\s*(second|minute|hour|day)s?\s*$/i;
const JSON_PATH = /^\$(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\['[^'\\]+'\])+$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._ -]{0,127}$/;
const INT = /^\d+$/;

const text = z.string().default("");

export const reportSchema = z.object({
  name: text,
  description: text,
  kind: z.enum(["sql", "throughput", "top_keys", "value_size_histogram", "json_aggregate", "consumer_lag"]),
  topic: text,
  window: text,
  limit: text,
  bucket_bytes: text,
  field: text,
  group_by: text,
  functions: z.array(z.enum(AGGREGATES)).default([...AGGREGATES]),
  group: text,
  sql: text,
  topics: text,
  starting_offsets: text,
  ending_offsets: text,
  value_format: z.enum(["binary", "avro", "jsonschema", "protobuf"]).default("binary"),
  value_subject: text,
  value_message: text,
  range_mode: z.enum(["all", "last", "between"]).default("all"),
  last_minutes: text,
  start: text,
  end: text,
  schedule_mode: z.enum(["none", "interval", "cron"]).default("none"),
  interval_seconds: text,
  cron: text,
  chart_kind: z.enum(["default", "line", "bar", "table"]).default("default"),
  chart_x: text,
  chart_y: text,
}).superRefine((form, ctx) => {
  const problem = (path: keyof typeof form, message: string) => ctx.addIssue({ code: "custom", path: [path], message });
  // Every rule is here rather than on the fields, so all mistakes show at once (zod skips refinements of an
  // object whose fields failed).
  if (!NAME.test(form.name.trim())) problem("name", "Letters, digits, '.', '_', '-' and spaces (at most 128), starting with a letter or digit.");
  const intIn = (path: "limit" | "bucket_bytes" | "last_minutes" | "interval_seconds", lo: number, hi: number, fallback: boolean) => {
    const raw = form[path].trim();
    if (raw === "" && fallback) return;
    if (!INT.test(raw) || Number(raw) < lo || Number(raw) > hi) problem(path, `A whole number from ${lo} to ${hi.toLocaleString("en")}.`);
  };
  if (form.kind === "sql") {
    if (!form.sql.trim()) problem("sql", "Write a Spark SQL query.");
    const topics = splitList(form.topics);
    if (!topics.length) problem("topics", "Name the topics the query reads (comma-separated).");
    else if (topics.length > 16) problem("topics", "At most 16 topics.");
    for (const name of ["starting_offsets", "ending_offsets"] as const) {
      const raw = form[name].trim();
      if (raw && !["earliest", "latest"].includes(raw)) {
        try {
          JSON.parse(raw);
        } catch {
          problem(name, "earliest, latest, or JSON like {\"orders\":{\"0\":42}}.");
        }
      }
    }
  } else if (!form.topic.trim()) problem("topic", "Choose the topic to read.");
  if ((form.kind === "throughput" || form.kind === "consumer_lag") && form.window.trim() && !WINDOW.test(form.window))
    problem("window", "Like '1 minute', '30 seconds', '2 hours' or '1 day'.");
  if (form.kind === "top_keys") intIn("limit", 1, 10_000, true);
  if (form.kind === "value_size_histogram") intIn("bucket_bytes", 1, 2 ** 30, true);
  if (form.kind === "json_aggregate") {
    if (!JSON_PATH.test(form.field.trim())) problem("field", "A JSON path like $.total, $.customer.id or $.items[0].");
    if (form.group_by.trim() && !JSON_PATH.test(form.group_by.trim())) problem("group_by", "A JSON path like $.region (or leave empty).");
    if (!form.functions.length) problem("functions", "Pick at least one aggregate.");
  }
  if (form.kind === "consumer_lag" && !form.group.trim()) problem("group", "Name the consumer group.");
  if (form.range_mode === "last") intIn("last_minutes", 1, 527_040, false);
  if (form.range_mode === "between") {
    const start = Date.parse(form.start);
    if (Number.isNaN(start)) problem("start", "Choose when the range starts.");
    if (form.end && (Number.isNaN(Date.parse(form.end)) || Date.parse(form.end) <= start)) problem("end", "The end must be after the start.");
  }
  if (form.schedule_mode === "interval") intIn("interval_seconds", 1, 366 * 86_400, false);
  if (form.schedule_mode === "cron" && form.cron.trim().split(/\s+/).length !== 5)
    problem("cron", "Five fields: minute hour day-of-month month day-of-week (UTC), e.g. */5 * * * *.");
  if (form.chart_kind === "line" || form.chart_kind === "bar") {
    if (!form.chart_x.trim()) problem("chart_x", "Name the column for the x axis.");
    if (!splitList(form.chart_y).length) problem("chart_y", "Name one or more columns to plot (comma-separated).");
  }
});

export type ReportForm = z.input<typeof reportSchema>;
export type ReportValues = z.output<typeof reportSchema>;
export type FormField = keyof ReportValues;

export const emptyReport: ReportForm = {
  name: "", description: "", kind: "throughput", topic: "", window: "1 minute", limit: "10", bucket_bytes: "100",
  field: "", group_by: "", functions: [...AGGREGATES], group: "", sql: "", topics: "", starting_offsets: "",
  ending_offsets: "", value_format: "binary", value_subject: "", value_message: "", range_mode: "all", last_minutes: "60", start: "", end: "", schedule_mode: "none",
  interval_seconds: "3600", cron: "0 * * * *", chart_kind: "default", chart_x: "", chart_y: "",
};

export function splitList(value: string): string[] {
  return value.split(",").map((item) => item.trim()).filter(Boolean);
}

function instant(local: string): string {
  return new Date(local).toISOString();
}

/** The parameters of the chosen kind, only those that were given (the API fills in defaults). */
export function paramsOf(form: ReportValues): Record<string, unknown> {
  const topic = form.topic.trim();
  switch (form.kind) {
    case "sql": {
      const params: Record<string, unknown> = { sql: form.sql.trim(), topics: splitList(form.topics) };
      if (form.starting_offsets.trim()) params.starting_offsets = form.starting_offsets.trim();
      if (form.ending_offsets.trim()) params.ending_offsets = form.ending_offsets.trim();
      if (form.value_format !== "binary") {
        params.value_format = form.value_format;
        if (form.value_subject.trim()) params.value_subject = form.value_subject.trim();
        if (form.value_format === "protobuf" && form.value_message.trim()) params.value_message = form.value_message.trim();
      }
      return params;
    }
    case "throughput":
      return { topic, ...(form.window.trim() ? { window: form.window.trim() } : {}) };
    case "top_keys":
      return { topic, ...(form.limit.trim() ? { limit: Number(form.limit) } : {}) };
    case "value_size_histogram":
      return { topic, ...(form.bucket_bytes.trim() ? { bucket_bytes: Number(form.bucket_bytes) } : {}) };
    case "json_aggregate":
      return { topic, field: form.field.trim(), ...(form.group_by.trim() ? { group_by: form.group_by.trim() } : {}), functions: form.functions };
    case "consumer_lag":
      return { topic, group: form.group.trim(), ...(form.window.trim() ? { window: form.window.trim() } : {}) };
  }
}

export function scheduleOf(form: Pick<ReportValues, "schedule_mode" | "interval_seconds" | "cron">): Record<string, unknown> | null {
  if (form.schedule_mode === "interval") return { interval_seconds: Number(form.interval_seconds) };
  if (form.schedule_mode === "cron") return { cron: form.cron.trim().split(/\s+/).join(" ") };
  return null;
}

/** The create request the form's values become. */
export function toRequest(form: ReportValues): Schemas["ReportCreateRequest"] {
  const time_range = form.range_mode === "last" ? { last_minutes: Number(form.last_minutes) }
    : form.range_mode === "between" ? { start: instant(form.start), ...(form.end ? { end: instant(form.end) } : {}) }
    : null;
  const chart = form.chart_kind === "default" ? null : form.chart_kind === "table" ? { kind: "table" }
    : { kind: form.chart_kind, x: form.chart_x.trim(), y: splitList(form.chart_y) };
  return {
    name: form.name.trim(), description: form.description, kind: form.kind, params: paramsOf(form), time_range, chart,
    schedule: scheduleOf(form),
  };
}

const API_FIELDS: Record<string, FormField> = {
  name: "name", description: "description", kind: "kind", params: "topic",
  "params.topic": "topic", "params.topics": "topics", "params.sql": "sql", "params.window": "window",
  "params.limit": "limit", "params.bucket_bytes": "bucket_bytes", "params.field": "field",
  "params.group_by": "group_by", "params.functions": "functions", "params.group": "group",
  "params.starting_offsets": "starting_offsets", "params.ending_offsets": "ending_offsets",
  "params.value_format": "value_format", "params.value_subject": "value_subject", "params.value_version": "value_subject", "params.value_message": "value_message",
  time_range: "range_mode", "time_range.last_minutes": "last_minutes", "time_range.start": "start", "time_range.end": "end",
  schedule: "schedule_mode", "schedule.interval_seconds": "interval_seconds", "schedule.cron": "cron",
  chart: "chart_kind", "chart.kind": "chart_kind", "chart.x": "chart_x", "chart.y": "chart_y",
};

/** The form field an API error names (``params.topic`` → ``topic``); null when it names none of them. */
export function formFieldOf(apiField: string, kind: Kind): FormField | null {
  if (apiField === "params" && kind === "sql") return "sql";
  if (apiField.startsWith("chart.")) return API_FIELDS[apiField] ?? "chart_kind";
  return API_FIELDS[apiField] ?? null;
}
