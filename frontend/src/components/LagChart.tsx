// Lag per partition as bars (recharts), loaded lazily with the group page.
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Schemas } from "../api/client";

export default function LagChart({ partitions }: { partitions: Schemas["PartitionLag"][] }) {
  const data = partitions.map((p) => ({ name: `${p.topic}[${p.partition}]`, lag: p.lag }));
  return (
    <figure aria-label="Lag per partition chart" className="chart">
      <ResponsiveContainer width="100%" height={220}>
        <BarChart data={data}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="name" />
          <YAxis allowDecimals={false} />
          <Tooltip />
          <Bar dataKey="lag" fill="#1f5fa8" isAnimationActive={false} />
        </BarChart>
      </ResponsiveContainer>
      <figcaption className="sr-only">Lag of each partition; the table below has the same figures.</figcaption>
    </figure>
  );
}
