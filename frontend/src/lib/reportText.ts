// A report's definition in words for its page: parameters as labelled values (never raw JSON), the time range,
// the chart, and a run's progress. Pure functions.
import { bytes, count, MISSING } from "./units";

const PARAM_LABEL: Record<string, string> = {
  topic: "Topic", topics: "Topics", window: "Window", limit: "How many keys", bucket_bytes: "Bucket width", field: "JSON field",
  group_by: "Group by", functions: "Aggregates", group: "Consumer group", sql: "Spark SQL", starting_offsets: "Starting offsets",
  ending_offsets: "Ending offsets",
};

function valueText(key: string, value: unknown): string {
  if (value == null || value === "") return MISSING;
  if (Array.isArray(value)) return value.map(String).join(", ");
  if (typeof value === "number") return /bytes/.test(key) ? bytes(value) : count(value);
  if (typeof value === "object") return Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}: ${String(v)}`).join(", ");
  return String(value);
}

export function paramPairs(params: unknown): [string, string][] {
  if (!params || typeof params !== "object") return [];
  return Object.entries(params as Record<string, unknown>).map(([k, v]) => [PARAM_LABEL[k] ?? k.replace(/_/g, " "), valueText(k, v)]);
}

export function timeRangeText(range: unknown): string {
  const r = (range ?? {}) as { last_minutes?: number; start?: string; end?: string };
  if (r.last_minutes) return `the last ${count(r.last_minutes)} minute${r.last_minutes === 1 ? "" : "s"}`;
  if (r.start || r.end) {
    const at = (iso?: string) => (iso ? new Date(iso).toLocaleString() : "…");
    return `${at(r.start)} – ${at(r.end)}`;
  }
  return "every record";
}

export function chartText(chart: unknown): string {
  const c = (chart ?? null) as { kind?: string; x?: string; y?: string[] } | null;
  if (!c || !c.kind) return "the kind's default";
  if (c.kind === "table") return "table only";
  return `${c.kind} chart of ${(c.y ?? []).join(", ") || MISSING} by ${c.x ?? MISSING}`;
}

/** Percent done of a run: the API's progress_percent, else from its task counts; null when unknown. */
export function progressOf(run: { status: string; progress?: unknown } & Record<string, unknown>): number | null {
  if (run.status === "succeeded") return 100;
  if (typeof run.progress_percent === "number") return run.progress_percent;
  const p = (run.progress ?? {}) as { tasks?: number; tasks_done?: number };
  if (p.tasks && p.tasks > 0 && typeof p.tasks_done === "number") return Math.min(100, (100 * p.tasks_done) / p.tasks);
  return null;
}
