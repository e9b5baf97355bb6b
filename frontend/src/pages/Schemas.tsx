// The cluster's Schema Registry: the subjects (type, latest version and id, compatibility), one subject's versions
// with a diff between any two, its compatibility level, registering a version or testing a draft, deleting (soft,
// then permanently, as the registry requires) and the topics the subject belongs to. Loaded lazily (App.tsx).
import { Anchor, Breadcrumbs, Button, Group, NativeSelect, Stack, Table, Text, Textarea, TextInput, Title } from "@mantine/core";
import { useMutation, useQueries, useQuery, useQueryClient } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, unwrap } from "../api/client";
import { type Level, LEVELS, registry, type SchemaType, subjectLevel, subjectPath, type SubjectVersion } from "../api/registry";
import { Badge, ConfirmButton, DataTable, ErrorText, Loading, PageHeader } from "../components/ui";
import { diffStats, layout, lineDiff } from "../lib/diff";
import { type Draft, draftBody, draftProblem, topicOfSubject, typeOf, type Verdict, verdictOf } from "../lib/schemaForm";
import { useTenant } from "../session";
import { useCluster } from "./Clusters";

const READ_ONLY = "Your role (viewer) can read schemas only.";

function useKafkaId(): { slug: string; cluster: string; kafkaId: string | undefined } {
  const { slug } = useTenant();
  const { cluster = "" } = useParams();
  return { slug, cluster, kafkaId: useCluster(slug, cluster).data?.kafka_cluster_id };
}

interface SubjectRow {
  subject: string;
  latest?: SubjectVersion;
  level?: { level: Level; inherited: boolean };
}
const col = createColumnHelper<SubjectRow>();

export function SchemasPage() {
  const { slug, cluster, kafkaId } = useKafkaId();
  const { can } = useTenant();
  const subjects = useQuery({
    queryKey: ["registry", kafkaId, "subjects"],
    queryFn: () => registry<string[]>(kafkaId!, "GET", "/subjects"),
    enabled: !!kafkaId,
  });
  const names = subjects.data ?? [];
  const latest = useQueries({
    queries: names.map((subject) => ({
      queryKey: ["registry", kafkaId, "subject", subject, "latest"],
      queryFn: () => registry<SubjectVersion>(kafkaId!, "GET", `${subjectPath(subject)}/versions/latest`),
    })),
  });
  const levels = useQueries({
    queries: names.map((subject) => ({
      queryKey: ["registry", kafkaId, "subject", subject, "level"],
      queryFn: () => subjectLevel(kafkaId!, subject),
    })),
  });
  const rows: SubjectRow[] = names.map((subject, i) => ({ subject, latest: latest[i]?.data, level: levels[i]?.data }));
  const base = `/t/${slug}/clusters/${cluster}/schemas`;
  const columns = [
    col.accessor("subject", { header: "Subject", cell: (c) => <Anchor component={Link} to={`${base}/${encodeURIComponent(c.getValue())}`}>{c.getValue()}</Anchor> }),
    col.accessor((r) => (r.latest ? typeOf(r.latest) : ""), { id: "type", header: "Type" }),
    col.accessor((r) => r.latest?.version ?? 0, { id: "version", header: "Latest version", cell: (c) => c.getValue() || "…" }),
    col.accessor((r) => r.latest?.id ?? 0, { id: "id", header: "Schema id", cell: (c) => c.getValue() || "…" }),
    col.accessor((r) => r.level?.level ?? "", {
      id: "compatibility", header: "Compatibility",
      cell: (c) => c.row.original.level ? <><span>{c.getValue()}</span>{c.row.original.level.inherited && <span className="muted"> (registry default)</span>}</> : "…",
    }),
  ];
  return (
    <>
      <PageHeader title="Schemas" description={<>The cluster's Schema Registry. Clients reach it at <code>{window.location.origin}/schema-registry/{kafkaId ?? "…"}</code> with an API key.</>} />
      {kafkaId && (can("member") ? <NewSubject kafkaId={kafkaId} base={base} /> : <p className="muted" role="note">{READ_ONLY}</p>)}
      <ErrorText error={subjects.error} />
      <DataTable caption="Subjects" data={rows} columns={columns} rowId={(r) => r.subject}
        empty={!kafkaId || subjects.isPending ? "Loading subjects…" : "No schemas yet. Register one here, or let a producer's serializer register it."} />
    </>
  );
}

function NewSubject({ kafkaId, base }: { kafkaId: string; base: string }) {
  const navigate = useNavigate();
  const [subject, setSubject] = useState("");
  return (
    <form aria-label="New subject" onSubmit={(e) => {
      e.preventDefault();
      if (subject.trim()) navigate(`${base}/${encodeURIComponent(subject.trim())}?new=1`);
    }}>
      <Group align="flex-end" gap="xs" mb="sm">
        <TextInput label="New subject" value={subject} onChange={(e) => setSubject(e.currentTarget.value)} placeholder="orders-value" />
        <Button type="submit" variant="default" disabled={!subject.trim() || !kafkaId}>Open</Button>
      </Group>
    </form>
  );
}

export function SubjectPage() {
  const { slug, cluster, kafkaId } = useKafkaId();
  const { subject = "" } = useParams();
  const base = `/t/${slug}/clusters/${cluster}/schemas`;
  return (
    <>
      <Breadcrumbs mb="xs"><Anchor component={Link} to={base} size="sm">Schemas</Anchor><Text size="sm">{subject}</Text></Breadcrumbs>
      <PageHeader title={subject} />
      {!kafkaId ? <Loading what="the cluster" /> : <Subject kafkaId={kafkaId} subject={subject} base={base} />}
    </>
  );
}

function Subject({ kafkaId, subject, base }: { kafkaId: string; subject: string; base: string }) {
  const { can } = useTenant();
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const path = subjectPath(subject);
  const key = ["registry", kafkaId, "subject", subject];
  // Every version, soft-deleted ones too (they can be deleted permanently, or looked at).
  const versions = useQuery({
    queryKey: [...key, "versions"],
    queryFn: async () => {
      const all = await registry<number[]>(kafkaId, "GET", `${path}/versions?deleted=true`).catch((error) => {
        if ((error as { code?: string }).code === "40401") return [] as number[];
        throw error;
      });
      const live = new Set(all.length ? await registry<number[]>(kafkaId, "GET", `${path}/versions`).catch(() => [] as number[]) : []);
      const bodies = await Promise.all(all.map((v) => registry<SubjectVersion>(kafkaId, "GET", `${path}/versions/${v}?deleted=true`)));
      return bodies.map((b) => ({ ...b, deleted: !live.has(b.version) }));
    },
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey: ["registry", kafkaId] });
  const remove = useMutation({
    mutationFn: ({ version, permanent }: { version?: number; permanent: boolean }) =>
      registry(kafkaId, "DELETE", `${path}${version === undefined ? "" : `/versions/${version}`}${permanent ? "?permanent=true" : ""}`),
    onSuccess: refresh,
  });
  const rows = versions.data ?? [];
  const live = rows.filter((r) => !r.deleted);
  if (versions.isPending) return <Loading what="the versions" />;
  return (
    <>
      <ErrorText error={versions.error} />
      {rows.length === 0 && <p className="muted">This subject has no versions yet.</p>}
      <UsedBy subject={subject} />
      {rows.length > 0 && <Compatibility kafkaId={kafkaId} subject={subject} />}
      {rows.length > 0 && (
        <section aria-label="Versions">
          <Title order={2} size="h3" mt="lg" mb="xs">Versions</Title>
          <div className="table-wrap">
          <Table striped className="data-table">
            <Table.Caption className="sr-only">Versions</Table.Caption>
            <Table.Thead><Table.Tr><Table.Th scope="col">Version</Table.Th><Table.Th scope="col">Schema id</Table.Th><Table.Th scope="col">Type</Table.Th><Table.Th scope="col">State</Table.Th><Table.Th scope="col">Actions</Table.Th></Table.Tr></Table.Thead>
            <Table.Tbody>
              {rows.map((r) => (
                <Table.Tr key={r.version} data-testid="version">
                  <Table.Td>{r.version}</Table.Td>
                  <Table.Td>{r.id}</Table.Td>
                  <Table.Td>{typeOf(r)}</Table.Td>
                  <Table.Td>{r.deleted ? <Badge tone="warn">Soft-deleted</Badge> : <Badge tone="ok">Live</Badge>}</Table.Td>
                  <Table.Td>
                    {!r.deleted && (can("member")
                      ? <ConfirmButton label={`Delete version ${r.version}`} question={`Soft-delete version ${r.version}? Clients reading by id still can.`} onConfirm={() => remove.mutate({ version: r.version, permanent: false })} />
                      : <Button size="xs" color="red" variant="light" disabled title={READ_ONLY}>Delete version {r.version}</Button>)}
                    {r.deleted && (can("admin")
                      ? <ConfirmButton label={`Delete version ${r.version} permanently`} question={`Delete version ${r.version} for good? Its schema id may stop resolving.`} onConfirm={() => remove.mutate({ version: r.version, permanent: true })} />
                      : <span className="muted">Only an admin deletes permanently.</span>)}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          </div>
          <Group my="sm">
            {live.length > 0 && can("member") && (
              <ConfirmButton label="Delete subject" question={`Soft-delete every version of ${subject}?`} onConfirm={() => remove.mutate({ permanent: false })} />
            )}
            {live.length === 0 && can("admin") && (
              <ConfirmButton label="Delete subject permanently" question={`Delete ${subject} and all its versions for good?`} typeToConfirm={subject}
                onConfirm={() => remove.mutate({ permanent: true }, { onSuccess: () => navigate(base) })} />
            )}
          </Group>
          <ErrorText error={remove.error} />
          {rows.length > 1 && <VersionDiff versions={rows} />}
          {rows.length === 1 && <><Title order={3} size="h4">Schema</Title><pre data-testid="schema-text">{layout(rows[0].schema)}</pre></>}
        </section>
      )}
      <Register kafkaId={kafkaId} subject={subject} latest={live[live.length - 1]} onRegistered={refresh} />
    </>
  );
}

function UsedBy({ subject }: { subject: string }) {
  const { slug } = useTenant();
  const { cluster = "" } = useParams();
  const named = topicOfSubject(subject);
  const topics = useQuery({
    queryKey: ["topics", slug, cluster, "exact", named?.topic],
    queryFn: () => unwrap(api.GET("/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/", {
      params: { path: { tenant_slug: slug, cluster_pk: cluster }, query: { name: named!.topic, limit: 50 } },
    })),
    enabled: !!named,
  });
  if (!named) return <p className="muted" data-testid="used-by">Not named after a topic (TopicNameStrategy uses <code>&lt;topic&gt;-key</code> and <code>&lt;topic&gt;-value</code>).</p>;
  const found = topics.data?.results.find((t) => t.name === named.topic);
  return (
    <p data-testid="used-by">
      Used by:{" "}
      {topics.isPending ? "…" : found
        ? <><Link to={`/t/${slug}/clusters/${cluster}/topics/${encodeURIComponent(found.name)}`}>{found.name}</Link> ({named.part}s)</>
        : <span className="muted">no topic named {named.topic} exists.</span>}
    </p>
  );
}

function Compatibility({ kafkaId, subject }: { kafkaId: string; subject: string }) {
  const { can } = useTenant();
  const queryClient = useQueryClient();
  const key = ["registry", kafkaId, "subject", subject, "level"];
  const level = useQuery({ queryKey: key, queryFn: () => subjectLevel(kafkaId, subject) });
  const [chosen, setChosen] = useState<Level | "">("");
  const change = useMutation({
    mutationFn: (next: Level) => registry(kafkaId, "PUT", `/config/${encodeURIComponent(subject)}`, { compatibility: next }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: key }),
  });
  const current = level.data?.level;
  return (
    <section aria-label="Compatibility">
      <Title order={2} size="h3" mt="lg" mb="xs">Compatibility</Title>
      <ErrorText error={level.error} />
      <p>
        Level: <strong data-testid="compatibility">{current ?? "…"}</strong>
        {level.data?.inherited && <span className="muted"> (the registry's default; not set for this subject)</span>}
      </p>
      {can("admin") ? (
        <form onSubmit={(e) => { e.preventDefault(); if (chosen) change.mutate(chosen); }}>
          <Group align="flex-end" gap="xs">
            <NativeSelect label="Set to" aria-label="Compatibility level" value={chosen || current || ""} onChange={(e) => setChosen(e.currentTarget.value as Level)} data={[...LEVELS]} />
            <Button type="submit" variant="default" disabled={!chosen || chosen === current || change.isPending}>Change compatibility</Button>
          </Group>
          <ErrorText error={change.error} />
        </form>
      ) : <p className="muted" role="note">Only an admin changes the compatibility level.</p>}
    </section>
  );
}

function VersionDiff({ versions }: { versions: SubjectVersion[] }) {
  const [from, setFrom] = useState(versions[versions.length - 2].version);
  const [to, setTo] = useState(versions[versions.length - 1].version);
  const a = versions.find((v) => v.version === from) ?? versions[0];
  const b = versions.find((v) => v.version === to) ?? versions[versions.length - 1];
  const lines = lineDiff(layout(a.schema), layout(b.schema));
  const { added, removed } = diffStats(lines);
  const pick = (label: string, value: number, set: (v: number) => void) => (
    <NativeSelect size="xs" label={label} aria-label={`Diff ${label.toLowerCase()}`} value={String(value)} onChange={(e) => set(Number(e.currentTarget.value))}
      data={versions.map((v) => String(v.version))} />
  );
  return (
    <section aria-label="Diff">
      <Title order={3} size="h4" mt="md">Diff</Title>
      <Group align="flex-end" gap="sm" mb="xs">{pick("From", from, setFrom)}{pick("To", to, setTo)}
        <Text size="sm" className="muted" data-testid="diff-stats">{added} added, {removed} removed</Text></Group>
      <pre className="diff" data-testid="diff">
        {lines.map((l, i) => <div key={i} className={l.op === "+" ? "added" : l.op === "-" ? "removed" : undefined}>{l.op} {l.text}</div>)}
      </pre>
    </section>
  );
}

function Register({ kafkaId, subject, latest, onRegistered }: { kafkaId: string; subject: string; latest?: SubjectVersion; onRegistered: () => void }) {
  const { can } = useTenant();
  const [draft, setDraft] = useState<Draft>({ schemaType: latest ? typeOf(latest) : "AVRO", schema: latest ? layout(latest.schema) : "" });
  const [problem, setProblem] = useState<string | null>(null);
  const [verdict, setVerdict] = useState<Verdict | null>(null);
  const path = subjectPath(subject);
  const check = useMutation({
    mutationFn: () => registry<{ is_compatible: boolean; messages?: string[] }>(kafkaId, "POST",
      `/compatibility${path}/versions/latest?verbose=true`, draftBody(draft)),
    onSuccess: (answer) => setVerdict(verdictOf(answer)),
  });
  const register = useMutation({
    mutationFn: () => registry<{ id: number }>(kafkaId, "POST", `${path}/versions`, draftBody(draft)),
    onSuccess: onRegistered,
  });
  const run = (action: "check" | "register") => {
    const why = draftProblem(draft);
    setProblem(why);
    setVerdict(null);
    check.reset();
    register.reset();
    if (why) return;
    (action === "check" ? check : register).mutate();
  };
  const disabledWhy = can("member") ? undefined : READ_ONLY;
  return (
    <section aria-label="Register a version">
      <Title order={2} size="h3" mt="lg" mb="xs">{latest ? "Register a new version" : "Register the first version"}</Title>
      {disabledWhy && <p className="muted" role="note" id="register-blocked">{disabledWhy}</p>}
      <form onSubmit={(e) => { e.preventDefault(); run("register"); }}>
        <Stack gap="sm">
        <NativeSelect label="Type" aria-label="Schema type" value={draft.schemaType} onChange={(e) => setDraft({ ...draft, schemaType: e.currentTarget.value as SchemaType })} w={220}
          data={[{ value: "AVRO", label: "Avro" }, { value: "JSON", label: "JSON Schema" }, { value: "PROTOBUF", label: "Protobuf" }]} />
        <Textarea label="Schema" aria-label="Schema" autosize minRows={10} maxRows={30} value={draft.schema} spellCheck={false}
          onChange={(e) => setDraft({ ...draft, schema: e.currentTarget.value })} styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }} />
        <Group>
          <Button variant="default" disabled={!!disabledWhy || check.isPending} aria-describedby={disabledWhy ? "register-blocked" : undefined}
            onClick={() => run("check")}>Check compatibility</Button>
          <Button type="submit" disabled={!!disabledWhy || register.isPending} aria-describedby={disabledWhy ? "register-blocked" : undefined}>Register</Button>
        </Group>
        <ErrorText error={problem ?? check.error ?? register.error} />
        {verdict?.compatible && <p role="status">Compatible with the latest version.</p>}
        {verdict && !verdict.compatible && (
          <div role="alert" className="error" data-testid="incompatible">
            Not compatible:
            <ul>{verdict.reasons.map((r, i) => <li key={i}>{r}</li>)}</ul>
          </div>
        )}
        {register.data && <p role="status">Registered with schema id {register.data.id}.</p>}
        </Stack>
      </form>
    </section>
  );
}
