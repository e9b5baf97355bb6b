// The audit log: who did what to which object, in words (the API's summary and names where it has them), details as
// label/value pairs with dates (no raw JSON, no epoch floats), filters by action, actor, target type and time, paged
// by the server; the table wraps within the page at any width.
import { Button, Group, NativeSelect, Stack, Text, TextInput } from "@mantine/core";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useEffect, useState } from "react";
import { useSearchParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, DataTable, ErrorText, PageHeader, Pager, when } from "../components/ui";
import { actionLabel, detailPairs } from "../lib/audit";
import { str } from "../lib/extra";
import { ago, plural } from "../lib/units";
import { useTenant } from "../session";

const PAGE = 50;
const col = createColumnHelper<Schemas["AuditEvent"]>();
const FILTERS = ["action_prefix", "actor", "target_type", "since"] as const;
type Filter = (typeof FILTERS)[number];

function useFacets(slug: string) {
  return useQuery({
    queryKey: ["audit-facets", slug],
    queryFn: async () => {
      const answer = await fetch(`/api/v1/tenants/${encodeURIComponent(slug)}/audit-events/facets/`, { credentials: "same-origin" });
      return answer.ok ? ((await answer.json()) as { actions: string[]; target_types: string[] }) : null;
    },
    staleTime: 60_000,
  });
}

export function AuditPage() {
  const { slug } = useTenant();
  const [params, setParams] = useSearchParams();
  const page = Math.max(0, Number(params.get("page") ?? 0) || 0);
  const applied = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) ?? ""])) as Record<Filter, string>;
  const [typed, setTyped] = useState(applied);
  useEffect(() => setTyped(applied), [params.toString()]); // eslint-disable-line react-hooks/exhaustive-deps
  const query = Object.fromEntries(Object.entries(applied).filter(([, v]) => v).map(([k, v]) => [k, k === "since" ? new Date(v).toISOString() : v]));
  const events = useQuery({
    queryKey: ["audit", slug, page, query],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/audit-events/", {
      params: { path: { tenant_slug: slug }, query: { limit: PAGE, offset: page * PAGE, ...query } as never },
    })),
    placeholderData: keepPreviousData,
  });
  const facets = useFacets(slug);
  const total = events.data?.count ?? 0;
  const pages = Math.max(1, Math.ceil(total / PAGE));
  const apply = (next: Record<Filter, string>) => setParams(() => {
    const p = new URLSearchParams();
    for (const f of FILTERS) if (next[f]) p.set(f, next[f]);
    return p;
  });
  const prefixes = [...new Set((facets.data?.actions ?? []).map((a) => `${a.split(".")[0]}.`))].sort();
  return (
    <>
      <PageHeader title="Audit log" description="Every change to this tenant: who, what, on which object, when." />
      <form aria-label="Filter the audit log" onSubmit={(e) => { e.preventDefault(); apply(typed); }}>
        <Group align="flex-end" gap="sm" wrap="wrap" mb="sm">
          <NativeSelect size="xs" label="Action" value={typed.action_prefix} onChange={(e) => setTyped({ ...typed, action_prefix: e.currentTarget.value })}
            data={[{ value: "", label: "Any" }, ...(prefixes.length ? prefixes : ["cluster.", "topic.", "acl.", "api_key.", "service_account.", "member.", "invitation.", "report.", "schema."])
              .map((p) => ({ value: p, label: actionLabel(p.slice(0, -1)) }))]} />
          <TextInput size="xs" label="Who" placeholder="name, e-mail or principal" value={typed.actor} onChange={(e) => setTyped({ ...typed, actor: e.currentTarget.value })} />
          <NativeSelect size="xs" label="Target" value={typed.target_type} onChange={(e) => setTyped({ ...typed, target_type: e.currentTarget.value })}
            data={[{ value: "", label: "Any" }, ...(facets.data?.target_types ?? ["cluster", "topic", "acl", "api_key", "service_account", "membership", "report"])
              .map((t) => ({ value: t, label: actionLabel(t) }))]} />
          <TextInput size="xs" label="Since" type="datetime-local" value={typed.since} onChange={(e) => setTyped({ ...typed, since: e.currentTarget.value })} />
          <Button size="xs" type="submit">Filter</Button>
          {Object.values(applied).some(Boolean) && <Button size="xs" variant="subtle" onClick={() => apply({ action_prefix: "", actor: "", target_type: "", since: "" })}>Clear filters</Button>}
        </Group>
      </form>
      <ErrorText error={events.error} />
      <DataTable caption="Audit events" data={events.data?.results} loading={events.isPending} rowId={(e) => e.id}
        empty={Object.values(applied).some(Boolean) ? "No events match these filters." : "No events yet."} columns={[
          col.accessor("created_at", { header: "When", cell: (x) => <span title={when(x.getValue())}>{ago(x.getValue())}</span> }),
          col.accessor((e) => str(e, "actor_name") ?? e.actor_display, { id: "actor", header: "Who" }),
          col.accessor("action", { header: "Action", cell: (x) => <Badge tone="info">{x.getValue()}</Badge> }),
          col.accessor((e) => str(e, "target_name") ?? `${e.target_type} ${e.target_id.length > 14 ? `${e.target_id.slice(0, 12)}…` : e.target_id}`, {
            id: "target", header: "Target", cell: (x) => <span title={`${x.row.original.target_type} ${x.row.original.target_id}`}>{x.getValue()}</span>,
          }),
          col.accessor("data", { header: "Details", enableSorting: false, cell: (x) => <Details event={x.row.original} /> }),
        ]} />
      <Pager page={page} pages={pages} total={plural(total, "event")} onPage={(next) => setParams((p) => { p.set("page", String(next)); return p; })} />
    </>
  );
}

function Details({ event }: { event: Schemas["AuditEvent"] }) {
  const summary = str(event, "summary");
  const pairs = detailPairs(event.data);
  return (
    <Stack gap={0} maw="32rem">
      {summary && <Text size="sm">{summary}</Text>}
      {pairs.slice(0, 6).map(([k, v]) => <Text key={k} size="xs"><span className="muted">{k}:</span> {v}</Text>)}
      {event.count > 1 && <Text size="xs" className="muted">{plural(event.count, "time")}</Text>}
    </Stack>
  );
}
