import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, type Condition, ConfirmButton, DataTable, ErrorText, Loading, when } from "../components/ui";
import { useTenant } from "../session";
import { useCluster } from "./Clusters";

// The chart library loads only with a page that draws a chart (first-page budget).
const ThroughputChart = lazy(() => import("../components/ThroughputChart"));

const conditionCol = createColumnHelper<Condition>();
const brokerCol = createColumnHelper<Schemas["BrokerView"]>();
const rebalanceCol = createColumnHelper<Schemas["Rebalance"]>();

export function ClusterOverview() {
  const { slug, can } = useTenant();
  const { cluster: id = "" } = useParams();
  const cluster = useCluster(slug, id);
  const queryClient = useQueryClient();
  const brokers = useQuery({
    queryKey: ["brokers", slug, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/brokers/", { params: { path: { tenant_slug: slug, id } } })),
    refetchInterval: 5000,
  });
  const throughput = useQuery({
    queryKey: ["throughput", slug, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/throughput/", {
      params: { path: { tenant_slug: slug, id }, query: { scope: "broker", minutes: 60 } },
    })),
    refetchInterval: 60_000,
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/clusters/{id}/", { params: { path: { tenant_slug: slug, id } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["cluster", slug, id] }),
  });
  if (cluster.isPending) return <Loading what="the cluster" />;
  if (!cluster.data) return <ErrorText error={cluster.error} />;
  const c = cluster.data;
  const status = (c.status ?? {}) as { conditions?: Condition[]; bootstrap_servers?: string; observed_generation?: number };
  return (
    <>
      <h1>{c.name}</h1>
      <dl className="facts">
        <dt>Plan</dt><dd>{c.plan}</dd>
        <dt>Kafka cluster id</dt><dd><code>{c.kafka_cluster_id}</code></dd>
        <dt>Bootstrap servers</dt><dd><code data-testid="bootstrap">{status.bootstrap_servers ?? "—"}</code></dd>
        <dt>Schema Registry</dt><dd><code data-testid="schema-registry-url">{c.schema_registry_url}</code></dd>
        <dt>Generation</dt><dd>{c.generation} (observed {status.observed_generation ?? 0})</dd>
        <dt>Created</dt><dd>{when(c.created_at)}</dd>
        {c.deletion_requested_at && (<><dt>Deletion requested</dt><dd>{when(c.deletion_requested_at)}</dd></>)}
      </dl>
      <h2>Conditions</h2>
      <DataTable caption="Conditions" data={status.conditions ?? []} columns={[
        conditionCol.accessor("type", { header: "Type" }),
        conditionCol.accessor("status", { header: "Status", cell: (x) => <Badge tone={x.getValue() === "True" ? "ok" : "warn"}>{x.getValue()}</Badge> }),
        conditionCol.accessor("reason", { header: "Reason" }),
        conditionCol.accessor("message", { header: "Message" }),
        conditionCol.accessor("last_transition_time", { header: "Since", cell: (x) => when(x.getValue()) }),
      ]} />
      <h2>Brokers</h2>
      <ErrorText error={brokers.error} />
      {brokers.data && (
        <DataTable caption="Brokers" data={brokers.data} columns={[
          brokerCol.accessor("node_id", { header: "Node" }),
          brokerCol.accessor("address", { header: "Address", cell: (x) => `${x.getValue()}:${x.row.original.port}` }),
          brokerCol.accessor("status", { header: "Health", cell: (x) => <Badge tone={String(x.getValue()) === "up" ? "ok" : "bad"}>{String(x.getValue())}</Badge> }),
          brokerCol.accessor("controller", { header: "Controller", cell: (x) => (x.getValue() ? "yes" : "") }),
          brokerCol.accessor("partitions_led", { header: "Leads" }),
          brokerCol.accessor("partitions_followed", { header: "Follows" }),
          brokerCol.accessor("disk_bytes", { header: "Disk", cell: (x) => bytes(x.getValue()) }),
          brokerCol.accessor("retiring", { header: "Retiring", cell: (x) => (x.getValue() ? "yes" : "") }),
        ]} />
      )}
      <h2>Throughput (last hour)</h2>
      <ErrorText error={throughput.error} />
      {throughput.data && (
        <Suspense fallback={<Loading what="the chart" />}>
          <ThroughputChart points={throughput.data} />
        </Suspense>
      )}
      {can("admin") && <Scale slug={slug} cluster={c} />}
      <Rebalances slug={slug} id={id} canWrite={can("admin")} />
      {can("admin") && !c.deletion_requested_at && (
        <section>
          <h2>Delete the cluster</h2>
          <ConfirmButton label="Delete cluster" question={`Delete cluster ${c.name} and every record in it?`} typeToConfirm={c.name}
            onConfirm={() => remove.mutate()} />
          <ErrorText error={remove.error} />
        </section>
      )}
    </>
  );
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function Scale({ slug, cluster }: { slug: string; cluster: Schemas["Cluster"] }) {
  const queryClient = useQueryClient();
  const current = (cluster.spec as { broker_count?: number })?.broker_count ?? 1;
  const [count, setCount] = useState(String(current));
  const scale = useMutation({
    mutationFn: () => unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/clusters/{id}/", {
      params: { path: { tenant_slug: slug, id: cluster.id } }, body: { plan: cluster.plan, broker_count: Number(count) },
    })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["cluster", slug, cluster.id] }),
  });
  return (
    <form className="inline-form" aria-label="Scale" onSubmit={(e) => { e.preventDefault(); scale.mutate(); }}>
      <h2>Scale</h2>
      <label>
        Brokers <input type="number" min={1} value={count} onChange={(e) => setCount(e.target.value)} />
      </label>
      <button type="submit" disabled={scale.isPending || Number(count) === current}>Apply</button>
      <ErrorText error={scale.error} />
    </form>
  );
}

function Rebalances({ slug, id, canWrite }: { slug: string; id: string; canWrite: boolean }) {
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug, cluster_pk: id };
  const list = useQuery({
    queryKey: ["rebalances", slug, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/", { params: { path, query: { ordering: "-created_at", limit: 20 } } })),
    refetchInterval: 3000,
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: ["rebalances", slug, id] });
  const propose = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/", { params: { path }, body: {} as never })),
    onSuccess: refresh,
  });
  const act = useMutation({
    mutationFn: ({ rid, verb }: { rid: string; verb: "approve" | "stop" }) =>
      verb === "approve"
        ? unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/{id}/approve/", { params: { path: { ...path, id: rid } } }))
        : unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/{id}/stop/", { params: { path: { ...path, id: rid } } })),
    onSuccess: refresh,
  });
  return (
    <section>
      <h2>Rebalance proposals</h2>
      {canWrite && <button type="button" onClick={() => propose.mutate()} disabled={propose.isPending}>Propose a rebalance</button>}
      <ErrorText error={propose.error ?? act.error ?? list.error} />
      {list.data && (
        <DataTable caption="Rebalance proposals" data={list.data.results} empty="No proposals." columns={[
          rebalanceCol.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
          rebalanceCol.accessor("reason", { header: "Reason" }),
          rebalanceCol.accessor("state", { header: "State" }),
          rebalanceCol.accessor("proposal", { header: "Proposal", enableSorting: false, cell: (x) => <Summary value={x.getValue()} /> }),
          rebalanceCol.accessor("progress", { header: "Progress", enableSorting: false, cell: (x) => <Summary value={x.getValue()} /> }),
          rebalanceCol.display({
            id: "actions", header: "Actions", cell: (x) => canWrite && (
              <>
                {x.row.original.state === "ProposalReady" && (
                  <button type="button" onClick={() => act.mutate({ rid: x.row.original.id, verb: "approve" })}>Approve</button>
                )}
                {x.row.original.state === "Rebalancing" && (
                  <button type="button" onClick={() => act.mutate({ rid: x.row.original.id, verb: "stop" })}>Stop</button>
                )}
              </>
            ),
          }),
        ]} />
      )}
    </section>
  );
}

function Summary({ value }: { value: unknown }) {
  if (value == null || (typeof value === "object" && Object.keys(value as object).length === 0)) return <>—</>;
  const text = JSON.stringify(value);
  return (
    <details>
      <summary>{text.length > 60 ? `${text.slice(0, 60)}…` : text}</summary>
      <pre>{JSON.stringify(value, null, 2)}</pre>
    </details>
  );
}
