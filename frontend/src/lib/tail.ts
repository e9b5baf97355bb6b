// The WebSocket tail (/ws/clusters/{id}/topics/{topic}/tail, docs/decisions/0015-live-tail.md) as the
// console uses it: live tail and bounded browsing. Owned by one component; runs on the browser's main thread.

// "schema": a key or value in Confluent's wire format, decoded with the cluster's Schema Registry to JSON text;
// its schema id and type are beside it (key_schema_id, value_schema_id, ...).
export type Encoding = "utf-8" | "base64" | "schema" | null;
export interface TailRecord {
  partition: number;
  offset: number;
  timestamp: number;
  timestamp_type?: string;
  key: string | null;
  key_encoding: Encoding;
  value: string | null;
  value_encoding: Encoding;
  key_schema_id?: number;
  key_schema_type?: string;
  value_schema_id?: number;
  value_schema_type?: string;
  headers: { key: string; value: string | null; encoding: Encoding }[];
}
export type Cursor = Record<string, number>;
export type StartFrom = "latest" | "earliest" | { offsets: Cursor } | { timestamp: number } | { last: number };
export type TailState = "connecting" | "live" | "paused" | "reconnecting" | "done" | "failed";

export interface TailOptions {
  url: string;
  from: StartFrom;
  partitions?: number[];
  filter?: string;
  /** "end": stop at the end offsets seen at subscribe time (browsing); absent: live. */
  until?: "end";
  /** Stop (close) after this many records have arrived: a page of a browse. */
  limit?: number;
  onRecords: (records: TailRecord[]) => void;
  onState: (state: TailState, message?: string) => void;
  /** Tests inject a WebSocket class; the browser's by default. */
  socket?: typeof WebSocket;
  reconnectDelayMs?: number;
}

/** Close codes after which a reconnect cannot help (the request itself was refused, or the credentials revoked). */
const FINAL_CLOSES = new Set([1000, 4400, 4401, 4404]);

export function tailUrl(clusterId: string, topic: string, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/clusters/${encodeURIComponent(clusterId)}/topics/${encodeURIComponent(topic)}/tail`;
}

/**
 * One tail subscription. Keeps the resume cursor (the next offset per partition) from every frame, so a
 * dropped connection, or a resume after a pause, subscribes again from exactly where it stopped: no gap
 * and no duplicate. Pausing closes the socket, so a paused view holds no growing backlog.
 */
export class TailConnection {
  cursor: Cursor | null = null;
  received = 0;
  private ws: WebSocket | null = null;
  private stopped = false;
  private paused = false;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly options: TailOptions) {}

  start(): void {
    this.stopped = false;
    this.connect(this.options.from);
  }

  pause(): void {
    if (this.stopped || this.paused) return;
    this.paused = true;
    this.drop();
    this.options.onState("paused");
  }

  resume(): void {
    if (this.stopped || !this.paused) return;
    this.paused = false;
    this.connect(this.resumeFrom());
  }

  stop(): void {
    this.stopped = true;
    this.drop();
  }

  private resumeFrom(): StartFrom {
    return this.cursor && Object.keys(this.cursor).length ? { offsets: { ...this.cursor } } : this.options.from;
  }

  private drop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = ws.onmessage = ws.onerror = ws.onopen = null;
      ws.close(1000);
    }
  }

  private connect(from: StartFrom): void {
    const Socket = this.options.socket ?? WebSocket;
    const ws = new Socket(this.options.url);
    this.ws = ws;
    this.options.onState(this.cursor ? "reconnecting" : "connecting");
    ws.onopen = () => {
      const message: Record<string, unknown> = { type: "subscribe", from };
      const cursorPartitions = typeof from === "object" && "offsets" in from;
      if (this.options.partitions?.length && !cursorPartitions) message.partitions = this.options.partitions;
      if (this.options.filter) message.filter = this.options.filter;
      if (this.options.until) message.until = this.options.until;
      ws.send(JSON.stringify(message));
    };
    ws.onmessage = (event) => this.frame(JSON.parse(String(event.data)));
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped || this.paused) return;
      if (FINAL_CLOSES.has(event.code)) {
        if (event.code === 1000) this.options.onState("done");
        return;
      }
      this.options.onState("reconnecting", event.reason || "The connection dropped; reconnecting from the cursor.");
      this.timer = setTimeout(() => this.connect(this.resumeFrom()), this.options.reconnectDelayMs ?? 1000);
    };
  }

  private frame(frame: { type: string; records?: TailRecord[]; cursor?: Cursor; message?: string; code?: string }): void {
    if (frame.cursor) this.cursor = frame.cursor;
    switch (frame.type) {
      case "subscribed":
        this.options.onState("live");
        break;
      case "records": {
        let records = frame.records ?? [];
        const limit = this.options.limit;
        if (limit !== undefined) records = records.slice(0, Math.max(0, limit - this.received));
        this.received += records.length;
        if (records.length) this.options.onRecords(records);
        if (limit !== undefined && this.received >= limit) {
          this.stopped = true;
          this.drop();
          this.options.onState("done");
        }
        break;
      }
      case "done":
        this.stopped = true;
        this.drop();
        this.options.onState("done");
        break;
      case "error":
        this.options.onState("failed", frame.message ?? frame.code ?? "The tail failed.");
        if (frame.code !== "too_slow") this.stopped = true;
        break;
    }
  }
}

/** Newest-first list of at most ``capacity`` records: the live view's memory stays bounded at any rate. */
export function prependBounded<T>(current: T[], arrived: T[], capacity: number): T[] {
  const newest = arrived.slice(-capacity).reverse();
  return newest.concat(current.slice(0, Math.max(0, capacity - newest.length)));
}

/** Newest first across partitions: by timestamp, then offset (both descending), then partition. The tail sends a
 * backlog partition by partition; shown in that order, partition 0's old records sat above partition 1's new ones. */
export function byNewest<T extends Pick<TailRecord, "timestamp" | "offset" | "partition">>(a: T, b: T): number {
  return b.timestamp - a.timestamp || b.offset - a.offset || a.partition - b.partition;
}

export function newestFirst<T extends Pick<TailRecord, "timestamp" | "offset" | "partition">>(records: T[]): T[] {
  return [...records].sort(byNewest);
}

/** The live view's list after a batch arrives: newest first across partitions, at most ``capacity`` kept. */
export function mergeNewest<T extends Pick<TailRecord, "timestamp" | "offset" | "partition">>(current: T[], arrived: T[], capacity: number): T[] {
  return newestFirst(arrived.concat(current)).slice(0, capacity);
}
