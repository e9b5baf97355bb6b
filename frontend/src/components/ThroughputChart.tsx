// Records in/out per second over time, summed over the cluster's brokers (recharts, loaded lazily). The y axis
// follows the data (0.05 rec/s is a visible line, not a flat 0), ticks and tooltips in rec/s.
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Schemas } from "../api/client";
import { rate } from "../lib/units";

export function sumByMinute(points: Schemas["ThroughputPoint"][]): { at: string; in: number; out: number }[] {
  const byTime = new Map<string, { in: number; out: number }>();
  for (const p of points) {
    const slot = byTime.get(p.at) ?? { in: 0, out: 0 };
    slot.in += p.records_in_per_sec;
    slot.out += p.records_out_per_sec;
    byTime.set(p.at, slot);
  }
  // Not rounded: at low traffic the rates are fractions, and rounding drew them as a flat 0.
  return [...byTime.entries()].sort(([a], [b]) => a.localeCompare(b))
    .map(([at, v]) => ({ at: new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }), in: v.in, out: v.out }));
}

/** The y axis' top: a round number just above the largest rate (1 when there was no traffic at all). */
export function axisMax(rows: { in: number; out: number }[]): number {
  const top = Math.max(0, ...rows.flatMap((r) => [r.in, r.out]));
  if (top <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(top));
  const steps = [1, 2, 2.5, 5, 10];
  return steps.map((s) => s * magnitude).find((v) => v >= top * 1.05) ?? 10 * magnitude;
}

export default function ThroughputChart({ points }: { points: Schemas["ThroughputPoint"][] }) {
  const data = sumByMinute(points);
  if (!data.length) return <p className="muted">No throughput samples yet (one a minute).</p>;
  return (
    <figure aria-label="Cluster throughput chart" className="chart">
      <ResponsiveContainer width="100%" height={220}>
        <LineChart data={data} margin={{ left: 8, right: 16 }}>
          <CartesianGrid strokeDasharray="3 3" stroke="var(--mantine-color-default-border)" />
          <XAxis dataKey="at" minTickGap={24} />
          <YAxis domain={[0, axisMax(data)]} allowDecimals tickFormatter={(v: number) => rate(v, "")} width={56} />
          <Tooltip formatter={(v) => rate(Number(v))} contentStyle={{ background: "var(--mantine-color-body)" }} />
          <Legend />
          <Line dataKey="in" name="records in/s" stroke="#3b5bdb" dot={false} isAnimationActive={false} />
          <Line dataKey="out" name="records out/s" stroke="#d9480f" dot={false} isAnimationActive={false} />
        </LineChart>
      </ResponsiveContainer>
      <figcaption className="sr-only">Records produced and consumed per second, per minute, for the last hour.</figcaption>
    </figure>
  );
}
