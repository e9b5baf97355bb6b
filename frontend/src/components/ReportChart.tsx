// A report result's chart (recharts, loaded lazily with the report page): line or bar, from chartFrom's series.
import { Bar, BarChart, CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { ChartSpec } from "../lib/reportChart";

const COLORS = ["#1f5fa8", "#9a3b00", "#2d6a2d", "#6b2d8f", "#7a5a00"];

export default function ReportChart({ spec, title }: { spec: ChartSpec; title: string }) {
  const lines = spec.series.map((s, i) => spec.kind === "line"
    ? <Line key={s.key} dataKey={s.key} name={s.name} stroke={COLORS[i % COLORS.length]} dot={false} isAnimationActive={false} />
    : <Bar key={s.key} dataKey={s.key} name={s.name} fill={COLORS[i % COLORS.length]} isAnimationActive={false} />);
  const Chart = spec.kind === "line" ? LineChart : BarChart;
  return (
    <figure aria-label={`${title} chart`} className="chart">
      <ResponsiveContainer width="100%" height={260}>
        <Chart data={spec.data}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="x" name={spec.x} />
          <YAxis />
          <Tooltip />
          <Legend />
          {lines}
        </Chart>
      </ResponsiveContainer>
      <figcaption className="sr-only">{spec.series.map((s) => s.name).join(", ")} by {spec.x}; the table below has the same figures.</figcaption>
    </figure>
  );
}
