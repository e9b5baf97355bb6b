// ACLs of a cluster: principals by name (the API's principal_name; the raw principal under it), a grant-access
// wizard in a drawer (producer, consumer, or one ACL) with a principal picker, and deletion after confirming.
import { Button, Checkbox, Group, NativeSelect, Radio, Stack, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, ConfirmButton, DataTable, ErrorText, FormDrawer, PageHeader, toast, when } from "../components/ui";
import { str } from "../lib/extra";
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
  const [granting, setGranting] = useState(false);
  const path = { tenant_slug: slug, cluster_pk: cluster };
  const acls = useQuery({
    queryKey: ["acls", slug, cluster],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/", { params: { path, query: { limit: 500 } } })),
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: ["acls", slug, cluster] });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/{id}/", { params: { path: { ...path, id } } })),
    onSuccess: () => toast.ok("ACL deleted."),
    onSettled: refresh,
  });
  const admin = can("admin");
  const names = usePrincipalNames(slug);
  return (
    <>
      <PageHeader title="ACLs" description="What each principal may do on this cluster's topics, groups and transactional ids (roles and ACLs compose)."
        actions={admin && <Button onClick={() => setGranting(true)}>Grant access</Button>} />
      <ErrorText error={acls.error ?? remove.error} />
      <DataTable caption="ACLs" data={acls.data?.results} loading={acls.isPending} empty="No ACLs: only the tenant's roles apply." rowId={(a) => a.id} pageSize={50} columns={[
        col.accessor((a) => str(a, "principal_name") ?? names.get(a.principal) ?? a.principal, {
          id: "principal", header: "Principal", cell: (x) => <PrincipalCell name={x.getValue()} principal={x.row.original.principal} />,
        }),
        col.accessor("permission", { header: "Permission", cell: (x) => <Badge tone={x.getValue() === "ALLOW" ? "ok" : "bad"}>{x.getValue()}</Badge> }),
        col.accessor("operation", { header: "Operation" }),
        col.accessor("resource_type", { header: "Resource" }),
        col.accessor("resource_name", { header: "Name", cell: (x) => <code>{x.getValue()}</code> }),
        col.accessor("pattern_type", { header: "Pattern" }),
        col.accessor("host", { header: "Host" }),
        col.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
        ...(admin ? [col.display({
          id: "actions", header: "Actions", cell: (x) => (
            <ConfirmButton label="Delete" question={`Delete this ${x.row.original.operation} ACL of ${names.get(x.row.original.principal) ?? x.row.original.principal}?`}
              onConfirm={() => remove.mutate(x.row.original.id)} />
          ),
        })] : []),
      ]} />
      {admin && (
        <FormDrawer opened={granting} onClose={() => setGranting(false)} title="Grant access">
          <CreateAcls slug={slug} cluster={cluster} onDone={(n) => { refresh(); if (n) { toast.ok(`${n} ACL${n === 1 ? "" : "s"} created.`); setGranting(false); } }} />
        </FormDrawer>
      )}
    </>
  );
}

function PrincipalCell({ name, principal }: { name: string; principal: string }) {
  if (name === principal) return <code>{principal}</code>;
  return (
    <Stack gap={0}>
      <span>{name}</span>
      <Text size="xs" className="muted"><code>{principal}</code></Text>
    </Stack>
  );
}

interface PrincipalOption { principal: string; name: string; kind: string }

/** Everyone an ACL may name: the API's principals list where it has one, else the service accounts. */
function usePrincipals(slug: string): PrincipalOption[] {
  const principals = useQuery({
    queryKey: ["principals", slug],
    queryFn: async () => {
      const answer = await fetch(`/api/v1/tenants/${encodeURIComponent(slug)}/principals/`, { credentials: "same-origin" });
      if (!answer.ok) return null;
      const body = await answer.json();
      return (Array.isArray(body) ? body : body.results ?? []) as { principal: string; name?: string; kind?: string; email?: string | null }[];
    },
    staleTime: 60_000,
  });
  const accounts = useQuery({
    queryKey: ["service-accounts", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/service-accounts/", { params: { path: { tenant_slug: slug }, query: { limit: 500 } } })),
    enabled: principals.isSuccess && principals.data === null,
  });
  if (principals.data) return principals.data.map((p) => ({ principal: p.principal, name: p.name ?? p.email ?? p.principal, kind: p.kind ?? "" }));
  return (accounts.data?.results ?? []).map((a) => ({ principal: a.principal, name: a.name, kind: "service_account" }));
}

function usePrincipalNames(slug: string): Map<string, string> {
  return new Map(usePrincipals(slug).map((p) => [p.principal, p.name]));
}

const KIND_LABEL: Record<string, string> = { service_account: "service account", user: "user", wildcard: "everyone" };

function CreateAcls({ slug, cluster, onDone }: { slug: string; cluster: string; onDone: (created: number) => void }) {
  const [kind, setKind] = useState<"producer" | "consumer" | "custom">("producer");
  const [principal, setPrincipal] = useState("");
  const [topic, setTopic] = useState("");
  const [prefixed, setPrefixed] = useState(false);
  const [group, setGroup] = useState("");
  const [custom, setCustom] = useState<AclWrite>({ principal: "", resource_type: "TOPIC", resource_name: "", pattern_type: "LITERAL", operation: "READ", permission: "ALLOW", host: "*" });
  const [problem, setProblem] = useState<string | null>(null);
  const options = usePrincipals(slug);
  const create = useMutation({
    mutationFn: async (bindings: AclWrite[]) => {
      for (const body of bindings)
        await unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/acls/", { params: { path: { tenant_slug: slug, cluster_pk: cluster } }, body }));
      return bindings.length;
    },
    onSuccess: (n) => onDone(n),
    onError: () => onDone(0),
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
  const nameOf = (p: string) => options.find((o) => o.principal === p)?.name;
  const principalInput = (value: string, set: (v: string) => void) => (
    <TextInput label="Principal" list="principals" value={value} onChange={(e) => set(e.currentTarget.value)} placeholder="a name, or User:sa-…"
      description={nameOf(value) ? `= ${nameOf(value)}` : "Pick from the list (names of service accounts and members), or type User:* for everyone."} />
  );
  return (
    <form aria-label="Create ACLs" onSubmit={(e) => { e.preventDefault(); submit(); }}>
      <Stack>
        <Radio.Group label="What for" value={kind} onChange={(v) => setKind(v as typeof kind)}>
          <Group mt={4}>
            <Radio value="producer" label="A producer" />
            <Radio value="consumer" label="A consumer" />
            <Radio value="custom" label="One ACL" />
          </Group>
        </Radio.Group>
        <datalist id="principals">
          {options.map((p) => <option key={p.principal} value={p.principal}>{`${p.name}${p.kind ? ` (${KIND_LABEL[p.kind] ?? p.kind})` : ""}`}</option>)}
        </datalist>
        {kind !== "custom" ? (
          <>
            {principalInput(principal, setPrincipal)}
            <TextInput label="Topic" value={topic} onChange={(e) => setTopic(e.currentTarget.value)} />
            <Checkbox label="Every topic with this prefix" checked={prefixed} onChange={(e) => setPrefixed(e.currentTarget.checked)} />
            {kind === "consumer" && <TextInput label="Consumer group" value={group} onChange={(e) => setGroup(e.currentTarget.value)} />}
            <Text size="sm" className="muted">
              {kind === "producer" ? "Grants WRITE and DESCRIBE on the topic." : "Grants READ and DESCRIBE on the topic and READ on the group."}
            </Text>
          </>
        ) : (
          <>
            {principalInput(custom.principal, (v) => setCustom({ ...custom, principal: v }))}
            <Group grow>
              <NativeSelect label="Permission" value={custom.permission} onChange={(e) => setCustom({ ...custom, permission: e.currentTarget.value as AclWrite["permission"] })}
                data={["ALLOW", "DENY"]} />
              <NativeSelect label="Operation" value={custom.operation} onChange={(e) => setCustom({ ...custom, operation: e.currentTarget.value as AclWrite["operation"] })}
                data={["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"]} />
            </Group>
            <Group grow>
              <NativeSelect label="Resource" value={custom.resource_type} onChange={(e) => setCustom({ ...custom, resource_type: e.currentTarget.value as AclWrite["resource_type"] })}
                data={["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "SUBJECT"]} />
              <NativeSelect label="Pattern" value={custom.pattern_type} onChange={(e) => setCustom({ ...custom, pattern_type: e.currentTarget.value as AclWrite["pattern_type"] })}
                data={["LITERAL", "PREFIXED"]} />
            </Group>
            <TextInput label="Resource name" value={custom.resource_name} onChange={(e) => setCustom({ ...custom, resource_name: e.currentTarget.value })} />
          </>
        )}
        <ErrorText error={problem ?? create.error} />
        <Group justify="flex-end"><Button type="submit" loading={create.isPending}>Create</Button></Group>
      </Stack>
    </form>
  );
}
