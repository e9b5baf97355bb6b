// Service accounts and API keys. A key's secret is shown exactly once, when it is issued (it is stored
// hashed), with a copy button; revoking asks first.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { ConfirmButton, DataTable, ErrorText, Loading, when } from "../components/ui";
import { useTenant } from "../session";

const saCol = createColumnHelper<Schemas["ServiceAccount"]>();
const keyCol = createColumnHelper<Schemas["ApiKey"]>();

export function ServiceAccountsPage() {
  const { slug, can } = useTenant();
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug };
  const accounts = useQuery({
    queryKey: ["service-accounts", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/service-accounts/", { params: { path, query: { limit: 500 } } })),
  });
  const keys = useQuery({
    queryKey: ["api-keys", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/api-keys/", { params: { path, query: { limit: 500 } } })),
  });
  const refresh = () => {
    queryClient.invalidateQueries({ queryKey: ["service-accounts", slug] });
    queryClient.invalidateQueries({ queryKey: ["api-keys", slug] });
  };
  const removeAccount = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/service-accounts/{id}/", { params: { path: { ...path, id } } })),
    onSettled: refresh,
  });
  const revoke = useMutation({
    mutationFn: (key_id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/api-keys/{key_id}/", { params: { path: { ...path, key_id } } })),
    onSettled: refresh,
  });
  const admin = can("admin");
  return (
    <>
      <h1>Service accounts</h1>
      {admin && <CreateAccount slug={slug} onDone={refresh} />}
      {accounts.isPending ? <Loading what="service accounts" /> : <ErrorText error={accounts.error ?? removeAccount.error} />}
      {accounts.data && (
        <DataTable caption="Service accounts" data={accounts.data.results} empty="No service accounts." rowId={(a) => a.id} columns={[
          saCol.accessor("name", { header: "Name" }),
          saCol.accessor("role", { header: "Role" }),
          saCol.accessor("principal", { header: "Principal", cell: (x) => <code>{x.getValue()}</code> }),
          saCol.accessor("description", { header: "Description" }),
          saCol.accessor("created_at", { header: "Created", cell: (x) => when(x.getValue()) }),
          saCol.display({
            id: "actions", header: "Actions",
            cell: (x) => admin && <ConfirmButton label="Delete" question={`Delete ${x.row.original.name} and revoke its keys?`} onConfirm={() => removeAccount.mutate(x.row.original.id)} />,
          }),
        ]} />
      )}
      <h1>API keys</h1>
      {can("member") && <IssueKey slug={slug} accounts={admin ? accounts.data?.results ?? [] : []} onDone={refresh} />}
      {keys.isPending ? <Loading what="API keys" /> : <ErrorText error={keys.error ?? revoke.error} />}
      {keys.data && (
        <DataTable caption="API keys" data={keys.data.results} empty="No API keys." rowId={(k) => k.key_id} columns={[
          keyCol.accessor("key_id", { header: "Key", cell: (x) => <code>{x.getValue()}</code> }),
          keyCol.accessor("description", { header: "Description" }),
          keyCol.accessor("principal", { header: "Acts as", cell: (x) => <code>{x.getValue()}</code> }),
          keyCol.accessor("cluster", { header: "Cluster scope", cell: (x) => x.getValue() || "all" }),
          keyCol.accessor("last_used_at", { header: "Last used", cell: (x) => when(x.getValue()) }),
          keyCol.accessor("revoked", { header: "State", cell: (x) => (x.getValue() ? `revoked ${when(x.row.original.revoked_at)}` : "active") }),
          keyCol.display({
            id: "actions", header: "Actions",
            cell: (x) => can("member") && !x.row.original.revoked && <ConfirmButton label="Revoke" question={`Revoke key ${x.row.original.key_id}? Clients using it stop working.`} onConfirm={() => revoke.mutate(x.row.original.key_id)} />,
          }),
        ]} />
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
    onSuccess: () => { setName(""); setDescription(""); onDone(); },
  });
  return (
    <form className="inline-form" aria-label="Create a service account" onSubmit={(e) => { e.preventDefault(); create.mutate(); }}>
      <h2>Create a service account</h2>
      <label>Name <input value={name} onChange={(e) => setName(e.target.value)} /></label>
      <label>Description <input value={description} onChange={(e) => setDescription(e.target.value)} /></label>
      <label>Role <select aria-label="Role" value={role} onChange={(e) => setRole(e.target.value as Schemas["ServiceAccountRoleEnum"])}>
        <option>viewer</option><option>member</option><option>admin</option></select></label>
      <button type="submit" disabled={create.isPending}>Create</button>
      <ErrorText error={create.error} />
    </form>
  );
}

function IssueKey({ slug, accounts, onDone }: { slug: string; accounts: Schemas["ServiceAccount"][]; onDone: () => void }) {
  const [owner, setOwner] = useState("");
  const [description, setDescription] = useState("");
  const [copied, setCopied] = useState(false);
  const issue = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/api-keys/", {
      params: { path: { tenant_slug: slug } }, body: { description, ...(owner ? { service_account: owner } : {}) },
    })),
    onSuccess: () => { setCopied(false); setDescription(""); onDone(); },
  });
  const issued = issue.data;
  const pair = issued ? `${issued.key_id}:${issued.secret}` : "";
  return (
    <form className="stack" aria-label="Create an API key" onSubmit={(e) => { e.preventDefault(); issue.mutate(); }}>
      <h2>Create an API key</h2>
      <div className="inline-form">
        <label>For <select aria-label="For" value={owner} onChange={(e) => setOwner(e.target.value)}>
          <option value="">Me</option>
          {accounts.map((a) => <option key={a.id} value={a.id}>{a.name}</option>)}
        </select></label>
        <label>Description <input value={description} onChange={(e) => setDescription(e.target.value)} /></label>
        <button type="submit" disabled={issue.isPending}>Create key</button>
      </div>
      <ErrorText error={issue.error} />
      {issued && (
        <div role="status" className="secret">
          <p><strong>Copy the secret now: it is not shown again.</strong></p>
          <p>Key <code data-testid="new-key-id">{issued.key_id}</code></p>
          <p>Secret <code data-testid="new-key-secret">{issued.secret}</code></p>
          <button type="button" onClick={async () => { await navigator.clipboard.writeText(pair); setCopied(true); }}>
            {copied ? "Copied" : "Copy key:secret"}
          </button>
        </div>
      )}
    </form>
  );
}
