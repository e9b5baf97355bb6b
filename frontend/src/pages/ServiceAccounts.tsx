// Service accounts and API keys. Names instead of ids (a key's owner and cluster by name), descriptions with code
// shown as code (no literal backticks), create forms in drawers; a key's secret is shown exactly once, when it is
// issued (it is stored hashed), with copy buttons; a key can be scoped to one cluster; revoking asks first.
import { Button, Group, NativeSelect, Stack, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { Badge, ConfirmButton, CopyButton, DataTable, ErrorText, FormDrawer, PageHeader, Prose, Section, toast, when } from "../components/ui";
import { str } from "../lib/extra";
import { ago } from "../lib/units";
import { useTenant } from "../session";
import { useClusters } from "./Clusters";

const saCol = createColumnHelper<Schemas["ServiceAccount"]>();
const keyCol = createColumnHelper<Schemas["ApiKey"]>();

export function ServiceAccountsPage() {
  const { slug, can } = useTenant();
  const queryClient = useQueryClient();
  const [creating, setCreating] = useState<"account" | "key" | null>(null);
  const path = { tenant_slug: slug };
  const accounts = useQuery({
    queryKey: ["service-accounts", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/service-accounts/", { params: { path, query: { limit: 500 } } })),
  });
  const keys = useQuery({
    queryKey: ["api-keys", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/api-keys/", { params: { path, query: { limit: 500 } } })),
  });
  const clusters = useClusters(slug);
  const clusterName = new Map((clusters.data?.results ?? []).map((c) => [c.id, c.name]));
  const accountName = new Map((accounts.data?.results ?? []).map((a) => [a.principal, a.name]));
  const refresh = () => {
    queryClient.invalidateQueries({ queryKey: ["service-accounts", slug] });
    queryClient.invalidateQueries({ queryKey: ["api-keys", slug] });
  };
  const removeAccount = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/service-accounts/{id}/", { params: { path: { ...path, id } } })),
    onSuccess: () => toast.ok("Service account deleted; its keys are revoked."),
    onSettled: refresh,
  });
  const revoke = useMutation({
    mutationFn: (key_id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/api-keys/{key_id}/", { params: { path: { ...path, key_id } } })),
    onSuccess: (_, key) => toast.ok(`Key ${key} revoked.`),
    onSettled: refresh,
  });
  const admin = can("admin");
  const member = can("member");
  return (
    <>
      <PageHeader title="Service accounts" description="Identities for applications: each has a role in the tenant and its own Kafka principal for ACLs."
        actions={admin && <Button onClick={() => setCreating("account")}>New service account</Button>} />
      <ErrorText error={accounts.error ?? removeAccount.error} />
      <DataTable caption="Service accounts" data={accounts.data?.results} loading={accounts.isPending} empty="No service accounts." rowId={(a) => a.id} columns={[
        saCol.accessor("name", { header: "Name" }),
        saCol.accessor("role", { header: "Role", cell: (x) => <Badge tone="neutral">{x.getValue()}</Badge> }),
        saCol.accessor("principal", { header: "Principal", cell: (x) => <code>{x.getValue()}</code> }),
        saCol.accessor("description", { header: "Description", cell: (x) => <Prose text={x.getValue()} /> }),
        saCol.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
        ...(admin ? [saCol.display({
          id: "actions", header: "Actions",
          cell: (x) => <ConfirmButton label="Delete" question={`Delete ${x.row.original.name} and revoke its keys?`} onConfirm={() => removeAccount.mutate(x.row.original.id)} />,
        })] : []),
      ]} />
      <Section title="API keys" actions={member && <Button onClick={() => setCreating("key")}>New API key</Button>}>
        <ErrorText error={keys.error ?? revoke.error} />
        <DataTable caption="API keys" data={keys.data?.results} loading={keys.isPending} empty="No API keys." rowId={(k) => k.key_id} columns={[
          keyCol.accessor("key_id", { header: "Key", cell: (x) => <code>{x.getValue()}</code> }),
          keyCol.accessor("description", { header: "Description", cell: (x) => <Prose text={x.getValue()} /> }),
          keyCol.accessor((k) => str(k, "owner_name") ?? accountName.get(k.principal) ?? k.owner?.name ?? k.principal, {
            id: "owner", header: "Acts as", cell: (x) => x.getValue(),
          }),
          keyCol.accessor((k) => (k.cluster ? str(k, "cluster_name") ?? clusterName.get(k.cluster) ?? k.cluster : "All clusters"), { id: "cluster", header: "Cluster scope" }),
          keyCol.accessor("last_used_at", { header: "Last used", cell: (x) => (x.getValue() ? <span title={when(x.getValue())}>{ago(x.getValue())}</span> : "never") }),
          keyCol.accessor("revoked", { header: "State", cell: (x) => (x.getValue() ? <Badge tone="neutral">revoked {when(x.row.original.revoked_at)}</Badge> : <Badge tone="ok">active</Badge>) }),
          ...(member ? [keyCol.display({
            id: "actions", header: "Actions",
            cell: (x) => !x.row.original.revoked && <ConfirmButton label="Revoke" question={`Revoke key ${x.row.original.key_id}? Clients using it stop working.`} onConfirm={() => revoke.mutate(x.row.original.key_id)} />,
          })] : []),
        ]} />
      </Section>
      {admin && (
        <FormDrawer opened={creating === "account"} onClose={() => setCreating(null)} title="Create a service account">
          <CreateAccount slug={slug} onDone={() => { refresh(); setCreating(null); }} />
        </FormDrawer>
      )}
      {member && (
        <FormDrawer opened={creating === "key"} onClose={() => setCreating(null)} title="Create an API key">
          <IssueKey slug={slug} accounts={admin ? accounts.data?.results ?? [] : []} clusters={clusters.data?.results ?? []} onDone={refresh} />
        </FormDrawer>
      )}
    </>
  );
}

function CreateAccount({ slug, onDone }: { slug: string; onDone: () => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [role, setRole] = useState<Schemas["ServiceAccountRoleEnum"]>(API_DEFAULTS.serviceAccount.role);
  const create = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/service-accounts/", { params: { path: { tenant_slug: slug } }, body: { name, description, role } })),
    onSuccess: (account) => { setName(""); setDescription(""); toast.ok(`Service account ${account.name} created.`); onDone(); },
  });
  return (
    <form aria-label="Create a service account" onSubmit={(e) => { e.preventDefault(); create.mutate(); }}>
      <Stack>
        <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} data-autofocus />
        <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
        <NativeSelect label="Role" value={role} onChange={(e) => setRole(e.currentTarget.value as Schemas["ServiceAccountRoleEnum"])} data={["viewer", "member", "admin"]} />
        <ErrorText error={create.error} />
        <Group justify="flex-end"><Button type="submit" loading={create.isPending}>Create</Button></Group>
      </Stack>
    </form>
  );
}

function IssueKey({ slug, accounts, clusters, onDone }: {
  slug: string; accounts: Schemas["ServiceAccount"][]; clusters: Schemas["Cluster"][]; onDone: () => void;
}) {
  const [owner, setOwner] = useState("");
  const [description, setDescription] = useState("");
  const [cluster, setCluster] = useState("");
  const issue = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/api-keys/", {
      params: { path: { tenant_slug: slug } },
      body: { description, ...(owner ? { service_account: owner } : {}), ...(cluster ? { cluster } : {}) },
    })),
    onSuccess: () => { setDescription(""); onDone(); },
  });
  const issued = issue.data;
  return (
    <form aria-label="Create an API key" onSubmit={(e) => { e.preventDefault(); issue.mutate(); }}>
      <Stack>
        <NativeSelect label="For" value={owner} onChange={(e) => setOwner(e.currentTarget.value)}
          data={[{ value: "", label: "Me" }, ...accounts.map((a) => ({ value: a.id, label: a.name }))]} />
        <NativeSelect label="Cluster" value={cluster} onChange={(e) => setCluster(e.currentTarget.value)}
          description="A key scoped to one cluster reaches that cluster only."
          data={[{ value: "", label: "All clusters" }, ...clusters.map((c) => ({ value: c.id, label: c.name }))]} />
        <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
        <ErrorText error={issue.error} />
        <Group justify="flex-end"><Button type="submit" loading={issue.isPending}>Create key</Button></Group>
        {issued && (
          <Stack role="status" gap="xs" className="secret">
            <Text fw={700}>Copy the secret now: it is not shown again.</Text>
            <Group gap="xs" wrap="nowrap"><Text size="sm">Key</Text><code data-testid="new-key-id">{issued.key_id}</code><CopyButton value={issued.key_id} label="Copy key id" /></Group>
            <Group gap="xs" wrap="nowrap"><Text size="sm">Secret</Text><code data-testid="new-key-secret">{issued.secret}</code><CopyButton value={issued.secret} label="Copy secret" /></Group>
            <Group><CopyButton value={`${issued.key_id}:${issued.secret}`} label="Copy key:secret" /><Text size="xs" className="muted">key:secret, as REST clients send it</Text></Group>
          </Stack>
        )}
      </Stack>
    </form>
  );
}
