// Consumer groups: state, members, partitions and total lag on the list; a group's lag per partition (a partition
// never committed shows "no commit", not lag 0), its members, and an offset reset whose preview is a table.
import { Anchor, Breadcrumbs, Button, Group, NativeSelect, Stack, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { lazy, Suspense, useState } from "react";
import { Link, useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, ConfirmButton, DataTable, ErrorText, Facts, Loading, PageHeader, Section, type Tone, toast } from "../components/ui";
import { list, num } from "../lib/extra";
import { count, MISSING } from "../lib/units";
import { useTenant } from "../session";

// The chart library is loaded only when a group's page is opened (first-page budget).
const LagChart = lazy(() => import("../components/LagChart"));

const groupCol = createColumnHelper<Schemas["GroupSummary"]>();
const lagCol = createColumnHelper<Schemas["PartitionLag"]>();

const STATE_TONE: Record<string, Tone> = { Stable: "ok", Empty: "neutral", Dead: "bad", PreparingRebalance: "warn", CompletingRebalance: "warn" };

export function GroupState({ state, testId }: { state: string; testId?: string }) {
  return <Badge tone={STATE_TONE[state] ?? "info"} testId={testId}>{state}</Badge>;
}

/** A group's total lag; "no commit" when it owns partitions but has committed none (the API's null). */
export function lagText(lag: number | null | undefined): string {
  return lag === null ? "no commit" : count(lag);
}

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
      <PageHeader title="Consumer groups" description="Who reads from this cluster, and how far behind they are." />
      <ErrorText error={groups.error} />
      <DataTable caption="Consumer groups" data={groups.data} loading={groups.isPending} rowId={(g) => g.group_id} pageSize={50}
        empty="No consumer groups yet: a group appears when a consumer with a group.id commits or joins." columns={[
          groupCol.accessor("group_id", { header: "Group", cell: (x) => <Anchor component={Link} to={encodeURIComponent(x.getValue())}>{x.getValue()}</Anchor> }),
          groupCol.accessor("state", { header: "State", cell: (x) => <GroupState state={x.getValue()} /> }),
          groupCol.accessor("members", { header: "Members", cell: (x) => count(x.getValue()) }),
          groupCol.accessor((g) => num(g, "partitions") ?? -1, { id: "partitions", header: "Partitions", cell: (x) => count(num(x.row.original, "partitions")) }),
          groupCol.accessor((g) => list(g, "topics")?.join(", ") ?? "", { id: "topics", header: "Topics", cell: (x) => x.getValue() || MISSING }),
          groupCol.accessor((g) => g.total_lag ?? -1, { id: "total_lag", header: "Total lag", cell: (x) => lagText(x.row.original.total_lag) }),
        ]} />
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
  const memberCol = createColumnHelper<(typeof members)[number]>();
  return (
    <>
      <Breadcrumbs mb="xs"><Anchor component={Link} to=".." relative="path" size="sm">Consumer groups</Anchor><Text size="sm">{group}</Text></Breadcrumbs>
      <PageHeader title={group} badge={<GroupState state={g.state} testId="group-state" />} />
      <Facts items={[
        ["Protocol", g.protocol || MISSING],
        ["Members", count(members.length)],
        ["Total lag", <span data-testid="total-lag">{lagText(g.total_lag)}</span>],
        ["Never committed", count(num(g, "uncommitted_partitions") ?? g.partitions.filter((p) => p.committed_offset == null).length)],
      ]} />
      <Section title="Lag per partition">
        <Suspense fallback={<Loading what="the chart" />}>
          <LagChart partitions={g.partitions} />
        </Suspense>
        <DataTable caption="Lag per partition" data={g.partitions} rowId={(p) => `${p.topic}:${p.partition}`} columns={[
          lagCol.accessor("topic", { header: "Topic" }),
          lagCol.accessor("partition", { header: "Partition" }),
          lagCol.accessor("committed_offset", { header: "Committed", cell: (x) => (x.getValue() == null ? <Badge tone="neutral">no commit</Badge> : count(x.getValue())) }),
          lagCol.accessor("log_end_offset", { header: "Log end", cell: (x) => count(x.getValue()) }),
          lagCol.accessor("lag", { header: "Lag", cell: (x) => (x.getValue() == null ? MISSING : count(x.getValue())) }),
          lagCol.accessor("member_id", { header: "Member", cell: (x) => x.getValue() ?? MISSING }),
        ]} />
      </Section>
      <Section title="Members">
        <DataTable caption="Members" data={members} empty="No members: the group is not consuming now." columns={[
          memberCol.accessor("member_id", { header: "Member" }),
          memberCol.accessor("client_id", { header: "Client" }),
          memberCol.accessor("host", { header: "Host" }),
        ]} />
      </Section>
      {can("admin") ? <ResetOffsets path={path} state={g.state} /> : <Text size="sm" className="muted" role="note">Resetting offsets needs the admin role in this tenant.</Text>}
    </>
  );
}

interface PlannedOffset {
  topic: string;
  partition: number;
  current_offset: number | null;
  new_offset: number;
  lag_before?: number | null;
  lag_after?: number;
  lag_delta?: number | null;
}
const planCol = createColumnHelper<PlannedOffset>();

function signed(n: number | null | undefined): string {
  if (n == null) return MISSING;
  return n > 0 ? `+${count(n)}` : count(n);
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
    onSuccess: (_result, dryRun) => {
      if (dryRun) return;
      toast.ok(`Offsets of ${path.group_id} reset.`);
      queryClient.invalidateQueries({ queryKey: ["group", path.tenant_slug, path.id, path.group_id] });
    },
  });
  const needsValue = to === "offset" || to === "timestamp" || to === "shift-by";
  const plan = (reset.data?.partitions ?? []) as unknown as PlannedOffset[];
  return (
    <Section title="Reset offsets" label="Reset offsets">
      {state !== "Empty" && <Text size="sm" className="muted" mb="xs">Offsets can be reset while the group has no members (state Empty).</Text>}
      <form onSubmit={(e) => e.preventDefault()}>
        <Group align="flex-end" gap="sm" wrap="wrap">
          <NativeSelect label="To" value={to} onChange={(e) => setTo(e.currentTarget.value as Schemas["ToEnum"])} data={[
            { value: "earliest", label: "Earliest" }, { value: "latest", label: "Latest" }, { value: "offset", label: "An offset" },
            { value: "timestamp", label: "A timestamp (ms)" }, { value: "shift-by", label: "Shift by" },
          ]} />
          {needsValue && <TextInput label="Value" type="number" value={value} onChange={(e) => setValue(e.currentTarget.value)} w={160} />}
          <TextInput label="Topic" value={topic} placeholder="all topics" onChange={(e) => setTopic(e.currentTarget.value)} />
          <Button variant="default" onClick={() => reset.mutate(true)} loading={reset.isPending && reset.variables === true}>Preview (dry run)</Button>
          <ConfirmButton size="sm" label="Reset" question={`Reset the offsets of ${path.group_id} to ${to}${topic ? ` on ${topic}` : ""}? Its consumers will re-read or skip records.`}
            onConfirm={() => reset.mutate(false)} confirmLabel="Reset offsets" />
        </Group>
      </form>
      <ErrorText error={reset.error} />
      {reset.data && (
        <Stack role="status" gap="xs" mt="sm">
          <Text size="sm">{reset.data.dry_run ? "Preview — nothing changed:" : "Offsets reset:"}</Text>
          <DataTable caption="Offset reset plan" data={plan} rowId={(p) => `${p.topic}:${p.partition}`} columns={[
            planCol.accessor("topic", { header: "Topic" }),
            planCol.accessor("partition", { header: "Partition" }),
            planCol.accessor("current_offset", { header: "Current", cell: (x) => (x.getValue() == null ? "no commit" : count(x.getValue())) }),
            planCol.accessor("new_offset", { header: "New", cell: (x) => count(x.getValue()) }),
            planCol.accessor((p) => (p.current_offset == null ? null : p.new_offset - p.current_offset), { id: "moves", header: "Moves by", cell: (x) => signed(x.getValue()) }),
            planCol.accessor((p) => p.lag_after ?? null, { id: "lag_after", header: "Lag after", cell: (x) => count(x.getValue()) }),
          ]} />
        </Stack>
      )}
    </Section>
  );
}
