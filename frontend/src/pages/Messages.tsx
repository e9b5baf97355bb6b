// Messages: on open, the newest records (newest first across partitions, no "Read" needed), with filters and a
// start point kept while you stay on the topic; export; a record drawer; and produce (REST v3 records) in a drawer,
// after which the list reads again so the new record shows.
import { Button, Drawer, Group, NativeSelect, Stack, Text, Textarea, TextInput } from "@mantine/core";
import { useMutation } from "@tanstack/react-query";
import { type ReactNode, useCallback, useEffect, useRef, useState } from "react";
import { api, type Schemas, unwrap } from "../api/client";
import { FilterInputs } from "../components/FilterFields";
import { RecordList, useView, ViewPicker } from "../components/RecordList";
import { ErrorText, toast } from "../components/ui";
import { buildFilter, type FilterFields } from "../lib/filters";
import { download, toCsv, toJson } from "../lib/records";
import { newestFirst, type StartFrom, TailConnection, type TailRecord, type TailState, tailUrl } from "../lib/tail";
import { plural } from "../lib/units";

type Mode = "earliest" | "offset" | "timestamp" | "last";
type Permission = Schemas["Permission"];

interface BrowseSettings {
  partition: string;
  mode: Mode;
  offset: string;
  timestamp: string;
  limit: string;
  fields: FilterFields;
}
const START: BrowseSettings = { partition: "all", mode: "last", offset: "0", timestamp: "", limit: "100", fields: {} };

/** The browse settings of a topic, kept for the browser tab's session: leaving for the tail or configs and coming
 * back finds the same filters. */
function useKept(topic: string): [BrowseSettings, (next: BrowseSettings) => void] {
  const key = `sluice.browse.${topic}`;
  const [settings, setSettings] = useState<BrowseSettings>(() => {
    try {
      return { ...START, ...JSON.parse(sessionStorage.getItem(key) ?? "{}") };
    } catch {
      return START;
    }
  });
  const set = (next: BrowseSettings) => {
    setSettings(next);
    try {
      sessionStorage.setItem(key, JSON.stringify(next));
    } catch {
      // not kept: this visit still has them
    }
  };
  return [settings, set];
}

/** ``produce``/``read``: the caller's rights on the topic (undefined while they load). Producing is not offered
 * when the role forbids it (``canProduce``); when only the cluster's ACLs do, the form is disabled with the reason. */
export function Messages({ kafkaId, topic, partitions, canProduce, produce, read }: {
  kafkaId: string; topic: string; partitions: number; canProduce: boolean; produce?: Permission; read?: Permission;
}) {
  const [generation, setGeneration] = useState(0);
  const [producing, setProducing] = useState(false);
  return (
    <>
      {read && !read.allowed && <Text size="sm" className="muted" role="note" id="read-blocked" mb="sm">{read.reason}</Text>}
      <Browse kafkaId={kafkaId} topic={topic} partitions={partitions} read={read} generation={generation}
        actions={canProduce && produce && <Button onClick={() => setProducing(true)}>Produce a message</Button>} />
      {canProduce && produce && (
        <Drawer opened={producing} onClose={() => setProducing(false)} position="right" size="lg" title="Produce a message"
          closeButtonProps={{ "aria-label": "Close" }}>
          <Produce kafkaId={kafkaId} topic={topic} partitions={partitions} blocked={produce.allowed ? null : produce.reason}
            onProduced={() => setGeneration((g) => g + 1)} />
        </Drawer>
      )}
    </>
  );
}

function Browse({ kafkaId, topic, partitions, read, generation, actions }: {
  kafkaId: string; topic: string; partitions: number; read?: Permission; generation: number; actions?: ReactNode;
}) {
  const [settings, setSettings] = useKept(topic);
  const { partition, mode, offset, timestamp, limit, fields } = settings;
  const change = (patch: Partial<BrowseSettings>) => setSettings({ ...settings, ...patch });
  const [records, setRecords] = useState<TailRecord[]>([]);
  const [state, setState] = useState<TailState | "idle">("idle");
  const [error, setError] = useState<string | null>(null);
  const [view, setView] = useView();
  const tail = useRef<TailConnection | null>(null);
  useEffect(() => () => tail.current?.stop(), []);
  const allowed = read?.allowed === true;

  const browse = useCallback((current: BrowseSettings) => {
    tail.current?.stop();
    setError(null);
    const chosen = current.partition === "all" ? Array.from({ length: partitions }, (_, p) => p) : [Number(current.partition)];
    const max = Math.max(1, Number(current.limit) || 100);
    let from: StartFrom;
    if (current.mode === "earliest") from = "earliest";
    else if (current.mode === "offset") from = { offsets: Object.fromEntries(chosen.map((p) => [String(p), Math.max(0, Number(current.offset) || 0)])) };
    else if (current.mode === "timestamp") {
      const at = Date.parse(current.timestamp);
      if (Number.isNaN(at)) {
        setError("Enter a date and time to start from.");
        return;
      }
      from = { timestamp: at };
    } else from = { last: current.partition === "all" ? Math.ceil(max / Math.max(1, partitions)) : max };
    const collected: TailRecord[] = [];
    // "Newest records" reads the last N of every partition, then shows the newest N of them all, newest first.
    const shown = () => {
      const sorted = current.mode === "last" ? newestFirst(collected).slice(0, max) : [...collected];
      return current.mode === "last" ? sorted : sorted.sort((a, b) => a.timestamp - b.timestamp || a.partition - b.partition || a.offset - b.offset);
    };
    tail.current = new TailConnection({
      url: tailUrl(kafkaId, topic), from, partitions: chosen, until: "end", limit: current.mode === "last" ? undefined : max,
      filter: buildFilter(current.fields),
      onRecords: (batch) => {
        collected.push(...batch);
        setRecords(shown());
      },
      onState: (next, message) => {
        setState(next);
        if (next === "done") setRecords(shown());
        if (next === "failed") setError(message ?? "The read failed.");
      },
    });
    setRecords([]);
    tail.current.start();
  }, [kafkaId, topic, partitions]);

  // Newest records on open (once the read right is known), and again after a produce from this page.
  useEffect(() => {
    if (allowed && partitions > 0) browse(settings);
    // eslint-disable-next-line react-hooks/exhaustive-deps -- settings apply on Read, not on every keystroke
  }, [allowed, partitions, generation, browse]);

  const reading = state === "connecting" || state === "live";
  return (
    <section aria-label="Browse messages">
      <form onSubmit={(e) => { e.preventDefault(); browse(settings); }}>
        <Stack gap="xs">
          <Group align="flex-end" gap="sm" wrap="wrap">
            <NativeSelect size="xs" label="Partition" value={partition} onChange={(e) => change({ partition: e.currentTarget.value })}
              data={[{ value: "all", label: "All" }, ...Array.from({ length: partitions }, (_, p) => ({ value: String(p), label: String(p) }))]} />
            <NativeSelect size="xs" label="From" value={mode} onChange={(e) => change({ mode: e.currentTarget.value as Mode })} data={[
              { value: "last", label: "Newest records" }, { value: "earliest", label: "The beginning" }, { value: "offset", label: "An offset" }, { value: "timestamp", label: "A time" },
            ]} />
            {mode === "offset" && <TextInput size="xs" label="Offset" type="number" min={0} value={offset} onChange={(e) => change({ offset: e.currentTarget.value })} w={110} />}
            {mode === "timestamp" && <TextInput size="xs" label="Time" type="datetime-local" step={1} value={timestamp} onChange={(e) => change({ timestamp: e.currentTarget.value })} />}
            <TextInput size="xs" label="Max records" type="number" min={1} max={10000} value={limit} onChange={(e) => change({ limit: e.currentTarget.value })} w={110} />
            <Button size="xs" type="submit" disabled={!allowed} aria-describedby={read && !read.allowed ? "read-blocked" : undefined}
              title={read && !read.allowed ? read.reason : undefined}>Read</Button>
            <Group ml="auto" gap="xs">{actions}</Group>
          </Group>
          <FilterInputs fields={fields} onChange={(next) => change({ fields: next })} />
        </Stack>
      </form>
      <ErrorText error={error} />
      <Group justify="space-between" my="xs" wrap="wrap">
        <Text size="sm" aria-live="polite" data-testid="record-count">{plural(records.length, "record")}{reading ? " (reading…)" : ""}</Text>
        <Group gap="sm" wrap="wrap">
          <ViewPicker view={view} onChange={setView} />
          <Button size="xs" variant="default" disabled={!records.length} onClick={() => download(`${topic}.csv`, toCsv(records), "text/csv")}>Export CSV</Button>
          <Button size="xs" variant="default" disabled={!records.length} onClick={() => download(`${topic}.json`, toJson(records), "application/json")}>Export JSON</Button>
        </Group>
      </Group>
      <RecordList records={records} caption="Records" view={view} empty={state === "idle" && !allowed ? "Waiting for read access…" : "No records."} />
    </section>
  );
}

type ValueType = "JSON" | "STRING" | "BINARY";

function Produce({ kafkaId, topic, partitions, blocked, onProduced }: {
  kafkaId: string; topic: string; partitions: number; blocked: string | null; onProduced: () => void;
}) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [valueType, setValueType] = useState<ValueType>("STRING");
  const [partition, setPartition] = useState("");
  const [headers, setHeaders] = useState<{ name: string; value: string }[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const produce = useMutation({
    mutationFn: async () => {
      let data: unknown = value;
      if (valueType === "JSON") data = JSON.parse(value);
      const body = {
        ...(partition !== "" ? { partition_id: Number(partition) } : {}),
        ...(key ? { key: { type: "STRING", data: key } } : {}),
        value: { type: valueType, data },
        headers: headers.filter((h) => h.name).map((h) => ({ name: h.name, value: btoa(unescape(encodeURIComponent(h.value))) })),
      };
      const answer = await unwrap(api.POST("/kafka/v3/clusters/{cluster_id}/topics/{topic_name}/records", {
        params: { path: { cluster_id: kafkaId, topic_name: topic } }, body: body as never,
      }));
      const report = answer as unknown as { error_code: number; message?: string; partition_id?: number; offset?: number };
      if (report.error_code !== 200) throw new Error(report.message ?? `The record was refused (${report.error_code}).`);
      return report;
    },
    onSuccess: (report) => {
      toast.ok(`Produced to partition ${report.partition_id} at offset ${report.offset}.`);
      onProduced();
    },
  });
  const submit = () => {
    setProblem(null);
    if (valueType === "JSON") {
      try {
        JSON.parse(value);
      } catch {
        setProblem("The value is not valid JSON.");
        return;
      }
    }
    if (valueType === "BINARY" && !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
      setProblem("A binary value is given as base64.");
      return;
    }
    produce.mutate();
  };
  return (
    <section aria-label="Produce a message">
      {blocked && <Text size="sm" className="muted" role="note" id="produce-blocked" mb="sm">{blocked}</Text>}
      <form onSubmit={(e) => { e.preventDefault(); submit(); }}>
        <Stack gap="sm">
          <TextInput label="Key" value={key} onChange={(e) => setKey(e.currentTarget.value)} placeholder="none" data-autofocus />
          <Group grow>
            <NativeSelect label="Partition" value={partition} onChange={(e) => setPartition(e.currentTarget.value)}
              data={[{ value: "", label: "By key" }, ...Array.from({ length: partitions }, (_, p) => ({ value: String(p), label: String(p) }))]} />
            <NativeSelect label="Value type" value={valueType} onChange={(e) => setValueType(e.currentTarget.value as ValueType)}
              data={[{ value: "STRING", label: "Text" }, { value: "JSON", label: "JSON" }, { value: "BINARY", label: "Bytes (base64)" }]} />
          </Group>
          <Textarea label="Value" autosize minRows={4} maxRows={14} value={value} onChange={(e) => setValue(e.currentTarget.value)}
            styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }} />
          {headers.map((h, index) => (
            <Group key={index} align="flex-end" gap="xs" wrap="nowrap">
              <TextInput label="Header name" value={h.name} onChange={(e) => { const v = e.currentTarget.value; setHeaders(headers.map((x, i) => (i === index ? { ...x, name: v } : x))); }} />
              <TextInput label="Header value" value={h.value} onChange={(e) => { const v = e.currentTarget.value; setHeaders(headers.map((x, i) => (i === index ? { ...x, value: v } : x))); }} />
              <Button variant="subtle" color="red" onClick={() => setHeaders(headers.filter((_, i) => i !== index))}>Remove header</Button>
            </Group>
          ))}
          <Group justify="space-between">
            <Button variant="default" onClick={() => setHeaders([...headers, { name: "", value: "" }])}>Add header</Button>
            <Button type="submit" loading={produce.isPending} disabled={!!blocked} title={blocked ?? undefined}
              aria-describedby={blocked ? "produce-blocked" : undefined}>Produce</Button>
          </Group>
          <ErrorText error={problem ?? produce.error} />
          {produce.data && (
            <Text size="sm" role="status">Produced to partition {produce.data.partition_id} at offset {produce.data.offset}.</Text>
          )}
        </Stack>
      </form>
    </section>
  );
}
