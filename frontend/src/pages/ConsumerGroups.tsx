import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { Link, useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { DataTable, ErrorText, Loading } from "../components/ui";
import { useTenant } from "../session";

// The chart library is loaded only when a group's page is opened (first-page budget).
const LagChart = lazy(() => import("../components/LagChart"));

const groupCol = createColumnHelper<Schemas["GroupSummary"]>();
const lagCol = createColumnHelper<Schemas["PartitionLag"]>();

export function ConsumerGroupsPage() {
  const { slug } = useTenant();
  const { cluster = "" } = useParams();
  const groups = useQuery({
    queryKey: ["groups", slug, cluster],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/consumer-groups/", { params: { path: { tenant_slug: slug, id: cluster } } })),
    refetchInterval: 5000,
  });
  return (
    <>
      <h1>Consumer groups</h1>
      {groups.isPending ? <Loading what="consumer groups" /> : <ErrorText error={groups.error} />}
      {groups.data && (
        <DataTable caption="Consumer groups" data={groups.data} empty="No consumer groups." columns={[
          groupCol.accessor("group_id", { header: "Group", cell: (x) => <Link to={encodeURIComponent(x.getValue())}>{x.getValue()}</Link> }),
          groupCol.accessor("state", { header: "State" }),
          groupCol.accessor("members", { header: "Members" }),
          groupCol.accessor("total_lag", { header: "Total lag" }),
        ]} />
      )}
    </>
  );
}

export function ConsumerGroupPage() {
  const { slug, can } = useTenant();
  const { cluster = "", group = "" } = useParams();
  const path = { tenant_slug: slug, id: cluster, group_id: group };
  const detail = useQuery({
    queryKey: ["group", slug, cluster, group],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/consumer-groups/{group_id}/", { params: { path } })),
    refetchInterval: 5000,
  });
  if (detail.isPending) return <Loading what="the group" />;
  if (!detail.data) return <ErrorText error={detail.error} />;
  const g = detail.data;
  const members = g.members as { member_id?: string; client_id?: string; host?: string; assignments?: unknown }[];
  return (
    <>
      <p className="crumbs"><Link to="..">Consumer groups</Link> / <strong>{group}</strong></p>
      <h1>{group}</h1>
      <dl className="facts">
        <dt>State</dt><dd data-testid="group-state">{g.state}</dd>
        <dt>Protocol</dt><dd>{g.protocol || "—"}</dd>
        <dt>Total lag</dt><dd data-testid="total-lag">{g.total_lag}</dd>
      </dl>
      <h2>Lag per partition</h2>
      <Suspense fallback={<Loading what="the chart" />}>
        <LagChart partitions={g.partitions} />
      </Suspense>
      <DataTable caption="Lag per partition" data={g.partitions} columns={[
        lagCol.accessor("topic", { header: "Topic" }),
        lagCol.accessor("partition", { header: "Partition" }),
        lagCol.accessor("committed_offset", { header: "Committed" }),
        lagCol.accessor("log_end_offset", { header: "Log end" }),
        lagCol.accessor("lag", { header: "Lag" }),
        lagCol.accessor("member_id", { header: "Member" }),
      ]} />
      <h2>Members</h2>
      <table>
        <caption className="sr-only">Members</caption>
        <thead><tr><th scope="col">Member</th><th scope="col">Client</th><th scope="col">Host</th></tr></thead>
        <tbody>
          {members.length === 0 ? <tr><td colSpan={3} className="muted">No members.</td></tr> : members.map((m) => (
            <tr key={m.member_id}><td>{m.member_id}</td><td>{m.client_id}</td><td>{m.host}</td></tr>
          ))}
        </tbody>
      </table>
      {can("admin") ? <ResetOffsets path={path} state={g.state} /> : <p className="muted" role="note">Resetting offsets needs the admin role in this tenant.</p>}
    </>
  );
}

function ResetOffsets({ path, state }: { path: { tenant_slug: string; id: string; group_id: string }; state: string }) {
  const queryClient = useQueryClient();
  const [to, setTo] = useState<Schemas["ToEnum"]>("earliest");
  const [topic, setTopic] = useState("");
  const [value, setValue] = useState("");
  const reset = useMutation({
    mutationFn: (dryRun: boolean) => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{id}/consumer-groups/{group_id}/reset-offsets/", {
      params: { path },
      body: { to, dry_run: dryRun, ...(topic ? { topic } : {}), ...(value !== "" ? { value: Number(value) } : {}) },
    })),
    onSuccess: (_, dryRun) => { if (!dryRun) queryClient.invalidateQueries({ queryKey: ["group", path.tenant_slug, path.id, path.group_id] }); },
  });
  const needsValue = to === "offset" || to === "timestamp" || to === "shift-by";
  return (
    <section aria-label="Reset offsets">
      <h2>Reset offsets</h2>
      {state !== "Empty" && <p className="muted">Offsets can be reset while the group has no members (state Empty).</p>}
      <form className="inline-form" onSubmit={(e) => e.preventDefault()}>
        <label>
          To{" "}
          <select aria-label="To" value={to} onChange={(e) => setTo(e.target.value as Schemas["ToEnum"])}>
            <option value="earliest">Earliest</option>
            <option value="latest">Latest</option>
            <option value="offset">An offset</option>
            <option value="timestamp">A timestamp (ms)</option>
            <option value="shift-by">Shift by</option>
          </select>
        </label>
        {needsValue && <label>Value <input type="number" value={value} onChange={(e) => setValue(e.target.value)} /></label>}
        <label>Topic <input value={topic} placeholder="all topics" onChange={(e) => setTopic(e.target.value)} /></label>
        <button type="button" onClick={() => reset.mutate(true)}>Preview (dry run)</button>
        <button type="button" className="danger" onClick={() => reset.mutate(false)}>Reset</button>
      </form>
      <ErrorText error={reset.error} />
      {reset.data && (
        <div role="status">
          <p>{reset.data.dry_run ? "Preview — nothing changed:" : "Offsets reset:"}</p>
          <pre>{JSON.stringify(reset.data.partitions, null, 2)}</pre>
        </div>
      )}
    </section>
  );
}
