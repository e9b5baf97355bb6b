// Lag per partition as bars (recharts), loaded lazily with the group page. Partitions never committed have no
// lag to draw (null), so they are left out rather than drawn as 0.
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Schemas } from "../api/client";
import { count } from "../lib/units";

export default function LagChart({ partitions }: { partitions: Schemas["PartitionLag"][] }) {
  const data = partitions.filter((p) => p.lag != null).map((p) => ({ name: `${p.topic}[${p.partition}]`, lag: p.lag }));
  return (
    <figure aria-label="Lag per partition chart" className="chart">
      <ResponsiveContainer width="100%" height={220}>
        <BarChart data={data}>
          <CartesianGrid strokeDasharray="3 3" stroke="var(--mantine-color-default-border)" />
          <XAxis dataKey="name" />
          <YAxis allowDecimals={false} tickFormatter={(v: number) => count(v, { short: true })} />
          <Tooltip formatter={(v) => count(Number(v))} contentStyle={{ background: "var(--mantine-color-body)" }} />
          <Bar dataKey="lag" fill="#3b5bdb" isAnimationActive={false} />
        </BarChart>
      </ResponsiveContainer>
      <figcaption className="sr-only">Lag of each partition; the table below has the same figures.</figcaption>
    </figure>
  );
}
