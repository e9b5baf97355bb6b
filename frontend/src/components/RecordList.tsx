import { useState } from "react";
import { render, type View } from "../lib/records";
import type { TailRecord } from "../lib/tail";

/** Records as rows; the chosen view (pretty JSON, text, bytes) applies to keys and values. */
export function RecordList({ records, caption, view }: { records: TailRecord[]; caption: string; view: View }) {
  return (
    <table className="records">
      <caption className="sr-only">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Partition</th><th scope="col">Offset</th><th scope="col">Timestamp</th>
          <th scope="col">Key</th><th scope="col">Value</th><th scope="col">Headers</th>
        </tr>
      </thead>
      <tbody>
        {records.length === 0 ? (
          <tr><td colSpan={6} className="muted">No records.</td></tr>
        ) : records.map((r) => (
          <tr key={`${r.partition}:${r.offset}`} data-testid="record">
            <td>{r.partition}</td>
            <td>{r.offset}</td>
            <td>{new Date(r.timestamp).toISOString()}</td>
            <td><SchemaNote id={r.key_schema_id} type={r.key_schema_type} /><pre>{render(r.key, r.key_encoding, view)}</pre></td>
            <td><SchemaNote id={r.value_schema_id} type={r.value_schema_type} /><pre>{render(r.value, r.value_encoding, view)}</pre></td>
            <td>{r.headers.map((h) => <div key={h.key}><code>{h.key}</code>: {render(h.value, h.encoding, "text")}</div>)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Which registry schema decoded a key or value (the record was in Confluent's wire format). */
function SchemaNote({ id, type }: { id?: number; type?: string }) {
  if (id == null) return null;
  return <span className="badge badge-info" data-testid="schema-id">{type ?? "schema"} · schema id {id}</span>;
}

export function ViewPicker({ view, onChange }: { view: View; onChange: (view: View) => void }) {
  return (
    <fieldset className="inline">
      <legend>Show as</legend>
      {(["json", "text", "bytes"] as View[]).map((v) => (
        <label key={v}>
          <input type="radio" name="view" checked={view === v} onChange={() => onChange(v)} /> {v === "json" ? "Pretty JSON" : v === "text" ? "Text" : "Bytes"}
        </label>
      ))}
    </fieldset>
  );
}

export function useView() {
  return useState<View>("json");
}
