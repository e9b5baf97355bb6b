// Clusters: the tenant's list with what operators look at first (readiness, brokers up, throughput, storage),
// a create form in a drawer, and the frame of every page inside one cluster.
import { zodResolver } from "@hookform/resolvers/zod";
import { Anchor, Button, Group, NativeSelect, Stack, TextInput } from "@mantine/core";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { useForm } from "react-hook-form";
import { Link, Outlet, useParams } from "react-router";
import { z } from "zod";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { DataTable, ErrorText, FormDrawer, PageHeader, ReadyBadge, toast, when } from "../components/ui";
import { num } from "../lib/extra";
import { byteRate, bytes, MISSING } from "../lib/units";
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
    enabled: !!slug,
  });
}

/** "2 / 3" brokers up, or the spec's count while the first reconcile has not reported. */
export function brokersText(c: Cluster): string {
  const up = num(c, "brokers_up");
  const total = num(c, "brokers_total") ?? (c.spec as { broker_count?: number })?.broker_count;
  if (up == null) return total == null ? MISSING : `${MISSING} / ${total}`;
  return `${up} / ${total ?? MISSING}`;
}

export function ClustersPage() {
  const { slug, can } = useTenant();
  const clusters = useClusters(slug);
  const [creating, setCreating] = useState(false);
  const columns = [
    col.accessor("name", { header: "Name", cell: (c) => <Anchor component={Link} to={`/t/${slug}/clusters/${c.row.original.id}`}>{c.getValue()}</Anchor> }),
    col.accessor("status", { header: "Status", enableSorting: false, cell: (c) => <ReadyBadge status={c.getValue()} /> }),
    col.accessor("plan", { header: "Plan", cell: (c) => c.getValue().replace(/^./, (x) => x.toUpperCase()) }),
    col.accessor((c) => num(c, "brokers_up") ?? -1, { id: "brokers", header: "Brokers up", cell: (c) => brokersText(c.row.original) }),
    col.accessor((c) => num(c, "bytes_in_per_sec") ?? -1, { id: "in", header: "In", cell: (c) => byteRate(num(c.row.original, "bytes_in_per_sec")) }),
    col.accessor((c) => num(c, "bytes_out_per_sec") ?? -1, { id: "out", header: "Out", cell: (c) => byteRate(num(c.row.original, "bytes_out_per_sec")) }),
    col.accessor((c) => num(c, "storage_bytes") ?? -1, { id: "storage", header: "Storage", cell: (c) => bytes(num(c.row.original, "storage_bytes")) }),
    col.accessor((c) => (c.status as { bootstrap_servers?: string })?.bootstrap_servers ?? MISSING, { id: "bootstrap", header: "Bootstrap", cell: (c) => <code>{c.getValue()}</code> }),
    col.accessor("created_at", { header: "Created", cell: (c) => when(c.getValue()) }),
  ];
  return (
    <>
      <PageHeader title="Clusters" description="Kafka-compatible clusters of this tenant."
        actions={can("admin") && <Button onClick={() => setCreating(true)}>New cluster</Button>} />
      <ErrorText error={clusters.error} />
      <DataTable caption="Clusters" data={clusters.data?.results} columns={columns} loading={clusters.isPending} rowId={(c) => c.id}
        empty={can("admin") ? "No clusters yet: create one with New cluster." : "No clusters yet."} />
      {can("admin") && (
        <FormDrawer opened={creating} onClose={() => setCreating(false)} title="Create a cluster">
          <CreateCluster slug={slug} onDone={() => setCreating(false)} />
        </FormDrawer>
      )}
    </>
  );
}

export function CreateCluster({ slug, onDone }: { slug: string; onDone?: () => void }) {
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
    onSuccess: (cluster) => {
      reset();
      toast.ok(`Cluster ${cluster.name} is being created.`);
      queryClient.invalidateQueries({ queryKey: ["clusters", slug] });
      onDone?.();
    },
  });
  const errors = formState.errors;
  return (
    <form aria-label="Create a cluster" onSubmit={handleSubmit((f) => create.mutate(f as z.output<typeof createSchema>))} noValidate>
      <Stack>
        <TextInput label="Name" {...register("name")} error={errors.name?.message} errorProps={{ role: "alert" }} data-autofocus />
        <NativeSelect label="Plan" {...register("plan")} data={[
          { value: "basic", label: "Basic (1 broker)" }, { value: "standard", label: "Standard (3 brokers)" }, { value: "dedicated", label: "Dedicated (3–12 brokers)" },
        ]} />
        <TextInput label="Brokers" type="number" min={1} placeholder="plan default" {...register("broker_count")}
          error={errors.broker_count?.message} errorProps={{ role: "alert" }} />
        <ErrorText error={create.error} />
        <Group justify="flex-end"><Button type="submit" loading={create.isPending}>Create cluster</Button></Group>
      </Stack>
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

/** The frame of every page inside one cluster (the sidebar holds its navigation); a load failure says so here. */
export function ClusterFrame() {
  const { slug } = useTenant();
  const { cluster: id = "" } = useParams();
  const cluster = useCluster(slug, id);
  return (
    <>
      <ErrorText error={cluster.error} />
      <Outlet />
    </>
  );
}
