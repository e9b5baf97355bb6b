import { mergeNewest, newestFirst, prependBounded, TailConnection, type TailRecord, type TailState } from "./tail";

/** A WebSocket double driven by the test: it records what the client sends and lets the test push frames. */
class FakeSocket {
  static made: FakeSocket[] = [];
  sent: unknown[] = [];
  closed = false;
  onopen: (() => void) | null = null;
  onmessage: ((event: { data: string }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(public url: string) {
    FakeSocket.made.push(this);
  }
  send(text: string) {
    this.sent.push(JSON.parse(text));
  }
  close() {
    this.closed = true;
  }
  push(frame: unknown) {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
}

const record = (partition: number, offset: number): TailRecord => ({
  partition, offset, timestamp: 0, key: null, key_encoding: null, value: `v${offset}`, value_encoding: "utf-8", headers: [],
});

function open(extra: Partial<ConstructorParameters<typeof TailConnection>[0]> = {}) {
  FakeSocket.made = [];
  const got: TailRecord[] = [];
  const states: TailState[] = [];
  const tail = new TailConnection({
    url: "ws://x/tail", from: "latest", onRecords: (r) => got.push(...r), onState: (s) => states.push(s),
    socket: FakeSocket as unknown as typeof WebSocket, reconnectDelayMs: 0, ...extra,
  });
  tail.start();
  FakeSocket.made[0].onopen?.();
  return { tail, got, states };
}

describe("TailConnection", () => {
  it("subscribes with filter and partitions", () => {
    open({ filter: "key == 'a'", partitions: [1] });
    expect(FakeSocket.made[0].sent[0]).toEqual({ type: "subscribe", from: "latest", filter: "key == 'a'", partitions: [1] });
  });

  it("resumes from the last cursor after a dropped connection", async () => {
    const { got } = open();
    const first = FakeSocket.made[0];
    first.push({ type: "subscribed", cursor: { "0": 5 } });
    first.push({ type: "records", records: [record(0, 5), record(0, 6)], cursor: { "0": 7 } });
    first.onclose?.({ code: 1006, reason: "" });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = FakeSocket.made[1];
    second.onopen?.();
    expect(second.sent[0]).toEqual({ type: "subscribe", from: { offsets: { "0": 7 } } });
    expect(got.map((r) => r.offset)).toEqual([5, 6]);
  });

  it("pause closes the socket and resume continues from the cursor", () => {
    const { tail, states } = open();
    FakeSocket.made[0].push({ type: "records", records: [record(1, 9)], cursor: { "1": 10 } });
    tail.pause();
    expect(FakeSocket.made[0].closed).toBe(true);
    expect(states.at(-1)).toBe("paused");
    tail.resume();
    FakeSocket.made[1].onopen?.();
    expect(FakeSocket.made[1].sent[0]).toEqual({ type: "subscribe", from: { offsets: { "1": 10 } } });
  });

  it("stops after a limit and does not reconnect after a refusal", () => {
    const { got, states } = open({ limit: 1, until: "end" });
    FakeSocket.made[0].push({ type: "records", records: [record(0, 0), record(0, 1)], cursor: { "0": 2 } });
    expect(got).toHaveLength(1);
    expect(states.at(-1)).toBe("done");
    const refused = open();
    FakeSocket.made[0].push({ type: "error", code: "invalid_filter", message: "bad filter" });
    FakeSocket.made[0].onclose?.({ code: 4400, reason: "" });
    expect(refused.states.at(-1)).toBe("failed");
    expect(FakeSocket.made).toHaveLength(1);
  });

  it("does not reconnect once its credentials are revoked", () => {
    const revoked = open();
    FakeSocket.made[0].push({ type: "error", code: "credentials_revoked", message: "The user was removed." });
    FakeSocket.made[0].onclose?.({ code: 4401, reason: "" });
    expect(revoked.states.at(-1)).toBe("failed");
    expect(FakeSocket.made).toHaveLength(1);
  });
});

describe("prependBounded", () => {
  it("puts the newest first and keeps at most the capacity", () => {
    expect(prependBounded([3, 2, 1], [4, 5, 6], 4)).toEqual([6, 5, 4, 3]);
    expect(prependBounded([], [1, 2, 3, 4, 5], 2)).toEqual([5, 4]);
  });
});

describe("newest first across partitions", () => {
  const at = (partition: number, offset: number, timestamp: number): TailRecord => ({ ...record(partition, offset), timestamp });

  it("orders a backlog that came partition by partition by time, newest on top", () => {
    // The server's backlog: partition 0's records, then partition 1's, each oldest first.
    const backlog = [at(0, 0, 100), at(0, 1, 300), at(1, 0, 200), at(1, 1, 400)];
    expect(newestFirst(backlog).map((r) => `${r.partition}:${r.offset}`)).toEqual(["1:1", "0:1", "1:0", "0:0"]);
  });

  it("keeps the newest within capacity as batches arrive", () => {
    let shown: TailRecord[] = [];
    shown = mergeNewest(shown, [at(0, 0, 100), at(0, 1, 300), at(1, 0, 200)], 3);
    shown = mergeNewest(shown, [at(1, 1, 400)], 3);
    expect(shown.map((r) => `${r.partition}:${r.offset}`)).toEqual(["1:1", "0:1", "1:0"]);
  });
});
