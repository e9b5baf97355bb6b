// A report's chart description ({kind, x, y}, from the API's result page) applied to a page of its rows: the
// series recharts draws. Pure, so the mapping is tested without a browser; the chart component itself is lazy.

export interface ChartSpec {
  kind: "line" | "bar";
  x: string;
  series: { key: string; name: string }[];
  data: Record<string, string | number | null>[];
}

interface Column {
  name: string;
  type?: string;
}

function label(value: unknown, type: string | undefined): string {
  if (value === null || value === undefined) return "(null)";
  if (type && /timestamp|date/i.test(type) && typeof value === "string" && !Number.isNaN(Date.parse(value)))
    return new Date(value).toISOString().replace("T", " ").replace(/\.000Z$|Z$/, "");
  return String(value);
}

function numeric(value: unknown): number | null {
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  return null;
}

/** The series to draw, or null when the description asks for a table or names no column of the result.
 * Values are keyed ``y0``, ``y1``… (column names may hold characters recharts reads as paths). */
export function chartFrom(chart: unknown, columns: unknown[], rows: Record<string, unknown>[]): ChartSpec | null {
  const c = (chart ?? {}) as { kind?: string; x?: string; y?: string[] | string };
  if (c.kind !== "line" && c.kind !== "bar") return null;
  const known = new Map((columns as Column[]).filter((col) => col && typeof col.name === "string").map((col) => [col.name, col]));
  if (!c.x || !known.has(c.x)) return null;
  const ys = [c.y ?? []].flat().filter((name) => known.has(name));
  if (!ys.length) return null;
  const xType = known.get(c.x)?.type;
  return {
    kind: c.kind,
    x: c.x,
    series: ys.map((name, i) => ({ key: `y${i}`, name })),
    data: rows.map((row) => ({ x: label(row[c.x as string], xType), ...Object.fromEntries(ys.map((name, i) => [`y${i}`, numeric(row[name])])) })),
  };
}
