// Records in/out per second over time, summed over the cluster's brokers (recharts, loaded lazily).
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Schemas } from "../api/client";

export function sumByMinute(points: Schemas["ThroughputPoint"][]): { at: string; in: number; out: number }[] {
  const byTime = new Map<string, { in: number; out: number }>();
  for (const p of points) {
    const slot = byTime.get(p.at) ?? { in: 0, out: 0 };
    slot.in += p.records_in_per_sec;
    slot.out += p.records_out_per_sec;
    byTime.set(p.at, slot);
  }
  return [...byTime.entries()].sort(([a], [b]) => a.localeCompare(b))
    .map(([at, v]) => ({ at: new Date(at).toLocaleTimeString(), in: Math.round(v.in), out: Math.round(v.out) }));
}

export default function ThroughputChart({ points }: { points: Schemas["ThroughputPoint"][] }) {
  const data = sumByMinute(points);
  if (!data.length) return <p className="muted">No throughput samples yet (one a minute).</p>;
  return (
    <figure aria-label="Cluster throughput chart" className="chart">
      <ResponsiveContainer width="100%" height={220}>
        <LineChart data={data}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="at" />
          <YAxis allowDecimals={false} />
          <Tooltip />
          <Legend />
          <Line dataKey="in" name="records in/s" stroke="#1f5fa8" dot={false} isAnimationActive={false} />
          <Line dataKey="out" name="records out/s" stroke="#9a3b00" dot={false} isAnimationActive={false} />
        </LineChart>
      </ResponsiveContainer>
      <figcaption className="sr-only">Records produced and consumed per second, per minute, for the last hour.</figcaption>
    </figure>
  );
}
