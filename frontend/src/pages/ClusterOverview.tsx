// One cluster at a glance: brokers up, throughput and storage first, then its facts (bootstrap address, registry),
// conditions (badges by polarity: a healthy "Degraded False" is green), brokers, the throughput chart scaled to the
// data, and what only makes sense with more than one broker (scaling a dedicated cluster, rebalances).
import { Button, Card, Group, SimpleGrid, Stack, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import {
  Badge, type Condition, ConditionBadge, ConfirmButton, CopyButton, DataTable, ErrorText, Facts, Loading, PageHeader, ReadyBadge, Section,
  toast, when,
} from "../components/ui";
import { num } from "../lib/extra";
import { byteRate, bytes, count, hostPort, MISSING, rate } from "../lib/units";
import { useTenant } from "../session";
import { brokersText, useCluster } from "./Clusters";

// The chart library loads only with a page that draws a chart (first-page budget).
const ThroughputChart = lazy(() => import("../components/ThroughputChart"));

const conditionCol = createColumnHelper<Condition>();
const brokerCol = createColumnHelper<Schemas["BrokerView"]>();
const rebalanceCol = createColumnHelper<Schemas["Rebalance"]>();

/** Plans whose broker count can change (controlplane/clusters/plans.py: basic is 1..1, standard 3..3). */
const SCALABLE_PLANS = new Set(["dedicated"]);

export { bytes };

function Stat({ label, value, detail, testId }: { label: string; value: string; detail?: string; testId?: string }) {
  return (
    <Card withBorder padding="sm" radius="md">
      <Text size="xs" className="muted" tt="uppercase" fw={600}>{label}</Text>
      <Text className="stat-value" data-testid={testId}>{value}</Text>
      {detail && <Text size="xs" className="muted">{detail}</Text>}
    </Card>
  );
}

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
    onSuccess: () => {
      toast.ok(`Deleting ${cluster.data?.name ?? "the cluster"}: its brokers are being stopped.`);
      queryClient.invalidateQueries({ queryKey: ["cluster", slug, id] });
    },
  });
  if (cluster.isPending) return <Loading what="the cluster" />;
  if (!cluster.data) return <ErrorText error={cluster.error} />;
  const c = cluster.data;
  const status = (c.status ?? {}) as { conditions?: Condition[]; bootstrap_servers?: string; observed_generation?: number };
  const admin = can("admin");
  const brokerCount = brokers.data?.length ?? 0;
  const multiBroker = brokerCount > 1;
  return (
    <>
      <PageHeader title={c.name} badge={<ReadyBadge status={c.status} />}
        description={`${c.plan.replace(/^./, (x) => x.toUpperCase())} plan · ${brokersText(c)} brokers up`}
        actions={admin && !c.deletion_requested_at && (
          <ConfirmButton size="sm" label="Delete cluster" question={`Delete cluster ${c.name} and every record in it?`} typeToConfirm={c.name}
            onConfirm={() => remove.mutate()} />
        )} />
      <ErrorText error={remove.error} />
      <SimpleGrid cols={{ base: 2, md: 4 }} mb="lg">
        <Stat label="Brokers up" value={brokersText(c)} testId="brokers-up" />
        <Stat label="In" value={rate(num(c, "records_in_per_sec"))} detail={byteRate(num(c, "bytes_in_per_sec"))} />
        <Stat label="Out" value={rate(num(c, "records_out_per_sec"))} detail={byteRate(num(c, "bytes_out_per_sec"))} />
        <Stat label="Storage" value={bytes(num(c, "storage_bytes") ?? (brokers.data ? brokers.data.reduce((s, b) => s + b.disk_bytes, 0) : null))} />
      </SimpleGrid>
      <Facts items={[
        ["Bootstrap servers", <Group gap={4} wrap="nowrap" align="flex-start"><code data-testid="bootstrap" style={{ minWidth: 0 }}>{status.bootstrap_servers ?? MISSING}</code>
          {status.bootstrap_servers && <CopyButton value={status.bootstrap_servers} label="Copy bootstrap servers" />}</Group>],
        ["Schema Registry", <Group gap={4} wrap="nowrap" align="flex-start"><code data-testid="schema-registry-url" style={{ minWidth: 0 }}>{c.schema_registry_url}</code>
          <CopyButton value={c.schema_registry_url} label="Copy Schema Registry URL" /></Group>],
        ["Kafka cluster id", <code>{c.kafka_cluster_id}</code>],
        ["Generation", `${c.generation} (observed ${status.observed_generation ?? 0})`],
        ["Created", when(c.created_at)],
        ...(c.deletion_requested_at ? [["Deletion requested", when(c.deletion_requested_at)] as [string, string]] : []),
      ]} />
      <Section title="Conditions">
        <DataTable caption="Conditions" data={status.conditions ?? []} empty="No conditions reported yet." columns={[
          conditionCol.accessor("type", { header: "Type" }),
          conditionCol.accessor("status", { header: "Status", cell: (x) => <ConditionBadge condition={x.row.original} /> }),
          conditionCol.accessor("reason", { header: "Reason" }),
          conditionCol.accessor("message", { header: "Message" }),
          conditionCol.accessor("last_transition_time", { header: "Since", cell: (x) => when(x.getValue()) }),
        ]} />
      </Section>
      <Section title="Brokers">
        <ErrorText error={brokers.error} />
        <DataTable caption="Brokers" data={brokers.data} loading={brokers.isPending} columns={[
          brokerCol.accessor("node_id", { header: "Node" }),
          brokerCol.accessor("address", { header: "Address", cell: (x) => <code>{hostPort(x.getValue(), x.row.original.port)}</code> }),
          brokerCol.accessor("status", { header: "Health", cell: (x) => <Badge tone={String(x.getValue()) === "up" ? "ok" : "bad"}>{String(x.getValue())}</Badge> }),
          brokerCol.accessor("controller", { header: "Role", cell: (x) => (x.getValue() ? <Badge tone="info">controller</Badge> : "") }),
          brokerCol.accessor("partitions_led", { header: "Leads", cell: (x) => count(x.getValue()) }),
          brokerCol.accessor("partitions_followed", { header: "Follows", cell: (x) => count(x.getValue()) }),
          brokerCol.accessor("disk_bytes", { header: "Disk", cell: (x) => bytes(x.getValue()) }),
          brokerCol.accessor("retiring", { header: "Retiring", cell: (x) => (x.getValue() ? <Badge tone="warn">retiring</Badge> : "") }),
        ]} />
      </Section>
      <Section title="Throughput (last hour)">
        <ErrorText error={throughput.error} />
        {throughput.data && (
          <Suspense fallback={<Loading what="the chart" />}>
            <ThroughputChart points={throughput.data} />
          </Suspense>
        )}
      </Section>
      {admin && SCALABLE_PLANS.has(c.plan) && <Scale slug={slug} cluster={c} />}
      {brokers.data && <Rebalances slug={slug} id={id} canWrite={admin} multiBroker={multiBroker} />}
    </>
  );
}

function Scale({ slug, cluster }: { slug: string; cluster: Schemas["Cluster"] }) {
  const queryClient = useQueryClient();
  const current = (cluster.spec as { broker_count?: number })?.broker_count ?? 1;
  const [value, setValue] = useState(String(current));
  const scale = useMutation({
    mutationFn: () => unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/clusters/{id}/", {
      params: { path: { tenant_slug: slug, id: cluster.id } }, body: { plan: cluster.plan, broker_count: Number(value) },
    })),
    onSuccess: () => {
      toast.ok(`Scaling to ${value} brokers.`);
      queryClient.invalidateQueries({ queryKey: ["cluster", slug, cluster.id] });
    },
  });
  return (
    <Section title="Scale">
      <form aria-label="Scale" onSubmit={(e) => { e.preventDefault(); scale.mutate(); }}>
        <Group align="flex-end">
          <TextInput label="Brokers" type="number" min={1} value={value} onChange={(e) => setValue(e.currentTarget.value)} w={120} />
          <Button type="submit" variant="default" disabled={scale.isPending || Number(value) === current}>Apply</Button>
        </Group>
        <ErrorText error={scale.error} />
      </form>
    </Section>
  );
}

function Rebalances({ slug, id, canWrite, multiBroker }: { slug: string; id: string; canWrite: boolean; multiBroker: boolean }) {
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
    onSuccess: () => {
      toast.ok("Rebalance proposed.");
      refresh();
    },
  });
  const act = useMutation({
    mutationFn: ({ rid, verb }: { rid: string; verb: "approve" | "stop" }) =>
      verb === "approve"
        ? unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/{id}/approve/", { params: { path: { ...path, id: rid } } }))
        : unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/rebalances/{id}/stop/", { params: { path: { ...path, id: rid } } })),
    onSuccess: refresh,
  });
  const proposals = list.data?.results ?? [];
  // With one broker there is nothing to move: no section unless earlier proposals exist.
  if (!multiBroker && !proposals.length) return null;
  return (
    <Section title="Rebalance proposals"
      actions={canWrite && multiBroker && <Button variant="default" size="xs" onClick={() => propose.mutate()} loading={propose.isPending}>Propose a rebalance</Button>}>
      <ErrorText error={propose.error ?? act.error ?? list.error} />
      <DataTable caption="Rebalance proposals" data={proposals} empty="No proposals." rowId={(r) => r.id} columns={[
        rebalanceCol.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
        rebalanceCol.accessor("reason", { header: "Reason" }),
        rebalanceCol.accessor("state", { header: "State", cell: (x) => <Badge tone="info">{x.getValue()}</Badge> }),
        rebalanceCol.accessor("proposal", { header: "Proposal", enableSorting: false, cell: (x) => <Summary value={x.getValue()} /> }),
        rebalanceCol.accessor("progress", { header: "Progress", enableSorting: false, cell: (x) => <Summary value={x.getValue()} /> }),
        rebalanceCol.display({
          id: "actions", header: "Actions", cell: (x) => canWrite && (
            <Group gap="xs">
              {x.row.original.state === "ProposalReady" && (
                <Button size="xs" onClick={() => act.mutate({ rid: x.row.original.id, verb: "approve" })}>Approve</Button>
              )}
              {x.row.original.state === "Rebalancing" && (
                <Button size="xs" variant="default" onClick={() => act.mutate({ rid: x.row.original.id, verb: "stop" })}>Stop</Button>
              )}
            </Group>
          ),
        }),
      ]} />
    </Section>
  );
}

/** A proposal or progress object as "key: value" lines (moves, bytes), not raw JSON. */
function Summary({ value }: { value: unknown }) {
  if (value == null || typeof value !== "object" || Object.keys(value as object).length === 0) return <>{MISSING}</>;
  return (
    <Stack gap={0}>
      {Object.entries(value as Record<string, unknown>).slice(0, 6).map(([k, v]) => (
        <Text key={k} size="xs"><span className="muted">{k.replace(/_/g, " ")}:</span>{" "}
          {typeof v === "number" ? (/bytes/.test(k) ? bytes(v) : count(v)) : Array.isArray(v) ? `${v.length} items` : typeof v === "object" ? "…" : String(v)}</Text>
      ))}
    </Stack>
  );
}
