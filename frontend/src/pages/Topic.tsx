// One topic: its health and size at the top, then tabs for messages (newest first), the live tail, partitions
// and configs (human units, the default beside an override, actions as separate buttons).
import { Anchor, Breadcrumbs, Button, Card, Group, SimpleGrid, Stack, Table, Tabs, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, ConfirmButton, DataTable, ErrorText, Loading, PageHeader, ReadyBadge, toast } from "../components/ui";
import { num } from "../lib/extra";
import { bytes, configRaw, configValue, count, MISSING, rate } from "../lib/units";
import { useTenant } from "../session";
import { useCluster } from "./Clusters";
import { LiveTail } from "./LiveTail";
import { Messages } from "./Messages";

const TABS = ["messages", "tail", "partitions", "configs"] as const;
type Tab = (typeof TABS)[number];
const TAB_LABEL: Record<Tab, string> = { messages: "Messages", tail: "Live tail", partitions: "Partitions", configs: "Configs" };

function Stat({ label, value }: { label: string; value: string }) {
  return (
    <Card withBorder padding="xs" radius="md">
      <Text size="xs" className="muted" tt="uppercase" fw={600}>{label}</Text>
      <Text fw={600}>{value}</Text>
    </Card>
  );
}

export function TopicPage() {
  const { slug, can, role } = useTenant();
  const { cluster = "", topic = "" } = useParams();
  const [params, setParams] = useSearchParams();
  const tab = (TABS as readonly string[]).includes(params.get("tab") ?? "") ? (params.get("tab") as Tab) : "messages";
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const clusterQuery = useCluster(slug, cluster);
  const path = { tenant_slug: slug, cluster_pk: cluster, name: topic };
  const detail = useQuery({
    queryKey: ["topic", slug, cluster, topic],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/", { params: { path } })),
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/", { params: { path } })),
    onSuccess: () => {
      toast.ok(`Topic ${topic} is being deleted.`);
      queryClient.invalidateQueries({ queryKey: ["topics", slug, cluster] });
      navigate(`/t/${slug}/clusters/${cluster}/topics`);
    },
  });
  // What the caller may do here (role and the cluster's ACLs for its principal): what it may not is not offered.
  const rights = useQuery({
    queryKey: ["topic-permissions", slug, cluster, topic],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/permissions/", { params: { path } })),
    refetchInterval: 10_000, // an ACL granted meanwhile shows up without a reload
  });
  const may = rights.data;
  const kafkaId = clusterQuery.data?.kafka_cluster_id;
  const t = detail.data;
  return (
    <>
      <Breadcrumbs mb="xs" separator="/">
        <Anchor component={Link} to={`/t/${slug}/clusters/${cluster}/topics`} size="sm">Topics</Anchor>
        <Text size="sm">{topic}</Text>
      </Breadcrumbs>
      <PageHeader title={topic} badge={t && <ReadyBadge status={t.status} />}
        actions={(may ? may.delete.allowed : can("member")) && (
          <ConfirmButton size="sm" label="Delete topic" question={`Delete topic ${topic} and all its records?`} typeToConfirm={topic} onConfirm={() => remove.mutate()} />
        )} />
      <ErrorText error={detail.error ?? remove.error} />
      {t && (
        <SimpleGrid cols={{ base: 3, md: 6 }} mb="md" data-testid="topic-facts">
          <Stat label="Partitions" value={count(t.partitions)} />
          <Stat label="Replication" value={String(t.replication_factor)} />
          <Stat label={num(t, "remote_size_bytes") == null ? "Size" : "Size (local + remote)"}
            value={num(t, "remote_size_bytes") == null ? bytes(num(t, "size_bytes"))
              : `${bytes(num(t, "size_bytes"))} + ${bytes(num(t, "remote_size_bytes"))}`} />
          <Stat label="Records" value={count(num(t, "record_count"))} />
          <Stat label="In" value={rate(num(t, "records_in_per_sec"))} />
          <Stat label="Under-replicated" value={count(num(t, "under_replicated_partitions"))} />
        </SimpleGrid>
      )}
      {!can("member") && (
        <Text size="sm" className="muted" role="note" mb="sm">Your role ({role}) reads this topic; producing, editing configs and deleting it need the member role.</Text>
      )}
      <Tabs value={tab} onChange={(next) => next && setParams({ tab: next })} keepMounted={false}>
        <Tabs.List aria-label="Topic" mb="md">
          {TABS.map((x) => <Tabs.Tab key={x} value={x}>{TAB_LABEL[x]}</Tabs.Tab>)}
        </Tabs.List>
        {TABS.map((x) => (
          <Tabs.Panel key={x} value={x} aria-label={TAB_LABEL[x]}>
            {x !== tab ? null : !kafkaId ? <Loading what="the cluster" /> : x === "messages" ? (
              <Messages kafkaId={kafkaId} topic={topic} partitions={t?.partitions ?? 0} canProduce={can("member")} produce={may?.produce} read={may?.read} />
            ) : x === "tail" ? (
              <LiveTail kafkaId={kafkaId} topic={topic} read={may?.read} />
            ) : x === "partitions" ? (
              <Partitions slug={slug} cluster={cluster} topic={topic} />
            ) : (
              <Configs slug={slug} cluster={cluster} kafkaId={kafkaId} topic={topic} canEdit={may ? may.edit_configs.allowed : can("member")} />
            )}
          </Tabs.Panel>
        ))}
      </Tabs>
    </>
  );
}

const partCol = createColumnHelper<Schemas["PartitionView"]>();

function Partitions({ slug, cluster, topic }: { slug: string; cluster: string; topic: string }) {
  const partitions = useQuery({
    queryKey: ["partitions", slug, cluster, topic],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/partitions/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster, name: topic } },
    })),
    refetchInterval: 5000,
  });
  return (
    <>
      <ErrorText error={partitions.error} />
      <DataTable caption="Partitions" data={partitions.data} loading={partitions.isPending} columns={[
        partCol.accessor("partition", { header: "Partition" }),
        partCol.accessor("leader", { header: "Leader", cell: (x) => (x.getValue() < 0 ? "none" : x.getValue()) }),
        partCol.accessor("replicas", { header: "Replicas", enableSorting: false, cell: (x) => x.getValue().join(", ") }),
        partCol.accessor("isr", { header: "In sync", enableSorting: false, cell: (x) => x.getValue().join(", ") }),
        partCol.accessor("start_offset", { header: "Start offset", cell: (x) => count(x.getValue()) }),
        partCol.accessor("end_offset", { header: "End offset", cell: (x) => count(x.getValue()) }),
        partCol.accessor((p) => p.end_offset - p.start_offset, { id: "records", header: "Records", cell: (x) => count(x.getValue()) }),
        partCol.accessor("size_bytes", { header: "Size", cell: (x) => bytes(x.getValue()) }),
        partCol.accessor((p) => (p.offline ? "offline" : p.under_replicated ? "under-replicated" : "in sync"), {
          id: "health", header: "Health", cell: (x) => <Badge tone={x.getValue() === "offline" ? "bad" : x.getValue() === "in sync" ? "ok" : "warn"}>{x.getValue()}</Badge>,
        }),
      ]} />
    </>
  );
}

type Config = Schemas["KafkaTopicConfigData"];

/** The value a config falls back to without the topic's override: the first synonym below the topic's own, or the
 * API's ``default_value``; null when the API reports neither. */
export function defaultOf(config: Config): string | null {
  if (config.is_default) return config.value ?? null;
  const synonyms = (config.synonyms ?? []) as { name?: string; value?: string | null; source?: string }[];
  const fallback = synonyms.find((s) => s.source !== "DYNAMIC_TOPIC_CONFIG");
  if (fallback) return fallback.value ?? null;
  const given = (config as { default_value?: string | null }).default_value;
  return given ?? null;
}

function Configs({ slug, cluster, kafkaId, topic, canEdit }: { slug: string; cluster: string; kafkaId: string; topic: string; canEdit: boolean }) {
  const queryClient = useQueryClient();
  const [filter, setFilter] = useState("");
  const configs = useQuery({
    queryKey: ["configs", kafkaId, topic],
    queryFn: () => unwrap(api.GET("/kafka/v3/clusters/{cluster_id}/topics/{topic_name}/configs/", { params: { path: { cluster_id: kafkaId, topic_name: topic } } })),
    refetchInterval: 5000, // an edit reaches the brokers through the reconciler a moment after it is saved
  });
  if (configs.isPending) return <Loading what="configs" />;
  const rows = (configs.data?.data ?? []).filter((c) => c.name.includes(filter));
  return (
    <>
      <ErrorText error={configs.error} />
      <TextInput label="Filter configs" type="search" value={filter} onChange={(e) => setFilter(e.currentTarget.value)} w={280} mb="sm" />
      <div className="table-wrap">
        <Table striped verticalSpacing="xs" className="data-table">
          <Table.Caption className="sr-only">Configs</Table.Caption>
          <Table.Thead>
            <Table.Tr><Table.Th scope="col">Name</Table.Th><Table.Th scope="col">Value</Table.Th><Table.Th scope="col">Default</Table.Th>
              <Table.Th scope="col">Source</Table.Th>{canEdit && <Table.Th scope="col">Actions</Table.Th>}</Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((config) => (
              <ConfigRow key={config.name} config={config} canEdit={canEdit && !config.is_read_only} showActions={canEdit}
                onSave={async (value) => {
                  await unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/", {
                    params: { path: { tenant_slug: slug, cluster_pk: cluster, name: topic } }, body: { configs: { [config.name]: value } },
                  }));
                  await queryClient.invalidateQueries({ queryKey: ["configs", kafkaId, topic] });
                }} />
            ))}
          </Table.Tbody>
        </Table>
      </div>
    </>
  );
}

function Human({ name, value }: { name: string; value: string | null | undefined }) {
  const raw = configRaw(name, value);
  return (
    <Stack gap={0}>
      <span>{configValue(name, value)}</span>
      {raw && <Text size="xs" className="muted" component="span">{raw}</Text>}
    </Stack>
  );
}

/** One config: edited in place; saving sends only this key (``null`` drops the override, back to the default).
 * The reconciler applies it to the brokers, so the shown value follows a moment later. */
function ConfigRow({ config, canEdit, showActions, onSave }: {
  config: Config; canEdit: boolean; showActions: boolean; onSave: (value: string | null) => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(config.value ?? "");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const save = async (next: string | null) => {
    setError(null);
    try {
      await onSave(next);
      setEditing(false);
      setSaved(true);
      toast.ok(next === null ? `${config.name} reset to its default.` : `${config.name} saved; applying to the brokers.`);
    } catch (caught) {
      setError(caught);
    }
  };
  const fallback = defaultOf(config);
  return (
    <Table.Tr>
      <Table.Th scope="row" fw={400}><code>{config.name}</code></Table.Th>
      <Table.Td>
        {editing ? (
          <form onSubmit={(e) => { e.preventDefault(); save(value); }}>
            <Group gap="xs" wrap="nowrap">
              <TextInput size="xs" aria-label={`Value of ${config.name}`} value={value} onChange={(e) => setValue(e.currentTarget.value)} data-autofocus />
              <Button size="xs" type="submit">Save</Button>
              <Button size="xs" variant="default" onClick={() => setEditing(false)}>Cancel</Button>
            </Group>
          </form>
        ) : config.is_sensitive ? "(sensitive)" : (
          <Group gap="xs"><Human name={config.name} value={config.value} />{saved && <Text size="xs" className="muted">saved; applying…</Text>}</Group>
        )}
        <ErrorText error={error} />
      </Table.Td>
      <Table.Td className="muted">{fallback == null ? (config.is_default ? MISSING : "cluster default") : <Human name={config.name} value={fallback} />}</Table.Td>
      <Table.Td>{config.is_default ? <Badge tone="neutral">default</Badge> : <Badge tone="info">{sourceLabel(config.source)}</Badge>}</Table.Td>
      {showActions && (
        <Table.Td>
          {canEdit && !editing && (
            <Group gap="xs" wrap="nowrap">
              <Button size="compact-xs" variant="default" aria-label={`Edit ${config.name}`} onClick={() => setEditing(true)}>Edit</Button>
              {!config.is_default && (
                <Button size="compact-xs" variant="subtle" color="red" aria-label={`Reset to default: ${config.name}`} onClick={() => save(null)}>Reset to default</Button>
              )}
            </Group>
          )}
        </Table.Td>
      )}
    </Table.Tr>
  );
}

function sourceLabel(source: string): string {
  return ({ DYNAMIC_TOPIC_CONFIG: "topic override", DYNAMIC_BROKER_CONFIG: "broker", DYNAMIC_DEFAULT_BROKER_CONFIG: "cluster", STATIC_BROKER_CONFIG: "broker file", DEFAULT_CONFIG: "default" } as Record<string, string>)[source] ?? source;
}
