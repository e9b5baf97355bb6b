import { ago, byteRate, bytes, configRaw, configValue, count, duration, hostPort, MISSING, plural, rate } from "./units";

describe("units", () => {
  it("bytes in binary units", () => {
    expect(bytes(0)).toBe("0 B");
    expect(bytes(1023)).toBe("1023 B");
    expect(bytes(1536)).toBe("1.5 KiB");
    expect(bytes(10 * 1024 * 1024)).toBe("10 MiB");
    expect(bytes(1073741824)).toBe("1 GiB");
    expect(bytes(null)).toBe(MISSING);
    expect(byteRate(2048)).toBe("2 KiB/s");
  });

  it("counts, plurals and short counts", () => {
    expect(count(1234567)).toBe("1,234,567");
    expect(count(12_345_678, { short: true })).toBe("12.3M");
    expect(plural(1, "record")).toBe("1 record");
    expect(plural(0, "record")).toBe("0 records");
    expect(plural(1000, "record")).toBe("1,000 records");
    expect(count(undefined)).toBe(MISSING);
  });

  it("rates keep small traffic visible", () => {
    expect(rate(0)).toBe("0 rec/s");
    expect(rate(0.05)).toBe("0.05 rec/s");
    expect(rate(0.0001)).toBe("<0.001 rec/s");
    expect(rate(3.25)).toBe("3.3 rec/s");
    expect(rate(1234.4)).toBe("1,234 rec/s");
    expect(rate(null)).toBe(MISSING);
  });

  it("durations in the largest units that read well", () => {
    expect(duration(250)).toBe("250 ms");
    expect(duration(1500)).toBe("1.5 s");
    expect(duration(90_000)).toBe("1 min 30 s");
    expect(duration(604_800_000)).toBe("7 d");
    expect(duration(90_061_000)).toBe("1 d 1 h");
    expect(duration(null)).toBe(MISSING);
    expect(ago("2026-01-01T00:00:00Z", Date.parse("2026-01-01T00:03:10Z"))).toBe("3 min ago");
  });

  it("host:port never repeats the port", () => {
    expect(hostPort("127.0.0.1:31093", 31093)).toBe("127.0.0.1:31093");
    expect(hostPort("127.0.0.1", 31093)).toBe("127.0.0.1:31093");
    expect(hostPort("[::1]:9092", 9092)).toBe("[::1]:9092");
    expect(hostPort(null, 1)).toBe(MISSING);
  });

  it("config values by their unit suffix", () => {
    expect(configValue("retention.ms", "604800000")).toBe("7 d");
    expect(configValue("retention.ms", "-1")).toBe("unlimited");
    expect(configValue("local.retention.ms", "-2")).toBe("as retention.ms");
    expect(configValue("local.retention.bytes", "-2")).toBe("as retention.bytes");
    expect(configValue("local.retention.bytes", "1048576")).toBe(bytes(1048576));
    expect(configValue("segment.bytes", "1073741824")).toBe("1 GiB");
    expect(configValue("cleanup.policy", "delete")).toBe("delete");
    expect(configValue("min.insync.replicas", "1")).toBe("1");
    expect(configRaw("retention.ms", "604800000")).toBe("604800000");
    expect(configRaw("cleanup.policy", "delete")).toBeNull();
  });
});
