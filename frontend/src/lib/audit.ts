// An audit event's details for people: "key: value" pairs with times as dates (ISO strings and the epoch-second
// floats older events carry), lists shortened, nested objects flattened one level; never raw JSON.
import { MISSING } from "./units";

const TIME_KEY = /(_at|_time|^at|^since|^until|timestamp)$/;

function looksEpochSeconds(key: string, value: number): boolean {
  return TIME_KEY.test(key) && value > 1e9 && value < 1e11;
}

function shown(key: string, value: unknown): string {
  if (value == null) return MISSING;
  if (typeof value === "number") {
    if (looksEpochSeconds(key, value)) return new Date(value * 1000).toLocaleString();
    return Number.isInteger(value) ? value.toLocaleString("en-US") : String(Math.round(value * 1000) / 1000);
  }
  if (typeof value === "string") {
    if (TIME_KEY.test(key) && /^\d{4}-\d\d-\d\dT/.test(value)) {
      const at = Date.parse(value);
      if (!Number.isNaN(at)) return new Date(at).toLocaleString();
    }
    return value.length > 120 ? `${value.slice(0, 117)}…` : value;
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (Array.isArray(value)) {
    const items = value.slice(0, 5).map((v) => (typeof v === "object" ? "…" : String(v)));
    return `${items.join(", ")}${value.length > 5 ? ` (+${value.length - 5} more)` : ""}`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  return entries.slice(0, 4).map(([k, v]) => `${k}=${typeof v === "object" && v !== null ? "…" : String(v)}`).join(", ") + (entries.length > 4 ? ", …" : "");
}

/** Label/value pairs of ``data``: keys in words ("first_at" -> "first at"). */
export function detailPairs(data: unknown): [string, string][] {
  if (data == null || typeof data !== "object" || Array.isArray(data)) return data == null ? [] : [["value", shown("", data)]];
  return Object.entries(data as Record<string, unknown>).map(([key, value]) => [key.replace(/_/g, " "), shown(key, value)]);
}

/** "topic.create" -> "topic create"; the API's own summary is preferred where it has one. */
export function actionLabel(action: string): string {
  return action.replace(/[._]/g, " ");
}
