// How a record's key/value is shown (pretty JSON, text, bytes) and exported (CSV, JSON). Pure functions.
import type { Encoding, TailRecord } from "./tail";

export type View = "json" | "text" | "bytes";

export function toBytes(data: string | null, encoding: Encoding): Uint8Array {
  if (data == null) return new Uint8Array();
  if (encoding === "base64") return Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(data);
}

export function hexdump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = Array.from(bytes.slice(at, at + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n");
}

/** The value as the chosen view shows it; "json" falls back to text when the value is not JSON. */
export function render(data: string | null, encoding: Encoding, view: View): string {
  if (data == null) return "null";
  if (view === "bytes") return hexdump(toBytes(data, encoding));
  if (encoding === "base64") return view === "text" ? `(binary, base64) ${data}` : hexdump(toBytes(data, encoding));
  if (view === "json") {
    try {
      return JSON.stringify(JSON.parse(data), null, 2);
    } catch {
      return data;
    }
  }
  return data;
}

const CSV_COLUMNS = ["partition", "offset", "timestamp", "key", "value", "headers"] as const;

function csvCell(value: string): string {
  return /[",\n\r]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

export function toCsv(records: TailRecord[]): string {
  const rows = records.map((r) => [
    String(r.partition), String(r.offset), new Date(r.timestamp).toISOString(), r.key ?? "", r.value ?? "",
    JSON.stringify(Object.fromEntries(r.headers.map((h) => [h.key, h.value]))),
  ].map(csvCell).join(","));
  return [CSV_COLUMNS.join(","), ...rows].join("\r\n") + "\r\n";
}

export function toJson(records: TailRecord[]): string {
  return JSON.stringify(records, null, 2);
}

export function download(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
