// Topics: the list is paginated, sorted and searched by the server (limit/offset, ordering, name), so it
// stays fast with thousands of topics; the query is kept in the URL so a reload or a link shows the same page.
import { zodResolver } from "@hookform/resolvers/zod";
import { Anchor, Button, Group, NativeSelect, Stack, Text, TextInput } from "@mantine/core";
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper, type SortingState } from "@tanstack/react-table";
import { useEffect, useState } from "react";
import { useForm } from "react-hook-form";
import { Link, useParams, useSearchParams } from "react-router";
import { z } from "zod";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { Badge, DataTable, ErrorText, FormDrawer, PageHeader, Pager, ReadyBadge, toast, when } from "../components/ui";
import { num } from "../lib/extra";
import { bytes, count, duration, plural, rate } from "../lib/units";
import { useTenant } from "../session";

const PAGE = 50;
const col = createColumnHelper<Schemas["Topic"]>();

export function TopicsPage() {
  const { slug, can } = useTenant();
  const { cluster = "" } = useParams();
  const [params, setParams] = useSearchParams();
  const page = Math.max(0, Number(params.get("page") ?? 0) || 0);
  const ordering = params.get("ordering") ?? "name";
  const search = params.get("q") ?? "";
  const [typed, setTyped] = useState(search);
  useEffect(() => {
    const timer = setTimeout(() => {
      if (typed !== search) setParams((p) => { p.set("q", typed); p.delete("page"); return p; }, { replace: true });
    }, 250);
    return () => clearTimeout(timer);
  }, [typed, search, setParams]);
  const topics = useQuery({
    queryKey: ["topics", slug, cluster, page, ordering, search],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster }, query: { limit: PAGE, offset: page * PAGE, ordering, ...(search ? { name: search } : {}) } },
    })),
    placeholderData: keepPreviousData,
  });
  const sorting: SortingState = [{ id: ordering.replace(/^-/, ""), desc: ordering.startsWith("-") }];
  const total = topics.data?.count ?? 0;
  const pages = Math.max(1, Math.ceil(total / PAGE));
  const [creating, setCreating] = useState(false);
  const columns = [
    col.accessor("name", { header: "Name", cell: (c) => <Anchor component={Link} to={`/t/${slug}/clusters/${cluster}/topics/${encodeURIComponent(c.getValue())}`}>{c.getValue()}</Anchor> }),
    col.accessor("partitions", { header: "Partitions", cell: (c) => count(c.getValue()) }),
    col.accessor("replication_factor", { header: "Replication", enableSorting: false }),
    col.display({ id: "size", header: "Size", cell: (c) => <TopicSize topic={c.row.original} /> }),
    col.display({ id: "records", header: "Records", cell: (c) => count(num(c.row.original, "record_count"), { short: true }) }),
    col.display({ id: "rate", header: "In", cell: (c) => rate(num(c.row.original, "records_in_per_sec")) }),
    col.display({ id: "urp", header: "Under-replicated", cell: (c) => <UnderReplicated topic={c.row.original} /> }),
    col.accessor("status", { header: "Status", enableSorting: false, cell: (c) => <ReadyBadge status={c.getValue()} /> }),
    col.accessor("created_at", { header: "Created", cell: (c) => when(c.getValue()) }),
  ];
  return (
    <>
      <PageHeader title="Topics" description="Partitions, size, traffic and replication health of each topic; sorted and searched by the server."
        actions={can("member") && <Button onClick={() => setCreating(true)}>New topic</Button>} />
      <Group justify="space-between" align="flex-end" mb="xs" wrap="wrap">
        <TextInput label="Search topics" type="search" value={typed} onChange={(e) => setTyped(e.currentTarget.value)} placeholder="name contains…" w={280} />
        <Text size="sm" data-testid="topic-count">{plural(total, "topic")}</Text>
      </Group>
      <ErrorText error={topics.error} />
      <DataTable caption="Topics" data={topics.data?.results} columns={columns} sorting={sorting} loading={topics.isPending} rowId={(t) => t.name}
        empty={search ? `No topic name contains "${search}".` : "No topics yet."}
        onSortingChange={(update) => {
          const next = typeof update === "function" ? update(sorting) : update;
          const first = next[0] ?? { id: "name", desc: false };
          setParams((p) => { p.set("ordering", `${first.desc ? "-" : ""}${first.id}`); p.delete("page"); return p; });
        }} />
      <Pager page={page} pages={pages} onPage={(next) => setParams((p) => { p.set("page", String(next)); return p; })} />
      {can("member") && (
        <FormDrawer opened={creating} onClose={() => setCreating(false)} title="Create a topic">
          <CreateTopic slug={slug} cluster={cluster} onDone={() => setCreating(false)} />
        </FormDrawer>
      )}
    </>
  );
}

/** Under-replicated (and offline) partitions: a count that is 0 when healthy, a badge when not. */
/** Bytes on the brokers' disks; a tiered topic's remote-tier bytes on a second line. */
function TopicSize({ topic }: { topic: Schemas["Topic"] }) {
  const remote = num(topic, "remote_size_bytes");
  if (remote == null) return <>{bytes(num(topic, "size_bytes"))}</>;
  return (
    <Stack gap={0}>
      <span>{bytes(num(topic, "size_bytes"))}</span>
      <Text size="xs" className="muted">{`+ ${bytes(remote)} tiered`}</Text>
    </Stack>
  );
}

function UnderReplicated({ topic }: { topic: Schemas["Topic"] }) {
  const under = num(topic, "under_replicated_partitions");
  const offline = num(topic, "offline_partitions");
  if (offline) return <Badge tone="bad">{plural(offline, "offline")}</Badge>;
  if (under) return <Badge tone="warn">{count(under)}</Badge>;
  return <>{count(under)}</>;
}

const createSchema = z.object({
  name: z.string().trim().min(1, "Name the topic.").max(249, "At most 249 characters.")
    .regex(/^[a-zA-Z0-9._-]+$/, "Letters, digits, '.', '_' and '-' only."),
  partitions: z.coerce.number().int().min(1, "At least one partition."),
  retention: z.string().regex(/^(|-1|\d+)$/, "Milliseconds, or -1 for unlimited."),
  cleanup: z.enum(["delete", "compact"]),
});

export function CreateTopic({ slug, cluster, onDone }: { slug: string; cluster: string; onDone?: () => void }) {
  const queryClient = useQueryClient();
  const { register, handleSubmit, formState, reset, watch } = useForm<z.input<typeof createSchema>>({
    resolver: zodResolver(createSchema), defaultValues: { partitions: API_DEFAULTS.topic.partitions, retention: "", cleanup: "delete" },
  });
  const create = useMutation({
    mutationFn: (form: z.output<typeof createSchema>) => {
      const configs: Record<string, string> = { "cleanup.policy": form.cleanup };
      if (form.retention) configs["retention.ms"] = form.retention;
      return unwrap(api.POST("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/", {
        params: { path: { tenant_slug: slug, cluster_pk: cluster } }, body: { name: form.name, partitions: form.partitions, configs },
      }));
    },
    onSuccess: (topic) => {
      reset();
      toast.ok(`Topic ${topic.name} created.`);
      queryClient.invalidateQueries({ queryKey: ["topics", slug, cluster] });
      onDone?.();
    },
  });
  const errors = formState.errors;
  const retention = watch("retention");
  return (
    <form aria-label="Create a topic" noValidate onSubmit={handleSubmit((f) => create.mutate(f as z.output<typeof createSchema>))}>
      <Stack>
        <TextInput label="Name" {...register("name")} error={errors.name?.message} errorProps={{ role: "alert" }} data-autofocus />
        <TextInput label="Partitions" type="number" min={1} {...register("partitions")} error={errors.partitions?.message} errorProps={{ role: "alert" }} />
        <TextInput label="Retention (ms)" placeholder="cluster default" {...register("retention")} error={errors.retention?.message} errorProps={{ role: "alert" }}
          description={/^\d+$/.test(retention ?? "") ? `= ${duration(Number(retention))}` : retention === "-1" ? "unlimited" : "empty: the cluster's default"} />
        <NativeSelect label="Cleanup" {...register("cleanup")} data={[{ value: "delete", label: "delete (by age and size)" }, { value: "compact", label: "compact (last value per key)" }]} />
        <ErrorText error={create.error} />
        <Group justify="flex-end"><Button type="submit" loading={create.isPending}>Create topic</Button></Group>
      </Stack>
    </form>
  );
}
