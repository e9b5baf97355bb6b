import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useParams } from "react-router";
import { api, type Schemas, unwrap } from "../api/client";
import { Badge, ConfirmButton, DataTable, ErrorText, PageHeader } from "../components/ui";
import { useTenant } from "../session";

const col = createColumnHelper<Schemas["Transaction"]>();

/** "3 min 20 s": how long a transaction has been open. */
export function age(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** The cluster's open transactions (Kafka's ListTransactions + DescribeTransactions); admins can abort one. */
export function TransactionsPage() {
  const { slug, can } = useTenant();
  const { cluster = "" } = useParams();
  const queryClient = useQueryClient();
  const key = ["transactions", slug, cluster];
  const found = useQuery({
    queryKey: key,
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/transactions/", { params: { path: { tenant_slug: slug, id: cluster } } })),
    refetchInterval: 5000,
  });
  const abort = useMutation({
    mutationFn: (transactional_id: string) => unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{id}/transactions/{transactional_id}/abort/", {
      params: { path: { tenant_slug: slug, id: cluster, transactional_id } },
    })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: key }),
  });
  return (
    <>
      <PageHeader title="Transactions" description="Open transactions of transactional producers. A transaction open longer than its timeout is aborted by the cluster; aborting one here fences its producer, as a new instance of it would." />
      <ErrorText error={found.error ?? abort.error} />
      {(
        <DataTable caption="Open transactions" data={found.data} loading={found.isPending} rowId={(t) => t.transactional_id} empty="No open transactions." columns={[
          col.accessor("transactional_id", { header: "Transactional id" }),
          col.accessor("state", { header: "State", cell: (x) => <Badge tone={x.getValue() === "Ongoing" ? "info" : "neutral"}>{x.getValue()}</Badge> }),
          col.accessor("partitions", { header: "Partitions", enableSorting: false,
            cell: (x) => x.getValue().map((p: Schemas["TransactionPartition"]) => `${p.topic}-${p.partition}`).join(", ") }),
          col.accessor("age_ms", { header: "Open for", cell: (x) => age(x.getValue()) }),
          col.accessor("timeout_ms", { header: "Timeout", cell: (x) => age(x.getValue()) }),
          col.accessor("producer_id", { header: "Producer", cell: (x) => `${x.getValue()} (epoch ${x.row.original.producer_epoch})` }),
          col.display({ id: "actions", header: "Actions", cell: (x) => can("admin") && x.row.original.state === "Ongoing" ? (
            <ConfirmButton label="Abort" question={`Abort ${x.row.original.transactional_id}'s transaction and fence its producer?`}
              onConfirm={() => abort.mutate(x.row.original.transactional_id)} />
          ) : null }),
        ]} />
      )}
    </>
  );
}
