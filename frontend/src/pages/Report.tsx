// One report: its definition, schedule (changed in place), "run now", the run history (status, duration,
// records scanned, the error; cancel while queued or running), and the chosen run's result — a chart from the
// result's chart description (recharts, lazy), a paginated table, CSV and JSON downloads.
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmButton, DataTable, ErrorText, Loading, when } from "../components/ui";
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
  if (ms == null) return "—";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
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
      <p className="crumbs"><Link to={`/t/${slug}/clusters/${cluster}/reports`}>Reports</Link> / <strong>{r.name}</strong></p>
      <h1>{r.name}</h1>
      {r.description && <p>{r.description}</p>}
      <dl className="facts">
        <dt>Kind</dt><dd>{KINDS.find((k) => k.value === r.kind)?.label ?? r.kind}</dd>
        <dt>Parameters</dt><dd><code>{JSON.stringify(r.params)}</code></dd>
        <dt>Time range</dt><dd>{r.time_range && Object.keys(r.time_range as object).length ? <code>{JSON.stringify(r.time_range)}</code> : "every record"}</dd>
        <dt>Chart</dt><dd><code>{JSON.stringify(r.chart)}</code></dd>
        <dt>Schedule</dt><dd data-testid="schedule">{scheduleText(r.schedule)}</dd>
        <dt>Created</dt><dd>{when(r.created_at)} by {r.created_by}</dd>
      </dl>
      {member ? (
        <div className="toolbar">
          <button type="button" onClick={() => runNow.mutate()} disabled={runNow.isPending}>Run now</button>
          <ConfirmButton label="Delete report" question={`Delete report ${r.name}, its schedule and its results?`} onConfirm={() => remove.mutate()} />
        </div>
      ) : <p className="muted" role="note">{ROLE_NOTE}</p>}
      <ErrorText error={runNow.error ?? remove.error} />
      {member && <Schedule slug={slug} cluster={cluster} report={r} />}
      <h2>Runs</h2>
      <ErrorText error={runs.error ?? cancel.error} />
      <DataTable caption="Runs" data={list} rowId={(run) => run.id} empty={runs.isPending ? "Loading runs…" : "No runs yet."} columns={[
        runCol.accessor("queued_at", { header: "Queued", cell: (x) => when(x.getValue()) }),
        runCol.accessor("trigger", { header: "Trigger" }),
        runCol.accessor("status", { header: "Status", cell: (x) => <span data-testid="run-status"><RunStatus status={x.getValue()} /></span> }),
        runCol.accessor("duration_ms", { header: "Duration", cell: (x) => duration(x.getValue()) }),
        runCol.accessor("records_scanned", { header: "Records scanned", cell: (x) => x.getValue()?.toLocaleString() ?? "—" }),
        runCol.accessor("row_count", { header: "Rows", cell: (x) => x.getValue()?.toLocaleString() ?? "—" }),
        runCol.accessor("error", { header: "Error", enableSorting: false, cell: (x) => x.getValue() ? <span className="error">{x.getValue()}</span> : "" }),
        runCol.display({
          id: "actions", header: "Actions", cell: (x) => {
            const run = x.row.original;
            return (
              <>
                {run.status === "succeeded" && (
                  run.id === chosen?.id ? <span className="muted">shown below</span>
                    : <button type="button" className="link" onClick={() => setParams({ run: run.id }, { replace: true })}>Show result</button>
                )}
                {member && ACTIVE.includes(run.status) && (
                  <button type="button" disabled={!!run.cancel_requested_at || cancel.isPending} onClick={() => cancel.mutate(run.id)}>
                    {run.cancel_requested_at ? "Cancelling…" : "Cancel"}
                  </button>
                )}
              </>
            );
          },
        }),
      ]} />
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
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["report", slug, cluster, report.id] }),
  });
  const submit = () => {
    setProblem(null);
    if (mode === "interval" && !(/^\d+$/.test(seconds) && Number(seconds) >= 1)) return setProblem("The interval is a whole number of seconds, at least 1.");
    if (mode === "cron" && cron.trim().split(/\s+/).length !== 5) return setProblem("Five fields: minute hour day-of-month month day-of-week (UTC).");
    save.mutate();
  };
  return (
    <form className="inline-form" aria-label="Schedule" onSubmit={(e) => { e.preventDefault(); submit(); }}>
      <h2>Schedule</h2>
      <label>Runs <select aria-label="Runs" value={mode} onChange={(e) => setMode(e.target.value as typeof mode)}>
        <option value="none">Only when run</option>
        <option value="interval">Every N seconds</option>
        <option value="cron">Cron (UTC)</option>
      </select></label>
      {mode === "interval" && <label>Seconds <input inputMode="numeric" value={seconds} onChange={(e) => setSeconds(e.target.value)} /></label>}
      {mode === "cron" && <label>Cron <input value={cron} onChange={(e) => setCron(e.target.value)} /></label>}
      <button type="submit" disabled={save.isPending}>Save schedule</button>
      <ErrorText error={problem ?? save.error} />
      {save.isSuccess && <span role="status" className="muted">Saved.</span>}
    </form>
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
    <section aria-label="Result">
      <h2>Result of the run queued {when(run.queued_at)}</h2>
      <div className="toolbar">
        <span>{(data?.count ?? run.row_count ?? 0).toLocaleString()} rows</span>
        <a href={download("csv")} download>Download CSV</a>
        <a href={download("json")} download>Download JSON</a>
      </div>
      <ErrorText error={result.error} />
      {spec && (
        <Suspense fallback={<Loading what="the chart" />}>
          <ReportChart spec={spec} title={report.name} />
        </Suspense>
      )}
      {data && <DataTable caption="Result rows" data={data.results} columns={columns} empty="The result has no rows." />}
      <nav aria-label="Result pages" className="pager">
        <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>Previous</button>
        <span>Page {page + 1} of {pages}</span>
        <button type="button" disabled={page + 1 >= pages} onClick={() => setPage(page + 1)}>Next</button>
      </nav>
    </section>
  );
}

function formatCell(value: unknown): string {
  if (value === null || value === undefined) return "null";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}
