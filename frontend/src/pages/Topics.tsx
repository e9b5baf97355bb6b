// Topics: the list is paginated, sorted and searched by the server (limit/offset, ordering, name), so it
// stays fast with thousands of topics; the query is kept in the URL so a reload or a link shows the same page.
import { zodResolver } from "@hookform/resolvers/zod";
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper, type SortingState } from "@tanstack/react-table";
import { useEffect, useState } from "react";
import { useForm } from "react-hook-form";
import { Link, useParams, useSearchParams } from "react-router";
import { z } from "zod";
import { api, type Schemas, unwrap } from "../api/client";
import { API_DEFAULTS } from "../api/defaults";
import { DataTable, ErrorText, ReadyBadge, when } from "../components/ui";
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
  const count = topics.data?.count ?? 0;
  const pages = Math.max(1, Math.ceil(count / PAGE));
  const columns = [
    col.accessor("name", { header: "Name", cell: (c) => <Link to={`/t/${slug}/clusters/${cluster}/topics/${encodeURIComponent(c.getValue())}`}>{c.getValue()}</Link> }),
    col.accessor("partitions", { header: "Partitions" }),
    col.accessor("replication_factor", { header: "Replication", enableSorting: false }),
    col.accessor("status", { header: "Status", enableSorting: false, cell: (c) => <ReadyBadge status={c.getValue()} /> }),
    col.accessor("created_at", { header: "Created", cell: (c) => when(c.getValue()) }),
  ];
  return (
    <>
      <h1>Topics</h1>
      {can("member") && <CreateTopic slug={slug} cluster={cluster} />}
      <div className="toolbar">
        <label>
          Search topics <input type="search" value={typed} onChange={(e) => setTyped(e.target.value)} placeholder="name contains…" />
        </label>
        <span data-testid="topic-count">{count.toLocaleString()} topics</span>
      </div>
      <ErrorText error={topics.error} />
      <DataTable caption="Topics" data={topics.data?.results ?? []} columns={columns} sorting={sorting} empty={topics.isPending ? "Loading topics…" : "No topics."}
        onSortingChange={(update) => {
          const next = typeof update === "function" ? update(sorting) : update;
          const first = next[0] ?? { id: "name", desc: false };
          setParams((p) => { p.set("ordering", `${first.desc ? "-" : ""}${first.id}`); p.delete("page"); return p; });
        }} />
      <nav aria-label="Pages" className="pager">
        <button type="button" disabled={page === 0} onClick={() => setParams((p) => { p.set("page", String(page - 1)); return p; })}>Previous</button>
        <span>Page {page + 1} of {pages}</span>
        <button type="button" disabled={page + 1 >= pages} onClick={() => setParams((p) => { p.set("page", String(page + 1)); return p; })}>Next</button>
      </nav>
    </>
  );
}

const createSchema = z.object({
  name: z.string().trim().min(1, "Name the topic.").max(249, "At most 249 characters.")
    .regex(/^[a-zA-Z0-9._-]+$/, "Letters, digits, '.', '_' and '-' only."),
  partitions: z.coerce.number().int().min(1, "At least one partition."),
  retention: z.string().regex(/^(|-1|\d+)$/, "Milliseconds, or -1 for unlimited."),
  cleanup: z.enum(["delete", "compact"]),
});

export function CreateTopic({ slug, cluster }: { slug: string; cluster: string }) {
  const queryClient = useQueryClient();
  const { register, handleSubmit, formState, reset } = useForm<z.input<typeof createSchema>>({
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
    onSuccess: () => {
      reset();
      queryClient.invalidateQueries({ queryKey: ["topics", slug, cluster] });
    },
  });
  const errors = formState.errors;
  return (
    <form className="inline-form" aria-label="Create a topic" noValidate onSubmit={handleSubmit((f) => create.mutate(f as z.output<typeof createSchema>))}>
      <h2>Create a topic</h2>
      <label>Name <input {...register("name")} aria-invalid={!!errors.name} /></label>
      <label>Partitions <input type="number" min={1} {...register("partitions")} /></label>
      <label>Retention (ms) <input placeholder="cluster default" {...register("retention")} /></label>
      <label>
        Cleanup{" "}
        <select aria-label="Cleanup" {...register("cleanup")}>
          <option value="delete">delete</option>
          <option value="compact">compact</option>
        </select>
      </label>
      <button type="submit" disabled={create.isPending}>Create topic</button>
      <ErrorText error={errors.name?.message ?? errors.partitions?.message ?? errors.retention?.message} />
      <ErrorText error={create.error} />
    </form>
  );
}
