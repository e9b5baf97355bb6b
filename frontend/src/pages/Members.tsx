import { Button, Group, NativeSelect, Stack, Text, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { api, type Role, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { Badge, ConfirmButton, CopyButton, DataTable, ErrorText, FormDrawer, Loading, PageHeader, Section, toast, when } from "../components/ui";
import { useTenant } from "../session";

const col = createColumnHelper<Schemas["Membership"]>();
const ROLES: Role[] = ["viewer", "member", "admin", "owner"];

export function MembersPage() {
  const { slug, can } = useTenant();
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug };
  const members = useQuery({
    queryKey: ["members", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/members/", { params: { path, query: { limit: 500 } } })),
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: ["members", slug] });
  const change = useMutation({
    mutationFn: ({ id, role }: { id: string; role: Role }) => unwrap(api.PATCH("/api/v1/tenants/{tenant_slug}/members/{id}/", { params: { path: { ...path, id } }, body: { role } })),
    onSettled: refresh,
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/members/{id}/", { params: { path: { ...path, id } } })),
    onSettled: refresh,
  });
  const owner = can("owner");
  const [inviting, setInviting] = useState(false);
  return (
    <>
      <PageHeader title="Members and roles"
        description="Viewers read; members also produce and manage topics; admins manage clusters, ACLs, service accounts and every key; owners invite members and manage roles."
        actions={owner && <Button onClick={() => setInviting(true)}>Invite a member</Button>} />
      {can("admin") && <PendingInvitations slug={slug} owner={owner} />}
      <ErrorText error={members.error ?? change.error ?? remove.error} />
      <DataTable caption="Members" data={members.data?.results} loading={members.isPending} rowId={(m) => m.id} columns={[
        col.accessor("username", { header: "User" }),
        col.accessor("email", { header: "Email" }),
        col.accessor("role", {
          header: "Role", cell: (x) => owner ? (
            <NativeSelect size="xs" aria-label={`Role of ${x.row.original.username}`} value={x.getValue()} w={120}
              onChange={(e) => change.mutate({ id: x.row.original.id, role: e.currentTarget.value as Role })} data={ROLES} />
          ) : <Badge tone="neutral">{x.getValue()}</Badge>,
        }),
        col.accessor("principal", { header: "Principal", cell: (x) => <code>{x.getValue()}</code> }),
        col.accessor("created_at", { header: "Since", cell: (x) => when(x.getValue()) }),
        ...(owner ? [col.display({
          id: "actions", header: "Actions",
          cell: (x) => <ConfirmButton label="Remove" question={`Remove ${x.row.original.username} from the tenant?`} onConfirm={() => remove.mutate(x.row.original.id)} />,
        })] : []),
      ]} />
      {owner && (
        <FormDrawer opened={inviting} onClose={() => setInviting(false)} title="Invite a member">
          <Invite slug={slug} onDone={() => queryClient.invalidateQueries({ queryKey: ["invitations", slug] })} />
        </FormDrawer>
      )}
    </>
  );
}

function Invite({ slug, onDone }: { slug: string; onDone: () => void }) {
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>(API_DEFAULTS.invitation.role);
  const [sent, setSent] = useState<Schemas["InvitationCreated"] | null>(null);
  const invite = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/invitations/", { params: { path: { tenant_slug: slug } }, body: { email, role } })),
    onSuccess: (invitation) => { setSent(invitation); setEmail(""); toast.ok(`Invited ${invitation.email}.`); onDone(); },
  });
  return (
    <form aria-label="Invite a member" onSubmit={(e) => { e.preventDefault(); setSent(null); invite.mutate(); }}>
      <Stack>
        <TextInput label="Email" type="email" value={email} onChange={(e) => setEmail(e.currentTarget.value)} data-autofocus />
        <NativeSelect label="Role" value={role} onChange={(e) => setRole(e.currentTarget.value as Role)} data={ROLES} />
        <ErrorText error={invite.error} />
        <Group justify="flex-end"><Button type="submit" loading={invite.isPending}>Invite</Button></Group>
        {sent && (
          <Stack role="status" gap="xs" className="secret">
            <Text size="sm">
              Invited {sent.email}{sent.emailed ? " (the link was e-mailed to them)" : ""}. With an account of that address they accept signed
              in; without one, this link (shown only now, for one use) lets them choose a username and password:
            </Text>
            <Group gap="xs" wrap="nowrap">
              <TextInput readOnly aria-label="Invitation link" value={sent.join_url} onFocus={(e) => e.currentTarget.select()} style={{ flex: 1 }} />
              <CopyButton value={sent.join_url} label="Copy invitation link" />
            </Group>
          </Stack>
        )}
      </Stack>
    </form>
  );
}

const invitationCol = createColumnHelper<Schemas["Invitation"]>();

/** The tenant's invitations that are still open (pending or expired), for owners to see and revoke. */
function PendingInvitations({ slug, owner }: { slug: string; owner: boolean }) {
  const queryClient = useQueryClient();
  const path = { tenant_slug: slug };
  const invitations = useQuery({
    queryKey: ["invitations", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/invitations/", { params: { path, query: { state: "pending", limit: 500 } } })),
  });
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE("/api/v1/tenants/{tenant_slug}/invitations/{id}/", { params: { path: { ...path, id } } })),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ["invitations", slug] }),
  });
  if (invitations.isPending) return <Loading what="invitations" />;
  if (invitations.error || revoke.error) return <ErrorText error={invitations.error ?? revoke.error} />;
  if (!invitations.data.results.length) return null;
  return (
    <Section title="Pending invitations">
    <DataTable caption="Pending invitations" data={invitations.data.results} rowId={(i) => i.id} columns={[
      invitationCol.accessor("email", { header: "Email" }),
      invitationCol.accessor("role", { header: "Role" }),
      invitationCol.accessor("state", { header: "State" }),
      invitationCol.accessor("invited_by", { header: "Invited by" }),
      invitationCol.accessor("expires_at", { header: "Expires", cell: (x) => when(x.getValue()) }),
      invitationCol.display({
        id: "actions", header: "Actions",
        cell: (x) => owner && <ConfirmButton label="Revoke" question={`Revoke the invitation of ${x.row.original.email}?`} onConfirm={() => revoke.mutate(x.row.original.id)} />,
      }),
    ]} />
    </Section>
  );
}
