// Browse (a bounded read through the WebSocket tail: from an offset, a timestamp, the start or the last N,
// up to a page of records, filtered on the server), export, and produce (REST v3 records).
import { useMutation } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { api, type Schemas, unwrap } from "../api/client";
import { FilterInputs } from "../components/FilterFields";
import { RecordList, useView, ViewPicker } from "../components/RecordList";
import { ErrorText } from "../components/ui";
import { buildFilter, type FilterFields } from "../lib/filters";
import { download, toCsv, toJson } from "../lib/records";
import { type StartFrom, TailConnection, type TailRecord, type TailState, tailUrl } from "../lib/tail";

type Mode = "earliest" | "offset" | "timestamp" | "last";

type Permission = Schemas["Permission"];

/** ``produce``/``read``: the caller's rights on the topic (undefined while they load). Producing is not offered
 * when the role forbids it (``canProduce``); when only the cluster's ACLs do, the form is disabled with the reason. */
export function Messages({ kafkaId, topic, partitions, canProduce, produce, read }: {
  kafkaId: string; topic: string; partitions: number; canProduce: boolean; produce?: Permission; read?: Permission;
}) {
  return (
    <>
      {canProduce && produce && <Produce kafkaId={kafkaId} topic={topic} partitions={partitions} blocked={produce.allowed ? null : produce.reason} />}
      {read && !read.allowed && <p className="muted" role="note">{read.reason}</p>}
      <Browse kafkaId={kafkaId} topic={topic} partitions={partitions} />
    </>
  );
}

function Browse({ kafkaId, topic, partitions }: { kafkaId: string; topic: string; partitions: number }) {
  const [partition, setPartition] = useState("all");
  const [mode, setMode] = useState<Mode>("last");
  const [offset, setOffset] = useState("0");
  const [timestamp, setTimestamp] = useState("");
  const [limit, setLimit] = useState("100");
  const [fields, setFields] = useState<FilterFields>({});
  const [records, setRecords] = useState<TailRecord[]>([]);
  const [state, setState] = useState<TailState | "idle">("idle");
  const [error, setError] = useState<string | null>(null);
  const [view, setView] = useView();
  const tail = useRef<TailConnection | null>(null);
  useEffect(() => () => tail.current?.stop(), []);

  const browse = () => {
    tail.current?.stop();
    setRecords([]);
    setError(null);
    const chosen = partition === "all" ? Array.from({ length: partitions }, (_, p) => p) : [Number(partition)];
    const max = Math.max(1, Number(limit) || 100);
    let from: StartFrom;
    if (mode === "earliest") from = "earliest";
    else if (mode === "offset") from = { offsets: Object.fromEntries(chosen.map((p) => [String(p), Math.max(0, Number(offset) || 0)])) };
    else if (mode === "timestamp") {
      const at = Date.parse(timestamp);
      if (Number.isNaN(at)) {
        setError("Enter a date and time to start from.");
        return;
      }
      from = { timestamp: at };
    } else from = { last: partition === "all" ? Math.ceil(max / Math.max(1, partitions)) : max };
    const collected: TailRecord[] = [];
    tail.current = new TailConnection({
      url: tailUrl(kafkaId, topic), from, partitions: chosen, until: "end", limit: max, filter: buildFilter(fields),
      onRecords: (batch) => {
        collected.push(...batch);
        setRecords([...collected]);
      },
      onState: (next, message) => {
        setState(next);
        if (next === "failed") setError(message ?? "The read failed.");
      },
    });
    tail.current.start();
  };

  return (
    <section aria-label="Browse messages">
      <h2>Browse</h2>
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); browse(); }}>
        <label>
          Partition{" "}
          <select aria-label="Partition" value={partition} onChange={(e) => setPartition(e.target.value)}>
            <option value="all">All</option>
            {Array.from({ length: partitions }, (_, p) => <option key={p} value={p}>{p}</option>)}
          </select>
        </label>
        <label>
          From{" "}
          <select aria-label="From" value={mode} onChange={(e) => setMode(e.target.value as Mode)}>
            <option value="last">Newest records</option>
            <option value="earliest">The beginning</option>
            <option value="offset">An offset</option>
            <option value="timestamp">A time</option>
          </select>
        </label>
        {mode === "offset" && <label>Offset <input type="number" min={0} value={offset} onChange={(e) => setOffset(e.target.value)} /></label>}
        {mode === "timestamp" && <label>Time <input type="datetime-local" step={1} value={timestamp} onChange={(e) => setTimestamp(e.target.value)} /></label>}
        <label>Max records <input type="number" min={1} max={10000} value={limit} onChange={(e) => setLimit(e.target.value)} /></label>
        <FilterInputs fields={fields} onChange={setFields} />
        <button type="submit">Read</button>
      </form>
      <ErrorText error={error} />
      <div className="toolbar">
        <ViewPicker view={view} onChange={setView} />
        <span aria-live="polite">{records.length} records{state === "connecting" || state === "live" ? " (reading…)" : ""}</span>
        <button type="button" disabled={!records.length} onClick={() => download(`${topic}.csv`, toCsv(records), "text/csv")}>Export CSV</button>
        <button type="button" disabled={!records.length} onClick={() => download(`${topic}.json`, toJson(records), "application/json")}>Export JSON</button>
      </div>
      <RecordList records={records} caption="Records" view={view} />
    </section>
  );
}

type ValueType = "JSON" | "STRING" | "BINARY";

function Produce({ kafkaId, topic, partitions, blocked }: { kafkaId: string; topic: string; partitions: number; blocked: string | null }) {
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
      <h2>Produce a message</h2>
      {blocked && <p className="muted" role="note" id="produce-blocked">{blocked}</p>}
      <form className="stack" onSubmit={(e) => { e.preventDefault(); submit(); }}>
        <div className="inline-form">
          <label>Key <input value={key} onChange={(e) => setKey(e.target.value)} placeholder="none" /></label>
          <label>
            Partition{" "}
            <select aria-label="Partition" value={partition} onChange={(e) => setPartition(e.target.value)}>
              <option value="">By key</option>
              {Array.from({ length: partitions }, (_, p) => <option key={p} value={p}>{p}</option>)}
            </select>
          </label>
          <label>
            Value type{" "}
            <select aria-label="Value type" value={valueType} onChange={(e) => setValueType(e.target.value as ValueType)}>
              <option value="STRING">Text</option>
              <option value="JSON">JSON</option>
              <option value="BINARY">Bytes (base64)</option>
            </select>
          </label>
        </div>
        <label className="stack">Value <textarea aria-label="Value" rows={4} value={value} onChange={(e) => setValue(e.target.value)} /></label>
        {headers.map((h, index) => (
          <div className="inline-form" key={index}>
            <label>Header name <input value={h.name} onChange={(e) => setHeaders(headers.map((x, i) => (i === index ? { ...x, name: e.target.value } : x)))} /></label>
            <label>Header value <input value={h.value} onChange={(e) => setHeaders(headers.map((x, i) => (i === index ? { ...x, value: e.target.value } : x)))} /></label>
            <button type="button" onClick={() => setHeaders(headers.filter((_, i) => i !== index))}>Remove header</button>
          </div>
        ))}
        <div className="inline-form">
          <button type="button" onClick={() => setHeaders([...headers, { name: "", value: "" }])}>Add header</button>
          <button type="submit" disabled={produce.isPending || !!blocked} title={blocked ?? undefined}
            aria-describedby={blocked ? "produce-blocked" : undefined}>Produce</button>
        </div>
        <ErrorText error={problem ?? produce.error} />
        {produce.data && (
          <p role="status">Produced to partition {produce.data.partition_id} at offset {produce.data.offset}.</p>
        )}
      </form>
    </section>
  );
}
