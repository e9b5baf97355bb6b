import { zodResolver } from "@hookform/resolvers/zod";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useForm } from "react-hook-form";
import { Link, NavLink, Outlet, useParams } from "react-router";
import { z } from "zod";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { DataTable, ErrorText, Loading, ReadyBadge, when } from "../components/ui";
import { useTenant } from "../session";

type Cluster = Schemas["Cluster"];
const col = createColumnHelper<Cluster>();

const createSchema = z.object({
  name: z.string().trim().min(1, "Name the cluster.").max(64, "At most 64 characters.")
    .regex(/^[a-z0-9][a-z0-9-]*$/, "Lower-case letters, digits and dashes, starting with a letter or digit."),
  plan: z.enum(["basic", "standard", "dedicated"]),
  broker_count: z.union([z.literal(""), z.coerce.number().int().min(1, "At least one broker.")]),
});
type CreateForm = z.input<typeof createSchema>;

export function useClusters(slug: string) {
  return useQuery({
    queryKey: ["clusters", slug],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/", { params: { path: { tenant_slug: slug }, query: { limit: 200 } } })),
    refetchInterval: 5000,
  });
}

export function ClustersPage() {
  const { slug, can } = useTenant();
  const clusters = useClusters(slug);
  const columns = [
    col.accessor("name", { header: "Name", cell: (c) => <Link to={`/t/${slug}/clusters/${c.row.original.id}`}>{c.getValue()}</Link> }),
    col.accessor("plan", { header: "Plan" }),
    col.accessor("status", { header: "Status", enableSorting: false, cell: (c) => <ReadyBadge status={c.getValue()} /> }),
    col.accessor("kafka_cluster_id", { header: "Kafka cluster id" }),
    col.accessor((c) => (c.status as { bootstrap_servers?: string })?.bootstrap_servers ?? "—", { id: "bootstrap", header: "Bootstrap" }),
    col.accessor("created_at", { header: "Created", cell: (c) => when(c.getValue()) }),
  ];
  return (
    <>
      <h1>Clusters</h1>
      {can("admin") && <CreateCluster slug={slug} />}
      {clusters.isPending ? <Loading what="clusters" /> : <ErrorText error={clusters.error} />}
      {clusters.data && <DataTable caption="Clusters" data={clusters.data.results} columns={columns} empty="No clusters yet." />}
    </>
  );
}

function CreateCluster({ slug }: { slug: string }) {
  const queryClient = useQueryClient();
  const { register, handleSubmit, formState, reset } = useForm<CreateForm>({
    resolver: zodResolver(createSchema), defaultValues: { plan: API_DEFAULTS.cluster.plan, broker_count: "" },
  });
  const create = useMutation({
    mutationFn: (form: z.output<typeof createSchema>) =>
      unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/", {
        params: { path: { tenant_slug: slug } },
        body: { name: form.name, plan: form.plan, broker_count: form.broker_count === "" ? null : form.broker_count },
      })),
    onSuccess: () => {
      reset();
      queryClient.invalidateQueries({ queryKey: ["clusters", slug] });
    },
  });
  return (
    <form className="inline-form" aria-label="Create a cluster" onSubmit={handleSubmit((f) => create.mutate(f as z.output<typeof createSchema>))} noValidate>
      <h2>Create a cluster</h2>
      <label>
        Name <input {...register("name")} aria-invalid={!!formState.errors.name} />
      </label>
      <label>
        Plan{" "}
        <select aria-label="Plan" {...register("plan")}>
          <option value="basic">Basic (1 broker)</option>
          <option value="standard">Standard (3 brokers)</option>
          <option value="dedicated">Dedicated</option>
        </select>
      </label>
      <label>
        Brokers <input type="number" min={1} placeholder="plan default" {...register("broker_count")} />
      </label>
      <button type="submit" disabled={create.isPending}>Create cluster</button>
      <ErrorText error={formState.errors.name?.message ?? formState.errors.broker_count?.message} />
      <ErrorText error={create.error} />
    </form>
  );
}

export function useCluster(slug: string, id: string) {
  return useQuery({
    queryKey: ["cluster", slug, id],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{id}/", { params: { path: { tenant_slug: slug, id } } })),
    refetchInterval: 3000,
  });
}

/** The frame of every page inside one cluster: its name, readiness and sub-navigation. */
export function ClusterFrame() {
  const { slug } = useTenant();
  const { cluster: id = "" } = useParams();
  const cluster = useCluster(slug, id);
  const base = `/t/${slug}/clusters/${id}`;
  return (
    <>
      <p className="crumbs">
        <Link to={`/t/${slug}/clusters`}>Clusters</Link> / <strong>{cluster.data?.name ?? id}</strong>{" "}
        {cluster.data && <ReadyBadge status={cluster.data.status} />}
      </p>
      <ErrorText error={cluster.error} />
      <nav aria-label="Cluster" className="tabs">
        <NavLink end to={base}>Overview</NavLink>
        <NavLink to={`${base}/topics`}>Topics</NavLink>
        <NavLink to={`${base}/consumer-groups`}>Consumer groups</NavLink>
        <NavLink to={`${base}/transactions`}>Transactions</NavLink>
        <NavLink to={`${base}/acls`}>ACLs</NavLink>
        <NavLink to={`${base}/schemas`}>Schemas</NavLink>
        <NavLink to={`${base}/reports`}>Reports</NavLink>
      </nav>
      <Outlet />
    </>
  );
}
