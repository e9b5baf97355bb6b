import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmButton, DataTable, ErrorText, Loading, ReadyBadge } from "../components/ui";
import { useTenant } from "../session";
import { useCluster } from "./Clusters";
import { bytes } from "./ClusterOverview";
import { LiveTail } from "./LiveTail";
import { Messages } from "./Messages";

const TABS = ["messages", "tail", "partitions", "configs"] as const;
type Tab = (typeof TABS)[number];
const TAB_LABEL: Record<Tab, string> = { messages: "Messages", tail: "Live tail", partitions: "Partitions", configs: "Configs" };

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
  return (
    <>
      <p className="crumbs"><Link to={`/t/${slug}/clusters/${cluster}/topics`}>Topics</Link> / <strong>{topic}</strong></p>
      <h1>{topic} {detail.data && <ReadyBadge status={detail.data.status} />}</h1>
      <ErrorText error={detail.error} />
      {detail.data && <p className="muted">{detail.data.partitions} partitions · replication factor {detail.data.replication_factor}</p>}
      {!can("member") && (
        <p className="muted" role="note">Your role ({role}) reads this topic; producing, editing configs and deleting it need the member role.</p>
      )}
      {(may ? may.delete.allowed : can("member")) && (
        <p>
          <ConfirmButton label="Delete topic" question={`Delete topic ${topic} and all its records?`} typeToConfirm={topic} onConfirm={() => remove.mutate()} />
        </p>
      )}
      <ErrorText error={remove.error} />
      <div role="tablist" aria-label="Topic" className="tabs">
        {TABS.map((t) => (
          <button key={t} role="tab" type="button" aria-selected={tab === t} onClick={() => setParams({ tab: t })}>
            {TAB_LABEL[t]}
          </button>
        ))}
      </div>
      <div role="tabpanel" aria-label={TAB_LABEL[tab]}>
        {!kafkaId ? <Loading what="the cluster" /> : tab === "messages" ? (
          <Messages kafkaId={kafkaId} topic={topic} partitions={detail.data?.partitions ?? 0} canProduce={can("member")} produce={may?.produce} read={may?.read} />
        ) : tab === "tail" ? (
          <LiveTail kafkaId={kafkaId} topic={topic} />
        ) : tab === "partitions" ? (
          <Partitions slug={slug} cluster={cluster} topic={topic} />
        ) : (
          <Configs slug={slug} cluster={cluster} kafkaId={kafkaId} topic={topic} canEdit={may ? may.edit_configs.allowed : can("member")} />
        )}
      </div>
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
  if (partitions.isPending) return <Loading what="partitions" />;
  return (
    <>
      <ErrorText error={partitions.error} />
      <DataTable caption="Partitions" data={partitions.data ?? []} columns={[
        partCol.accessor("partition", { header: "Partition" }),
        partCol.accessor("leader", { header: "Leader", cell: (x) => (x.getValue() < 0 ? "none" : x.getValue()) }),
        partCol.accessor("replicas", { header: "Replicas", enableSorting: false, cell: (x) => x.getValue().join(", ") }),
        partCol.accessor("isr", { header: "ISR", enableSorting: false, cell: (x) => x.getValue().join(", ") }),
        partCol.accessor("start_offset", { header: "Start offset" }),
        partCol.accessor("end_offset", { header: "End offset" }),
        partCol.accessor((p) => p.end_offset - p.start_offset, { id: "records", header: "Records" }),
        partCol.accessor("size_bytes", { header: "Size", cell: (x) => bytes(x.getValue()) }),
        partCol.accessor((p) => (p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok"), { id: "health", header: "Health" }),
      ]} />
    </>
  );
}

type Config = Schemas["KafkaTopicConfigData"];

function defaultOf(config: Config): string | null {
  if (config.is_default) return config.value ?? null;
  const synonyms = (config.synonyms ?? []) as { name?: string; value?: string | null; source?: string }[];
  const fallback = synonyms.find((s) => s.source !== "DYNAMIC_TOPIC_CONFIG");
  return fallback?.value ?? null;
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
      <label>Filter configs <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} /></label>
      <table>
        <caption className="sr-only">Configs</caption>
        <thead>
          <tr><th scope="col">Name</th><th scope="col">Value</th><th scope="col">Default</th><th scope="col">Source</th></tr>
        </thead>
        <tbody>
          {rows.map((config) => (
            <ConfigRow key={config.name} config={config} canEdit={canEdit && !config.is_read_only}
              onSave={async (value) => {
                await unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/{name}/", {
                  params: { path: { tenant_slug: slug, cluster_pk: cluster, name: topic } }, body: { configs: { [config.name]: value } },
                }));
                await queryClient.invalidateQueries({ queryKey: ["configs", kafkaId, topic] });
              }} />
          ))}
        </tbody>
      </table>
    </>
  );
}

/** One config: edited in place; saving sends only this key (``null`` drops the override, back to the default).
 * The reconciler applies it to the brokers, so the shown value follows a moment later. */
function ConfigRow({ config, canEdit, onSave }: { config: Config; canEdit: boolean; onSave: (value: string | null) => Promise<void> }) {
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
    } catch (caught) {
      setError(caught);
    }
  };
  const shown = config.is_sensitive ? "(sensitive)" : config.value ?? "null";
  return (
    <tr>
      <th scope="row"><code>{config.name}</code></th>
      <td>
        {editing ? (
          <form className="inline-form" onSubmit={(e) => { e.preventDefault(); save(value); }}>
            <input aria-label={`Value of ${config.name}`} value={value} onChange={(e) => setValue(e.target.value)} />
            <button type="submit">Save</button>
            <button type="button" onClick={() => setEditing(false)}>Cancel</button>
          </form>
        ) : (
          <>
            <span className={config.is_default ? "muted" : ""}>{shown}</span>{" "}
            {canEdit && <button type="button" className="link" aria-label={`Edit ${config.name}`} onClick={() => setEditing(true)}>Edit</button>}
            {canEdit && !config.is_default && <button type="button" className="link" onClick={() => save(null)}>Reset to default</button>}
            {saved && <span className="muted"> saved; applying…</span>}
          </>
        )}
        <ErrorText error={error} />
      </td>
      <td className="muted">{defaultOf(config) ?? "—"}</td>
      <td>{config.source}</td>
    </tr>
  );
}
