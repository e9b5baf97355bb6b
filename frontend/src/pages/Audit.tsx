import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { api, type Schemas, unwrap } from "../api/client";
import { DataTable, ErrorText, when } from "../components/ui";
import { useTenant } from "../session";

const PAGE = 50;
const col = createColumnHelper<Schemas["AuditEvent"]>();

export function AuditPage() {
  const { slug } = useTenant();
  const [page, setPage] = useState(0);
  const events = useQuery({
    queryKey: ["audit", slug, page],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/audit-events/", { params: { path: { tenant_slug: slug }, query: { limit: PAGE, offset: page * PAGE } } })),
    placeholderData: keepPreviousData,
  });
  const pages = Math.max(1, Math.ceil((events.data?.count ?? 0) / PAGE));
  return (
    <>
      <h1>Audit log</h1>
      <ErrorText error={events.error} />
      <DataTable caption="Audit events" data={events.data?.results ?? []} empty={events.isPending ? "Loading…" : "No events."} columns={[
        col.accessor("created_at", { header: "When", cell: (x) => when(x.getValue()) }),
        col.accessor("actor_display", { header: "Who" }),
        col.accessor("action", { header: "Action" }),
        col.accessor((e) => `${e.target_type} ${e.target_id}`, { id: "target", header: "Target" }),
        col.accessor("data", { header: "Details", enableSorting: false, cell: (x) => <code>{JSON.stringify(x.getValue())}</code> }),
      ]} />
      <nav aria-label="Pages" className="pager">
        <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>Previous</button>
        <span>Page {page + 1} of {pages}</span>
        <button type="button" disabled={page + 1 >= pages} onClick={() => setPage(page + 1)}>Next</button>
      </nav>
    </>
  );
}
