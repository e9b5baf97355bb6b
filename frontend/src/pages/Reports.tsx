// Reports of a cluster: the definitions (with their last run) and the form that creates one — a built-in kind
// with its parameters or a Spark SQL query, a time range, a schedule and a chart. Rules are checked by zod
// first; what only the server knows (an unknown topic, invalid SQL) comes back as field errors shown there.
import { zodResolver } from "@hookform/resolvers/zod";
import { Anchor, Button, Checkbox, Fieldset, Group, Input, NativeSelect, SimpleGrid, Stack, Text, Textarea, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { type ReactNode, useState } from "react";
import { type FieldErrors, type UseFormRegister, useForm } from "react-hook-form";
import { Link, Navigate, useNavigate, useParams } from "react-router";
import { api, ApiError, type Schemas, unwrap } from "../api/client";
import { Badge, DataTable, ErrorText, FormDrawer, Loading, PageHeader, when } from "../components/ui";
import {
  AGGREGATES, emptyReport, type FormField, formFieldOf, KINDS, type ReportForm, reportSchema, type ReportValues, toRequest,
  VALUE_FORMATS,
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
  const [creating, setCreating] = useState(false);
  const columns = [
    col.accessor("name", { header: "Name", cell: (x) => <Anchor component={Link} to={x.row.original.id}>{x.getValue()}</Anchor> }),
    col.accessor("kind", { header: "Kind", cell: (x) => KINDS.find((k) => k.value === x.getValue())?.label ?? x.getValue() }),
    col.accessor((r) => (r.params as { topic?: string; topics?: string[] })?.topic ?? (r.params as { topics?: string[] })?.topics?.join(", ") ?? "",
      { id: "topics", header: "Reads" }),
    col.accessor("schedule", { header: "Schedule", enableSorting: false, cell: (x) => scheduleText(x.getValue()) }),
    col.accessor((r) => (r.last_run?.status as string | undefined) ?? "", {
      id: "last_run", header: "Last run", cell: (x) => x.getValue() ? <Group gap="xs"><RunStatus status={x.getValue()} /> {when(x.row.original.last_run?.queued_at as string)}</Group> : "never",
    }),
    col.accessor("created_by", { header: "Created by" }),
  ];
  return (
    <>
      <PageHeader title="Reports" description="Questions about this cluster's topics, answered by Spark: throughput, top keys, lag, sizes, JSON aggregates or SQL; run now or on a schedule."
        actions={can("member") && <Button onClick={() => setCreating(true)}>New report</Button>} />
      {!can("member") && <Text size="sm" className="muted" role="note" mb="sm">{ROLE_NOTE}</Text>}
      <ErrorText error={reports.error} />
      <DataTable caption="Reports" data={reports.data?.results} loading={reports.isPending} columns={columns} rowId={(r) => r.id} empty="No reports yet." />
      {can("member") && (
        <FormDrawer opened={creating} onClose={() => setCreating(false)} title="Create a report">
          <CreateReport slug={slug} cluster={cluster} />
        </FormDrawer>
      )}
    </>
  );
}

function Problem({ errors, name }: { errors: FieldErrors<ReportForm>; name: FormField }) {
  const message = errors[name]?.message;
  return message ? <Text size="xs" role="alert" className="error" id={`${name}-error`}>{String(message)}</Text> : null;
}

function Field({ label, name, errors, children }: { label: string; name: FormField; errors: FieldErrors<ReportForm>; children: ReactNode }) {
  return (
    <Stack gap={2} className="field">
      <Input.Label htmlFor={`report-${name}`}>{label}</Input.Label>
      {children}
      <Problem errors={errors} name={name} />
    </Stack>
  );
}

/** A text field with its label and its problem under it (Mantine links them: aria-describedby, aria-invalid). */
function input(register: UseFormRegister<ReportForm>, name: FormField, errors: FieldErrors<ReportForm>, extra: Record<string, unknown> = {}, label = "") {
  const message = errors[name]?.message;
  return <TextInput id={`report-${name}`} label={label} {...register(name)} error={message ? String(message) : undefined} errorProps={{ role: "alert" }} {...extra} />;
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
  const valueFormat = watch("value_format");
  const shownAtField = create.error instanceof ApiError && (create.error.code === "report_exists"
    || Object.keys(create.error.fields).some((f) => formFieldOf(f, kind)));
  return (
    <form className="report-form" aria-label="Create a report" noValidate onSubmit={handleSubmit((form) => create.mutate(form))}>
      <Stack>
      <SimpleGrid cols={{ base: 1, sm: 2 }}>
        {input(register, "name", errors, {}, "Name")}
        <Field label="Kind" name="kind" errors={errors}>
          <NativeSelect id="report-kind" {...register("kind")}>{KINDS.map((k) => <option key={k.value} value={k.value}>{k.label}</option>)}</NativeSelect>
        </Field>
        {input(register, "description", errors, {}, "Description")}
      </SimpleGrid>
      <Fieldset legend="Parameters"><SimpleGrid cols={{ base: 1, sm: 2 }}>
        {kind !== "sql" && input(register, "topic", errors, { list: "report-topics", autoComplete: "off" }, "Topic")}
        <datalist id="report-topics">{topics.data?.results.map((t) => <option key={t.name} value={t.name} />)}</datalist>
        {(kind === "throughput" || kind === "consumer_lag") && input(register, "window", errors, { placeholder: "1 minute" }, "Window")}
        {kind === "top_keys" && input(register, "limit", errors, { inputMode: "numeric" }, "How many keys")}
        {kind === "value_size_histogram" && input(register, "bucket_bytes", errors, { inputMode: "numeric" }, "Bucket width (bytes)")}
        {kind === "json_aggregate" && (
          <>
            {input(register, "field", errors, { placeholder: "$.total" }, "JSON field")}
            {input(register, "group_by", errors, { placeholder: "$.region (optional)" }, "Group by (JSON field)")}
            <Fieldset legend="Aggregates" variant="unstyled" aria-describedby={errors.functions ? "functions-error" : undefined}>
              <Group gap="sm">{AGGREGATES.map((f) => <Checkbox key={f} value={f} label={f} {...register("functions")} />)}</Group>
              <Problem errors={errors} name="functions" />
            </Fieldset>
          </>
        )}
        {kind === "consumer_lag" && input(register, "group", errors, {}, "Consumer group")}
        {kind === "sql" && (
          <>
            {input(register, "topics", errors, { placeholder: "orders, payments" }, "Topics (comma-separated)")}
            <Field label="Spark SQL" name="sql" errors={errors}>
              <Textarea id="report-sql" autosize minRows={4} {...register("sql")} aria-invalid={!!errors.sql}
                styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
                placeholder="SELECT key_str, count(*) AS n FROM orders GROUP BY key_str" />
            </Field>
            {input(register, "starting_offsets", errors, { placeholder: "earliest" }, "Starting offsets")}
            {input(register, "ending_offsets", errors, { placeholder: "latest" }, "Ending offsets")}
            <Field label="Value format" name="value_format" errors={errors}>
              <NativeSelect id="report-value_format" {...register("value_format")}>
                {VALUE_FORMATS.map((f) => <option key={f.value} value={f.value}>{f.label}</option>)}
              </NativeSelect>
            </Field>
            {valueFormat !== "binary" && input(register, "value_subject", errors, { placeholder: "<topic>-value" }, "Subject")}
            {valueFormat === "protobuf" && input(register, "value_message", errors, { placeholder: "the schema's first message" }, "Message")}
            <Text size="xs" className="muted">Each topic is a view named after it ('-' and '.' become '_'), with Spark's Kafka columns plus key_str and value_str; with Avro, JSON Schema or Protobuf, value is a struct (value.field) read through the cluster's Schema Registry.</Text>
          </>
        )}
      </SimpleGrid></Fieldset>
      <Fieldset legend="Records"><SimpleGrid cols={{ base: 1, sm: 2 }}>
        <Field label="Time range" name="range_mode" errors={errors}>
          <NativeSelect id="report-range_mode" {...register("range_mode")}>
            <option value="all">Every record</option>
            <option value="last">The last N minutes</option>
            <option value="between">Between two times</option>
          </NativeSelect>
        </Field>
        {range === "last" && input(register, "last_minutes", errors, { inputMode: "numeric" }, "Minutes")}
        {range === "between" && (
          <>
            {input(register, "start", errors, { type: "datetime-local", step: 1 }, "From")}
            {input(register, "end", errors, { type: "datetime-local", step: 1 }, "Until")}
          </>
        )}
      </SimpleGrid></Fieldset>
      <Fieldset legend="Schedule and chart"><SimpleGrid cols={{ base: 1, sm: 2 }}>
        <Field label="Schedule" name="schedule_mode" errors={errors}>
          <NativeSelect id="report-schedule_mode" {...register("schedule_mode")}>
            <option value="none">Only when run</option>
            <option value="interval">Every N seconds</option>
            <option value="cron">Cron (UTC)</option>
          </NativeSelect>
        </Field>
        {schedule === "interval" && input(register, "interval_seconds", errors, { inputMode: "numeric" }, "Seconds")}
        {schedule === "cron" && input(register, "cron", errors, { placeholder: "*/5 * * * *" }, "Cron")}
        <Field label="Chart" name="chart_kind" errors={errors}>
          <NativeSelect id="report-chart_kind" {...register("chart_kind")}>
            <option value="default">The kind's default</option>
            <option value="line">Line</option>
            <option value="bar">Bar</option>
            <option value="table">Table only</option>
          </NativeSelect>
        </Field>
        {(chart === "line" || chart === "bar") && (
          <>
            {input(register, "chart_x", errors, {}, "X column")}
            {input(register, "chart_y", errors, { placeholder: "records, bytes" }, "Y columns")}
          </>
        )}
      </SimpleGrid></Fieldset>
      {!shownAtField && <ErrorText error={create.error} />}
      <Group justify="flex-end"><Button type="submit" loading={create.isPending}>Create report</Button></Group>
      </Stack>
    </form>
  );
}
