// Live tail: newest on top across partitions (the backlog comes partition by partition; it is sorted by time), at
// most CAPACITY records kept (memory stays bounded at any rate), updates
// rendered at most every FLUSH_MS so a fast topic does not starve clicks; pause closes the socket and resume
// continues from the cursor, as does a reconnect after a drop.
import { Button, Group, NativeSelect, Stack, Text } from "@mantine/core";
import { useEffect, useRef, useState } from "react";
import type { Schemas } from "../api/client";
import { FilterInputs } from "../components/FilterFields";
import { RecordList, useView, ViewPicker } from "../components/RecordList";
import { Badge, ErrorText } from "../components/ui";
import { buildFilter, type FilterFields } from "../lib/filters";
import { mergeNewest, type StartFrom, TailConnection, type TailRecord, type TailState, tailUrl } from "../lib/tail";

const CAPACITY = 500;
const FLUSH_MS = 200;
const SHOWN = 200;

export function LiveTail({ kafkaId, topic, read }: { kafkaId: string; topic: string; read?: Schemas["Permission"] }) {
  const [records, setRecords] = useState<TailRecord[]>([]);
  const [state, setState] = useState<TailState>("connecting");
  const [message, setMessage] = useState<string | null>(null);
  const [fields, setFields] = useState<FilterFields>({});
  const [applied, setApplied] = useState<FilterFields>({});
  const [from, setFrom] = useState<"latest" | "last">("last");
  const [received, setReceived] = useState(0);
  const [view, setView] = useView();
  const tail = useRef<TailConnection | null>(null);
  const pending = useRef<TailRecord[]>([]);

  useEffect(() => {
    setRecords([]);
    pending.current = [];
    setMessage(null);
    const start: StartFrom = from === "latest" ? "latest" : { last: 20 };
    const connection = new TailConnection({
      url: tailUrl(kafkaId, topic), from: start, filter: buildFilter(applied),
      onRecords: (batch) => {
        pending.current.push(...batch);
        if (pending.current.length > CAPACITY) pending.current = pending.current.slice(-CAPACITY);
      },
      onState: (next, why) => {
        setState(next);
        setMessage(why ?? null);
      },
    });
    tail.current = connection;
    connection.start();
    const timer = setInterval(() => {
      if (!pending.current.length) return;
      const batch = pending.current;
      pending.current = [];
      setRecords((current) => mergeNewest(current, batch, CAPACITY));
      setReceived(connection.received);
    }, FLUSH_MS);
    return () => {
      clearInterval(timer);
      connection.stop();
    };
  }, [kafkaId, topic, applied, from]);

  const paused = state === "paused";
  return (
    <section aria-label="Live tail">
      {read && !read.allowed && <Text size="sm" className="muted" role="note" mb="sm">{read.reason}</Text>}
      <form onSubmit={(e) => { e.preventDefault(); setApplied({ ...fields }); }}>
        <Stack gap="xs">
          <Group align="flex-end" gap="sm">
            <NativeSelect size="xs" label="Start" value={from} onChange={(e) => setFrom(e.currentTarget.value as "latest" | "last")}
              data={[{ value: "last", label: "Last 20 per partition, then live" }, { value: "latest", label: "Only new records" }]} />
            <Button size="xs" type="submit" variant="default">Apply filters</Button>
          </Group>
          <FilterInputs fields={fields} onChange={setFields} />
        </Stack>
      </form>
      <Group my="xs" gap="sm" wrap="wrap">
        <Badge tone={state === "live" ? "ok" : state === "failed" ? "bad" : "warn"}>
          <span data-testid="tail-state">{state}</span>
        </Badge>
        <Button size="xs" variant="default" onClick={() => (paused ? tail.current?.resume() : tail.current?.pause())} disabled={state === "failed" || state === "done"}>
          {paused ? "Resume" : "Pause"}
        </Button>
        <Button size="xs" variant="default" onClick={() => setRecords([])}>Clear</Button>
        <Text size="sm" aria-live="off" data-testid="tail-received">{received} received</Text>
        <Group ml="auto"><ViewPicker view={view} onChange={setView} /></Group>
      </Group>
      <ErrorText error={state === "failed" ? message : null} />
      {state === "reconnecting" && message && <Text size="sm" className="muted">{message}</Text>}
      <RecordList records={records.slice(0, SHOWN)} caption="Live records, newest first" view={view} />
    </section>
  );
}
