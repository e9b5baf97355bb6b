import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { ConfirmButton, DataTable, ErrorText, Loading, when } from "../components/ui";
import { useTenant } from "../session";

type AclWrite = Schemas["AclWriteRequest"];
const col = createColumnHelper<Schemas["Acl"]>();

/** The bindings a producer or consumer needs, as Confluent Cloud's wizards grant them. */
export function wizardAcls(kind: "producer" | "consumer", principal: string, topic: string, prefixed: boolean, group: string): AclWrite[] {
  const pattern_type = prefixed ? "PREFIXED" : "LITERAL";
  const onTopic = (operation: AclWrite["operation"]): AclWrite => ({
    principal, resource_type: "TOPIC", resource_name: topic, pattern_type, operation, permission: "ALLOW", host: "*",
  });
  if (kind === "producer") return [onTopic("WRITE"), onTopic("DESCRIBE")];
  return [onTopic("READ"), onTopic("DESCRIBE"), {
    principal, resource_type: "GROUP", resource_name: group, pattern_type: "LITERAL", operation: "READ", permission: "ALLOW", host: "*",
  }];
}

export function AclsPage() {
  const { slug, can } = useTenant();
  const { cluster = "" } = useParams();
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug, cluster_pk: cluster };
  const acls = useQuery({
    queryKey: ["acls", slug, cluster],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/", { params: { path, query: { limit: 500 } } })),
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: ["acls", slug, cluster] });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/{id}/", { params: { path: { ...path, id } } })),
    onSuccess: refresh,
  });
  const admin = can("admin");
  return (
    <>
      <h1>ACLs</h1>
      {admin && <CreateAcls slug={slug} cluster={cluster} onDone={refresh} />}
      {acls.isPending ? <Loading what="ACLs" /> : <ErrorText error={acls.error ?? remove.error} />}
      {acls.data && (
        <DataTable caption="ACLs" data={acls.data.results} empty="No ACLs." rowId={(a) => a.id} columns={[
          col.accessor("principal", { header: "Principal" }),
          col.accessor("permission", { header: "Permission" }),
          col.accessor("operation", { header: "Operation" }),
          col.accessor("resource_type", { header: "Resource" }),
          col.accessor("resource_name", { header: "Name" }),
          col.accessor("pattern_type", { header: "Pattern" }),
          col.accessor("host", { header: "Host" }),
          col.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
          col.display({
            id: "actions", header: "Actions", cell: (x) => admin && (
              <ConfirmButton label="Delete" question={`Delete this ${x.row.original.operation} ACL?`} onConfirm={() => remove.mutate(x.row.original.id)} />
            ),
          }),
        ]} />
      )}
    </>
  );
}

function CreateAcls({ slug, cluster, onDone }: { slug: string; cluster: string; onDone: () => void }) {
  const [kind, setKind] = useState<"producer" | "consumer" | "custom">("producer");
  const [principal, setPrincipal] = useState("");
  const [topic, setTopic] = useState("");
  const [prefixed, setPrefixed] = useState(false);
  const [group, setGroup] = useState("");
  const [custom, setCustom] = useState<AclWrite>({ principal: "", resource_type: "TOPIC", resource_name: "", pattern_type: "LITERAL", operation: "READ", permission: "ALLOW", host: "*" });
  const [problem, setProblem] = useState<string | null>(null);
  const accounts = useQuery({
    queryKey: ["service-accounts", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/service-accounts/", { params: { path: { tenant_slug: slug }, query: { limit: 500 } } })),
  });
  const create = useMutation({
    mutationFn: async (bindings: AclWrite[]) => {
      for (const body of bindings)
        await unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/", { params: { path: { tenant_slug: slug, cluster_pk: cluster } }, body }));
      return bindings.length;
    },
    onSettled: onDone,
  });
  const submit = () => {
    setProblem(null);
    if (kind === "custom") {
      if (!custom.principal || !custom.resource_name) return setProblem("Give a principal and a resource name.");
      return create.mutate([custom]);
    }
    if (!principal) return setProblem("Choose a principal.");
    if (!topic) return setProblem("Name the topic (or prefix).");
    if (kind === "consumer" && !group) return setProblem("Name the consumer group.");
    create.mutate(wizardAcls(kind, principal, topic, prefixed, group));
  };
  const principals = accounts.data?.results.map((a) => a.principal) ?? [];
  return (
    <form className="stack" aria-label="Create ACLs" onSubmit={(e) => { e.preventDefault(); submit(); }}>
      <h2>Grant access</h2>
      <fieldset className="inline">
        <legend>What for</legend>
        {(["producer", "consumer", "custom"] as const).map((k) => (
          <label key={k}><input type="radio" name="acl-kind" checked={kind === k} onChange={() => setKind(k)} /> {k === "custom" ? "One ACL" : `A ${k}`}</label>
        ))}
      </fieldset>
      <datalist id="principals">{principals.map((p) => <option key={p} value={p} />)}</datalist>
      {kind !== "custom" ? (
        <div className="inline-form">
          <label>Principal <input list="principals" value={principal} onChange={(e) => setPrincipal(e.target.value)} placeholder="User:sa-…" /></label>
          <label>Topic <input value={topic} onChange={(e) => setTopic(e.target.value)} /></label>
          <label><input type="checkbox" checked={prefixed} onChange={(e) => setPrefixed(e.target.checked)} /> Every topic with this prefix</label>
          {kind === "consumer" && <label>Consumer group <input value={group} onChange={(e) => setGroup(e.target.value)} /></label>}
          <p className="muted">
            {kind === "producer" ? "Grants WRITE and DESCRIBE on the topic." : "Grants READ and DESCRIBE on the topic and READ on the group."}
          </p>
        </div>
      ) : (
        <div className="inline-form">
          <label>Principal <input list="principals" value={custom.principal} onChange={(e) => setCustom({ ...custom, principal: e.target.value })} /></label>
          <label>Permission <select aria-label="Permission" value={custom.permission} onChange={(e) => setCustom({ ...custom, permission: e.target.value as AclWrite["permission"] })}>
            <option>ALLOW</option><option>DENY</option></select></label>
          <label>Operation <select aria-label="Operation" value={custom.operation} onChange={(e) => setCustom({ ...custom, operation: e.target.value as AclWrite["operation"] })}>
            {["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"].map((o) => <option key={o}>{o}</option>)}
          </select></label>
          <label>Resource <select aria-label="Resource" value={custom.resource_type} onChange={(e) => setCustom({ ...custom, resource_type: e.target.value as AclWrite["resource_type"] })}>
            {["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "SUBJECT"].map((o) => <option key={o}>{o}</option>)}
          </select></label>
          <label>Resource name <input value={custom.resource_name} onChange={(e) => setCustom({ ...custom, resource_name: e.target.value })} /></label>
          <label>Pattern <select aria-label="Pattern" value={custom.pattern_type} onChange={(e) => setCustom({ ...custom, pattern_type: e.target.value as AclWrite["pattern_type"] })}>
            <option>LITERAL</option><option>PREFIXED</option></select></label>
        </div>
      )}
      <div><button type="submit" disabled={create.isPending}>Create</button></div>
      <ErrorText error={problem ?? create.error} />
      {create.isSuccess && <p role="status">{create.data} ACL{create.data === 1 ? "" : "s"} created.</p>}
    </form>
  );
}
