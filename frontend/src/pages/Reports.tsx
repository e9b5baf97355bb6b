// Reports of a cluster: the definitions (with their last run) and the form that creates one — a built-in kind
// with its parameters or a Spark SQL query, a time range, a schedule and a chart. Rules are checked by zod
// first; what only the server knows (an unknown topic, invalid SQL) comes back as field errors shown there.
import { zodResolver } from "@hookform/resolvers/zod";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import type { ReactNode } from "react";
import { type FieldErrors, type UseFormRegister, useForm } from "react-hook-form";
import { Link, Navigate, useNavigate, useParams } from "react-router";
import { api, ApiError, type Schemas, unwrap } from "../api/client";
import { Badge, DataTable, ErrorText, Loading, when } from "../components/ui";
import {
  AGGREGATES, emptyReport, type FormField, formFieldOf, KINDS, type ReportForm, reportSchema, type ReportValues, toRequest,
} from "../lib/reportForm";
import { useTenant } from "../session";
import { useClusters } from "./Clusters";

const col = createColumnHelper<Schemas["Report"]>();
export const ROLE_NOTE = "Viewers read reports and their results; creating, running, scheduling and deleting them needs the member role.";

export function RunStatus({ status }: { status: string }) {
  const tone = status === "succeeded" ? "ok" : status === "failed" ? "bad" : status === "cancelled" ? "warn" : "info";
  return <Badge tone={tone}>{status}</Badge>;
}

export function scheduleText(schedule: unknown): string {
  const s = (schedule ?? {}) as { interval_seconds?: number; cron?: string };
  if (s.interval_seconds) return `every ${s.interval_seconds} s`;
  if (s.cron) return `cron ${s.cron} (UTC)`;
  return "—";
}

/** /t/{tenant}/reports: reports belong to a cluster; one cluster goes straight to its reports. */
export function TenantReportsPage() {
  const { slug } = useTenant();
  const clusters = useClusters(slug);
  if (clusters.isPending) return <Loading what="clusters" />;
  const list = clusters.data?.results ?? [];
  if (list.length === 1) return <Navigate to={`/t/${slug}/clusters/${list[0].id}/reports`} replace />;
  return (
    <>
      <h1>Reports</h1>
      <ErrorText error={clusters.error} />
      <p>Reports read a cluster's topics. Choose the cluster:</p>
      <ul>{list.map((c) => <li key={c.id}><Link to={`/t/${slug}/clusters/${c.id}/reports`}>{c.name}</Link></li>)}</ul>
      {!list.length && <p className="muted">No clusters yet.</p>}
    </>
  );
}

export function ReportsPage() {
  const { slug, can } = useTenant();
  const { cluster = "" } = useParams();
  const reports = useQuery({
    queryKey: ["reports", slug, cluster],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster }, query: { limit: 200, ordering: "name" } },
    })),
    refetchInterval: 5000,
  });
  const columns = [
    col.accessor("name", { header: "Name", cell: (x) => <Link to={x.row.original.id}>{x.getValue()}</Link> }),
    col.accessor("kind", { header: "Kind", cell: (x) => KINDS.find((k) => k.value === x.getValue())?.label ?? x.getValue() }),
    col.accessor((r) => (r.params as { topic?: string; topics?: string[] })?.topic ?? (r.params as { topics?: string[] })?.topics?.join(", ") ?? "",
      { id: "topics", header: "Reads" }),
    col.accessor("schedule", { header: "Schedule", enableSorting: false, cell: (x) => scheduleText(x.getValue()) }),
    col.accessor((r) => (r.last_run?.status as string | undefined) ?? "", {
      id: "last_run", header: "Last run", cell: (x) => x.getValue() ? <><RunStatus status={x.getValue()} /> {when(x.row.original.last_run?.queued_at as string)}</> : "never",
    }),
    col.accessor("created_by", { header: "Created by" }),
  ];
  return (
    <>
      <h1>Reports</h1>
      {can("member") ? <CreateReport slug={slug} cluster={cluster} /> : <p className="muted" role="note">{ROLE_NOTE}</p>}
      {reports.isPending ? <Loading what="reports" /> : <ErrorText error={reports.error} />}
      {reports.data && <DataTable caption="Reports" data={reports.data.results} columns={columns} rowId={(r) => r.id} empty="No reports yet." />}
    </>
  );
}

function Problem({ errors, name }: { errors: FieldErrors<ReportForm>; name: FormField }) {
  const message = errors[name]?.message;
  return message ? <span role="alert" className="error" id={`${name}-error`}>{String(message)}</span> : null;
}

function Field({ label, name, errors, children }: { label: string; name: FormField; errors: FieldErrors<ReportForm>; children: ReactNode }) {
  return (
    <div className="stack field">
      <label htmlFor={`report-${name}`}>{label}</label>
      {children}
      <Problem errors={errors} name={name} />
    </div>
  );
}

function input(register: UseFormRegister<ReportForm>, name: FormField, errors: FieldErrors<ReportForm>, extra: Record<string, unknown> = {}) {
  return <input id={`report-${name}`} {...register(name)} aria-invalid={!!errors[name]} aria-describedby={errors[name] ? `${name}-error` : undefined} {...extra} />;
}

export function CreateReport({ slug, cluster }: { slug: string; cluster: string }) {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const topics = useQuery({
    queryKey: ["topic-names", slug, cluster],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster }, query: { limit: 500, ordering: "name" } },
    })),
  });
  const { register, handleSubmit, formState: { errors }, watch, setError } = useForm<ReportForm, unknown, ReportValues>({
    resolver: zodResolver(reportSchema), defaultValues: emptyReport,
  });
  const create = useMutation({
    mutationFn: (form: ReportValues) => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster } }, body: toRequest(form),
    })),
    onSuccess: (report) => {
      queryClient.invalidateQueries({ queryKey: ["reports", slug, cluster] });
      navigate(report.id);
    },
    onError: (error, form) => {
      if (!(error instanceof ApiError)) return;
      if (error.code === "report_exists") setError("name", { type: "server", message: error.message });
      for (const [apiField, messages] of Object.entries(error.fields)) {
        const field = formFieldOf(apiField, form.kind);
        if (field) setError(field, { type: "server", message: [messages].flat().join(" ") });
      }
    },
  });
  const kind = watch("kind");
  const range = watch("range_mode");
  const schedule = watch("schedule_mode");
  const chart = watch("chart_kind");
  const shownAtField = create.error instanceof ApiError && (create.error.code === "report_exists"
    || Object.keys(create.error.fields).some((f) => formFieldOf(f, kind)));
  return (
    <form className="stack report-form" aria-label="Create a report" noValidate onSubmit={handleSubmit((form) => create.mutate(form))}>
      <h2>Create a report</h2>
      <div className="inline-form">
        <Field label="Name" name="name" errors={errors}>{input(register, "name", errors)}</Field>
        <Field label="Kind" name="kind" errors={errors}>
          <select id="report-kind" {...register("kind")}>{KINDS.map((k) => <option key={k.value} value={k.value}>{k.label}</option>)}</select>
        </Field>
        <Field label="Description" name="description" errors={errors}>{input(register, "description", errors)}</Field>
      </div>
      <fieldset className="inline">
        <legend>Parameters</legend>
        {kind !== "sql" && (
          <Field label="Topic" name="topic" errors={errors}>{input(register, "topic", errors, { list: "report-topics", autoComplete: "off" })}</Field>
        )}
        <datalist id="report-topics">{topics.data?.results.map((t) => <option key={t.name} value={t.name} />)}</datalist>
        {(kind === "throughput" || kind === "consumer_lag") && (
          <Field label="Window" name="window" errors={errors}>{input(register, "window", errors, { placeholder: "1 minute" })}</Field>
        )}
        {kind === "top_keys" && <Field label="How many keys" name="limit" errors={errors}>{input(register, "limit", errors, { inputMode: "numeric" })}</Field>}
        {kind === "value_size_histogram" && (
          <Field label="Bucket width (bytes)" name="bucket_bytes" errors={errors}>{input(register, "bucket_bytes", errors, { inputMode: "numeric" })}</Field>
        )}
        {kind === "json_aggregate" && (
          <>
            <Field label="JSON field" name="field" errors={errors}>{input(register, "field", errors, { placeholder: "$.total" })}</Field>
            <Field label="Group by (JSON field)" name="group_by" errors={errors}>{input(register, "group_by", errors, { placeholder: "$.region (optional)" })}</Field>
            <fieldset className="inline" aria-describedby={errors.functions ? "functions-error" : undefined}>
              <legend>Aggregates</legend>
              {AGGREGATES.map((f) => <label key={f}><input type="checkbox" value={f} {...register("functions")} /> {f}</label>)}
              <Problem errors={errors} name="functions" />
            </fieldset>
          </>
        )}
        {kind === "consumer_lag" && <Field label="Consumer group" name="group" errors={errors}>{input(register, "group", errors)}</Field>}
        {kind === "sql" && (
          <>
            <Field label="Topics (comma-separated)" name="topics" errors={errors}>{input(register, "topics", errors, { placeholder: "orders, payments" })}</Field>
            <Field label="Spark SQL" name="sql" errors={errors}>
              <textarea id="report-sql" rows={4} cols={60} {...register("sql")} aria-invalid={!!errors.sql}
                placeholder="SELECT key_str, count(*) AS n FROM orders GROUP BY key_str" />
            </Field>
            <Field label="Starting offsets" name="starting_offsets" errors={errors}>{input(register, "starting_offsets", errors, { placeholder: "earliest" })}</Field>
            <Field label="Ending offsets" name="ending_offsets" errors={errors}>{input(register, "ending_offsets", errors, { placeholder: "latest" })}</Field>
            <p className="muted">Each topic is a view named after it ('-' and '.' become '_'), with Spark's Kafka columns plus key_str and value_str.</p>
          </>
        )}
      </fieldset>
      <fieldset className="inline">
        <legend>Records</legend>
        <Field label="Time range" name="range_mode" errors={errors}>
          <select id="report-range_mode" {...register("range_mode")}>
            <option value="all">Every record</option>
            <option value="last">The last N minutes</option>
            <option value="between">Between two times</option>
          </select>
        </Field>
        {range === "last" && <Field label="Minutes" name="last_minutes" errors={errors}>{input(register, "last_minutes", errors, { inputMode: "numeric" })}</Field>}
        {range === "between" && (
          <>
            <Field label="From" name="start" errors={errors}>{input(register, "start", errors, { type: "datetime-local", step: 1 })}</Field>
            <Field label="Until" name="end" errors={errors}>{input(register, "end", errors, { type: "datetime-local", step: 1 })}</Field>
          </>
        )}
      </fieldset>
      <fieldset className="inline">
        <legend>Schedule and chart</legend>
        <Field label="Schedule" name="schedule_mode" errors={errors}>
          <select id="report-schedule_mode" {...register("schedule_mode")}>
            <option value="none">Only when run</option>
            <option value="interval">Every N seconds</option>
            <option value="cron">Cron (UTC)</option>
          </select>
        </Field>
        {schedule === "interval" && <Field label="Seconds" name="interval_seconds" errors={errors}>{input(register, "interval_seconds", errors, { inputMode: "numeric" })}</Field>}
        {schedule === "cron" && <Field label="Cron" name="cron" errors={errors}>{input(register, "cron", errors, { placeholder: "*/5 * * * *" })}</Field>}
        <Field label="Chart" name="chart_kind" errors={errors}>
          <select id="report-chart_kind" {...register("chart_kind")}>
            <option value="default">The kind's default</option>
            <option value="line">Line</option>
            <option value="bar">Bar</option>
            <option value="table">Table only</option>
          </select>
        </Field>
        {(chart === "line" || chart === "bar") && (
          <>
            <Field label="X column" name="chart_x" errors={errors}>{input(register, "chart_x", errors)}</Field>
            <Field label="Y columns" name="chart_y" errors={errors}>{input(register, "chart_y", errors, { placeholder: "records, bytes" })}</Field>
          </>
        )}
      </fieldset>
      <div><button type="submit" disabled={create.isPending}>Create report</button></div>
      {!shownAtField && <ErrorText error={create.error} />}
    </form>
  );
}
