// One report: its definition, schedule (changed in place), "run now", the run history (status, duration,
// records scanned, the error; cancel while queued or running), and the chosen run's result — a chart from the
// result's chart description (recharts, lazy), a paginated table, CSV and JSON downloads.
import { Anchor, Breadcrumbs, Button, Group, NativeSelect, Progress, Stack, Text, TextInput } from "@mantine/core";
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmButton, DataTable, ErrorText, Facts, Loading, PageHeader, Pager, Prose, Section, toast, when } from "../components/ui";
import { chartText, paramPairs, progressOf, timeRangeText } from "../lib/reportText";
import { count, duration as human, MISSING, plural } from "../lib/units";
import { str } from "../lib/extra";
import { chartFrom } from "../lib/reportChart";
import { KINDS, scheduleOf } from "../lib/reportForm";
import { useTenant } from "../session";
import { ROLE_NOTE, RunStatus, scheduleText } from "./Reports";

// The chart library loads only with a result to draw (first-page budget).
const ReportChart = lazy(() => import("../components/ReportChart"));

const RESULT_PAGE = 50;
const runCol = createColumnHelper<Schemas["ReportRun"]>();
type Row = Record<string, unknown>;
const resultCol = createColumnHelper<Row>();
const ACTIVE = ["queued", "running"];

function duration(ms: number | null | undefined): string {
  return human(ms);
}

/** A run's progress: a bar while queued or running (the stage and percent when the API reports them). */
function RunProgress({ run }: { run: Schemas["ReportRun"] }) {
  if (!ACTIVE.includes(run.status)) return <>{MISSING}</>;
  const percent = progressOf(run as unknown as { status: string } & Record<string, unknown>);
  const stage = str(run, "stage") ?? run.status;
  return (
    <Stack gap={2} miw={120}>
      <Progress.Root>
        <Progress.Section value={percent ?? 100} striped animated={percent == null} aria-label={`Progress of the run: ${percent == null ? stage : `${Math.round(percent)}%`}`} />
      </Progress.Root>
      <Text size="xs" className="muted">{stage}{percent != null ? ` · ${Math.round(percent)}%` : ""}</Text>
    </Stack>
  );
}

export function ReportPage() {
  const { slug, can } = useTenant();
  const { cluster = "", report: id = "" } = useParams();
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug, cluster_pk: cluster, id };
  const runsPath = { tenant_slug: slug, cluster_pk: cluster, report_pk: id };
  const report = useQuery({
    queryKey: ["report", slug, cluster, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{id}/", { params: { path } })),
  });
  const runs = useQuery({
    queryKey: ["report-runs", slug, cluster, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{report_pk}/runs/", {
      params: { path: runsPath, query: { ordering: "-queued_at", limit: 50 } },
    })),
    // Fast while a run is under way, so its status is seen soon after it changes.
    refetchInterval: (query) => (query.state.data?.results.some((r) => ACTIVE.includes(r.status)) ? 1000 : 10_000),
  });
  const refreshRuns = () => queryClient.invalidateQueries({ queryKey: ["report-runs", slug, cluster, id] });
  const runNow = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{id}/run/", { params: { path } })),
    onSuccess: (run) => {
      setParams({ run: run.id }, { replace: true });
      refreshRuns();
    },
  });
  const cancel = useMutation({
    mutationFn: (runId: string) => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{report_pk}/runs/{id}/cancel/", {
      params: { path: { ...runsPath, id: runId } },
    })),
    onSettled: refreshRuns,
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{id}/", { params: { path } })),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: ["reports", slug, cluster] });
      navigate(`/t/${slug}/clusters/${cluster}/reports`);
    },
  });
  if (report.isPending) return <Loading what="the report" />;
  if (!report.data) return <ErrorText error={report.error} />;
  const r = report.data;
  const member = can("member");
  const list = runs.data?.results ?? [];
  const chosen = list.find((run) => run.id === params.get("run")) ?? list.find((run) => run.status === "succeeded");
  return (
    <>
      <Breadcrumbs mb="xs"><Anchor component={Link} to={`/t/${slug}/clusters/${cluster}/reports`} size="sm">Reports</Anchor><Text size="sm">{r.name}</Text></Breadcrumbs>
      <PageHeader title={r.name} description={r.description ? <Prose text={r.description} /> : undefined}
        actions={member && (
          <>
            <Button onClick={() => runNow.mutate()} loading={runNow.isPending}>Run now</Button>
            <ConfirmButton size="sm" label="Delete report" question={`Delete report ${r.name}, its schedule and its results?`} onConfirm={() => remove.mutate()} />
          </>
        )} />
      {!member && <Text size="sm" className="muted" role="note" mb="sm">{ROLE_NOTE}</Text>}
      <ErrorText error={runNow.error ?? remove.error} />
      <Facts items={[
        ["Kind", KINDS.find((k) => k.value === r.kind)?.label ?? r.kind],
        ...paramPairs(r.params),
        ["Records", timeRangeText(r.time_range)],
        ["Chart", chartText(r.chart)],
        ["Schedule", <span data-testid="schedule">{scheduleText(r.schedule)}</span>],
        ["Created", `${when(r.created_at)} by ${r.created_by}`],
      ]} />
      {member && <Schedule slug={slug} cluster={cluster} report={r} />}
      <Section title="Runs">
      <ErrorText error={runs.error ?? cancel.error} />
      <DataTable caption="Runs" data={list} rowId={(run) => run.id} loading={runs.isPending} empty="No runs yet." columns={[
        runCol.accessor("queued_at", { header: "Queued", cell: (x) => when(x.getValue()) }),
        runCol.accessor("trigger", { header: "Trigger" }),
        runCol.accessor("status", { header: "Status", cell: (x) => <span data-testid="run-status"><RunStatus status={x.getValue()} /></span> }),
        runCol.display({ id: "progress", header: "Progress", cell: (x) => <RunProgress run={x.row.original} /> }),
        runCol.accessor("duration_ms", { header: "Duration", cell: (x) => duration(x.getValue() ?? (x.row.original as unknown as { elapsed_ms?: number }).elapsed_ms) }),
        runCol.accessor("records_scanned", { header: "Records scanned", cell: (x) => count(x.getValue()) }),
        runCol.accessor("row_count", { header: "Rows", cell: (x) => count(x.getValue()) }),
        runCol.accessor("error", { header: "Error", enableSorting: false, cell: (x) => x.getValue() ? <Text size="sm" className="error">{x.getValue()}</Text> : "" }),
        runCol.display({
          id: "actions", header: "Actions", cell: (x) => {
            const run = x.row.original;
            return (
              <Group gap="xs" wrap="nowrap">
                {run.status === "succeeded" && (
                  run.id === chosen?.id ? <Text size="xs" className="muted">shown below</Text>
                    : <Button size="compact-xs" variant="subtle" onClick={() => setParams({ run: run.id }, { replace: true })}>Show result</Button>
                )}
                {member && ACTIVE.includes(run.status) && (
                  <Button size="compact-xs" variant="default" disabled={!!run.cancel_requested_at || cancel.isPending} onClick={() => cancel.mutate(run.id)}>
                    {run.cancel_requested_at ? "Cancelling…" : "Cancel"}
                  </Button>
                )}
              </Group>
            );
          },
        }),
      ]} />
      </Section>
      {chosen?.status === "succeeded" && <Result key={chosen.id} slug={slug} cluster={cluster} report={r} run={chosen} />}
    </>
  );
}

function Schedule({ slug, cluster, report }: { slug: string; cluster: string; report: Schemas["Report"] }) {
  const queryClient = useQueryClient();
  const current = (report.schedule ?? {}) as { interval_seconds?: number; cron?: string };
  const [mode, setMode] = useState<"none" | "interval" | "cron">(current.interval_seconds ? "interval" : current.cron ? "cron" : "none");
  const [seconds, setSeconds] = useState(String(current.interval_seconds ?? 3600));
  const [cron, setCron] = useState(current.cron ?? "0 * * * *");
  const [problem, setProblem] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: () => unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{id}/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster, id: report.id } },
      body: { schedule: scheduleOf({ schedule_mode: mode, interval_seconds: seconds, cron }) },
    })),
    onSuccess: () => {
      toast.ok("Schedule saved.");
      queryClient.invalidateQueries({ queryKey: ["report", slug, cluster, report.id] });
    },
  });
  const submit = () => {
    setProblem(null);
    if (mode === "interval" && !(/^\d+$/.test(seconds) && Number(seconds) >= 1)) return setProblem("The interval is a whole number of seconds, at least 1.");
    if (mode === "cron" && cron.trim().split(/\s+/).length !== 5) return setProblem("Five fields: minute hour day-of-month month day-of-week (UTC).");
    save.mutate();
  };
  return (
    <Section title="Schedule">
      <form aria-label="Schedule" onSubmit={(e) => { e.preventDefault(); submit(); }}>
        <Group align="flex-end" gap="sm" wrap="wrap">
          <NativeSelect label="Runs" value={mode} onChange={(e) => setMode(e.currentTarget.value as typeof mode)}
            data={[{ value: "none", label: "Only when run" }, { value: "interval", label: "Every N seconds" }, { value: "cron", label: "Cron (UTC)" }]} />
          {mode === "interval" && <TextInput label="Seconds" inputMode="numeric" value={seconds} onChange={(e) => setSeconds(e.currentTarget.value)}
            description={/^\d+$/.test(seconds) ? `= ${human(Number(seconds) * 1000)}` : undefined} />}
          {mode === "cron" && <TextInput label="Cron" value={cron} onChange={(e) => setCron(e.currentTarget.value)} />}
          <Button type="submit" variant="default" loading={save.isPending}>Save schedule</Button>
          {save.isSuccess && <Text size="sm" role="status" className="muted">Saved.</Text>}
        </Group>
        <ErrorText error={problem ?? save.error} />
      </form>
    </Section>
  );
}

function Result({ slug, cluster, report, run }: { slug: string; cluster: string; report: Schemas["Report"]; run: Schemas["ReportRun"] }) {
  const [page, setPage] = useState(0);
  const path = { tenant_slug: slug, cluster_pk: cluster, report_pk: report.id, id: run.id };
  const result = useQuery({
    queryKey: ["report-result", slug, cluster, report.id, run.id, page],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/reports/{report_pk}/runs/{id}/results/", {
      params: { path, query: { limit: RESULT_PAGE, offset: page * RESULT_PAGE } },
    })),
    placeholderData: keepPreviousData,
  });
  const download = (format: "csv" | "json") =>
    `/api/v1/tenants/${encodeURIComponent(slug)}/clusters/${cluster}/reports/${report.id}/runs/${run.id}/download/?format=${format}`;
  const data = result.data;
  const columns = ((data?.columns ?? []) as { name: string }[]).map((c) =>
    resultCol.accessor((row) => row[c.name], { id: c.name, header: c.name, cell: (x) => formatCell(x.getValue()) }));
  const spec = data ? chartFrom(data.chart, data.columns, data.results) : null;
  const pages = Math.max(1, Math.ceil((data?.count ?? 0) / RESULT_PAGE));
  return (
    <Section title={`Result of the run queued ${when(run.queued_at)}`} label="Result">
      <Group gap="md" mb="xs">
        <Text size="sm">{plural(data?.count ?? run.row_count ?? 0, "row")}</Text>
        <Anchor href={download("csv")} download size="sm">Download CSV</Anchor>
        <Anchor href={download("json")} download size="sm">Download JSON</Anchor>
      </Group>
      <ErrorText error={result.error} />
      {spec && (
        <Suspense fallback={<Loading what="the chart" />}>
          <ReportChart spec={spec} title={report.name} />
        </Suspense>
      )}
      {data && <DataTable caption="Result rows" data={data.results} columns={columns} empty="The result has no rows." />}
      <Pager page={page} pages={pages} onPage={setPage} />
    </Section>
  );
}

function formatCell(value: unknown): string {
  if (value === null || value === undefined) return "null";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}
