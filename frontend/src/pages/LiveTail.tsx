// Live tail: newest on top, at most CAPACITY records kept (memory stays bounded at any rate), updates
// rendered at most every FLUSH_MS so a fast topic does not starve clicks; pause closes the socket and resume
// continues from the cursor, as does a reconnect after a drop.
import { useEffect, useRef, useState } from "react";
import { FilterInputs } from "../components/FilterFields";
import { RecordList, useView, ViewPicker } from "../components/RecordList";
import { Badge, ErrorText } from "../components/ui";
import { buildFilter, type FilterFields } from "../lib/filters";
import { prependBounded, type StartFrom, TailConnection, type TailRecord, type TailState, tailUrl } from "../lib/tail";

const CAPACITY = 500;
const FLUSH_MS = 200;
const SHOWN = 200;

export function LiveTail({ kafkaId, topic }: { kafkaId: string; topic: string }) {
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
      setRecords((current) => prependBounded(current, batch, CAPACITY));
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
      <h2>Live tail</h2>
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); setApplied({ ...fields }); }}>
        <label>
          Start{" "}
          <select aria-label="Start" value={from} onChange={(e) => setFrom(e.target.value as "latest" | "last")}>
            <option value="last">Last 20 per partition, then live</option>
            <option value="latest">Only new records</option>
          </select>
        </label>
        <FilterInputs fields={fields} onChange={setFields} />
        <button type="submit">Apply filters</button>
      </form>
      <div className="toolbar">
        <Badge tone={state === "live" ? "ok" : state === "failed" ? "bad" : "warn"}>
          <span data-testid="tail-state">{state}</span>
        </Badge>
        <button type="button" onClick={() => (paused ? tail.current?.resume() : tail.current?.pause())} disabled={state === "failed" || state === "done"}>
          {paused ? "Resume" : "Pause"}
        </button>
        <button type="button" onClick={() => setRecords([])}>Clear</button>
        <span aria-live="off" data-testid="tail-received">{received} received</span>
        <ViewPicker view={view} onChange={setView} />
      </div>
      <ErrorText error={state === "failed" ? message : null} />
      {state === "reconnecting" && message && <p className="muted">{message}</p>}
      <RecordList records={records.slice(0, SHOWN)} caption="Live records, newest first" view={view} />
    </section>
  );
}
