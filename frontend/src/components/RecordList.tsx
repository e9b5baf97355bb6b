// Records as rows (newest first, as given), the chosen view (pretty JSON, text, bytes) for keys and values, and a
// drawer with one record whole: key, value, headers, partition, offset, timestamp, schema ids, copy buttons.
import { Drawer, Group, Radio, Stack, Table, Text, Title } from "@mantine/core";
import { memo, useCallback, useState } from "react";
import { render, type View } from "../lib/records";
import type { TailRecord } from "../lib/tail";
import { Badge, CopyButton, Facts } from "./ui";

export function RecordList({ records, caption, view, empty = "No records." }: { records: TailRecord[]; caption: string; view: View; empty?: string }) {
  const [open, setOpen] = useState<TailRecord | null>(null);
  const onOpen = useCallback((r: TailRecord) => setOpen(r), []);
  // Plain rows, each memoised on its record and the view: the live tail adds records five times a second, and only
  // the new rows render (Mantine components per cell made a 200-row tail slow to answer clicks).
  return (
    <>
      <div className="table-wrap">
        <Table striped highlightOnHover verticalSpacing="xs" className="data-table records">
          <caption className="sr-only">{caption}</caption>
          <thead>
            <tr>
              <th scope="col">Timestamp</th><th scope="col">Partition</th><th scope="col">Offset</th>
              <th scope="col">Key</th><th scope="col">Value</th><th scope="col">Headers</th>
            </tr>
          </thead>
          <tbody>
            {records.length === 0 ? (
              <tr><td colSpan={6}><Text size="sm" className="muted" ta="center" py="md">{empty}</Text></td></tr>
            ) : records.map((r) => <RecordRow key={`${r.partition}:${r.offset}`} record={r} view={view} onOpen={onOpen} />)}
          </tbody>
        </Table>
      </div>
      <RecordDrawer record={open} view={view} onClose={() => setOpen(null)} />
    </>
  );
}

const RecordRow = memo(function RecordRow({ record: r, view, onOpen }: { record: TailRecord; view: View; onOpen: (r: TailRecord) => void }) {
  return (
    <tr data-testid="record">
      <td style={{ whiteSpace: "nowrap" }}>{new Date(r.timestamp).toISOString().replace("T", " ").replace("Z", "")}</td>
      <td>{r.partition}</td>
      <td>
        <button type="button" className="offset-link" onClick={() => onOpen(r)} aria-label={`Open record ${r.partition}:${r.offset}`}>{r.offset}</button>
      </td>
      <td><SchemaNote id={r.key_schema_id} type={r.key_schema_type} /><pre>{render(r.key, r.key_encoding, view)}</pre></td>
      <td style={{ minWidth: "14rem" }}><SchemaNote id={r.value_schema_id} type={r.value_schema_type} /><pre>{render(r.value, r.value_encoding, view)}</pre></td>
      <td>{r.headers.map((h) => <div key={h.key}><code>{h.key}</code>: {render(h.value, h.encoding, "text")}</div>)}</td>
    </tr>
  );
});

export function RecordDrawer({ record, view, onClose }: { record: TailRecord | null; view: View; onClose: () => void }) {
  const r = record;
  return (
    <Drawer opened={!!r} onClose={onClose} position="right" size="lg" title={r ? `Record ${r.partition}:${r.offset}` : ""}
      closeButtonProps={{ "aria-label": "Close" }}>
      {r && (
        <Stack data-testid="record-drawer">
          <Facts items={[
            ["Partition", r.partition], ["Offset", r.offset],
            ["Timestamp", `${new Date(r.timestamp).toISOString()}${r.timestamp_type ? ` (${r.timestamp_type})` : ""}`],
            ["Key schema", r.key_schema_id != null ? `${r.key_schema_type ?? "schema"} id ${r.key_schema_id}` : "—"],
            ["Value schema", r.value_schema_id != null ? `${r.value_schema_type ?? "schema"} id ${r.value_schema_id}` : "—"],
          ]} />
          <Part title="Key" text={render(r.key, r.key_encoding, view)} />
          <Part title="Value" text={render(r.value, r.value_encoding, view)} />
          <Title order={3} size="h4">Headers</Title>
          {r.headers.length === 0 ? <Text size="sm" className="muted">No headers.</Text> : (
            <Table className="data-table">
              <Table.Caption className="sr-only">Headers</Table.Caption>
              <Table.Thead><Table.Tr><Table.Th scope="col">Name</Table.Th><Table.Th scope="col">Value</Table.Th><Table.Th scope="col"><span className="sr-only">Copy</span></Table.Th></Table.Tr></Table.Thead>
              <Table.Tbody>
                {r.headers.map((h) => {
                  const text = render(h.value, h.encoding, "text");
                  return <Table.Tr key={h.key}><Table.Td><code>{h.key}</code></Table.Td><Table.Td>{text}</Table.Td><Table.Td><CopyButton value={text} label={`Copy header ${h.key}`} /></Table.Td></Table.Tr>;
                })}
              </Table.Tbody>
            </Table>
          )}
        </Stack>
      )}
    </Drawer>
  );
}

function Part({ title, text }: { title: string; text: string }) {
  return (
    <Stack gap={4}>
      <Group justify="space-between"><Title order={3} size="h4">{title}</Title><CopyButton value={text} label={`Copy ${title.toLowerCase()}`} /></Group>
      <pre style={{ maxHeight: "24em" }}>{text}</pre>
    </Stack>
  );
}

/** Which registry schema decoded a key or value (the record was in Confluent's wire format). */
function SchemaNote({ id, type }: { id?: number; type?: string }) {
  if (id == null) return null;
  return <Badge tone="info" testId="schema-id">{type ?? "schema"} · schema id {id}</Badge>;
}

export const ViewPicker = memo(function ViewPicker({ view, onChange }: { view: View; onChange: (view: View) => void }) {
  return (
    <Radio.Group value={view} onChange={(v) => onChange(v as View)} aria-label="Show as">
      <Group gap="sm">
        <Text size="sm" component="span" aria-hidden>Show as</Text>
        <Radio size="xs" value="json" label="Pretty JSON" />
        <Radio size="xs" value="text" label="Text" />
        <Radio size="xs" value="bytes" label="Bytes" />
      </Group>
    </Radio.Group>
  );
});

export function useView() {
  return useState<View>("json");
}
