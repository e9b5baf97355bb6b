// Human units for everything the console shows: bytes, counts, rates, durations, plurals, host:port, and a
// config's value read by its name's unit suffix (Kafka's convention: .ms, .bytes, ...). Pure functions; "—" for
// a value the API does not know (null/undefined), never 0.

export const MISSING = "—";
type Maybe = number | null | undefined;

const known = (n: Maybe): n is number => typeof n === "number" && Number.isFinite(n);

function trim(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.0+$|(\.\d*[1-9])0+$/, "$1");
}

/** Bytes in binary units (KiB, MiB, ...): 1536 -> "1.5 KiB". */
export function bytes(n: Maybe): string {
  if (!known(n)) return MISSING;
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = Math.abs(n);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${n < 0 ? "-" : ""}${unit ? trim(value, value < 10 ? 2 : 1) : String(value)} ${units[unit]}`;
}

/** A count with thousands separators; large ones shortened: 12_345_678 -> "12.3M". */
export function count(n: Maybe, { short = false }: { short?: boolean } = {}): string {
  if (!known(n)) return MISSING;
  if (!short || Math.abs(n) < 10_000) return Math.round(n).toLocaleString("en-US");
  const units: [number, string][] = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  const [size, unit] = units.find(([s]) => Math.abs(n) >= s) ?? [1, ""];
  return `${trim(n / size, 1)}${unit}`;
}

/** "1 record", "2 records", "1,000 records". */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}

/** A rate per second, with small rates kept visible: 0.05 -> "0.05 rec/s", 1234 -> "1,234 rec/s". */
export function rate(n: Maybe, unit = "rec/s"): string {
  if (!known(n)) return MISSING;
  if (n === 0) return `0 ${unit}`;
  const abs = Math.abs(n);
  const digits = abs >= 100 ? 0 : abs >= 1 ? 1 : abs >= 0.01 ? 2 : 3;
  const text = abs >= 100 ? Math.round(n).toLocaleString("en-US") : trim(n, digits);
  return `${text === "0" ? "<0.001" : text} ${unit}`;
}

/** Bytes per second: 2048 -> "2 KiB/s". */
export function byteRate(n: Maybe): string {
  return known(n) ? `${bytes(n)}/s` : MISSING;
}

/** A duration in milliseconds, in the largest units that read well: 604800000 -> "7 d", 90061000 -> "1 d 1 h". */
export function duration(ms: Maybe): string {
  if (!known(ms)) return MISSING;
  if (ms < 0) return MISSING;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${trim(ms / 1000, ms < 10_000 ? 1 : 0)} s`;
  const parts: [number, string][] = [[86_400_000, "d"], [3_600_000, "h"], [60_000, "min"], [1000, "s"]];
  const out: string[] = [];
  let left = ms;
  for (const [size, unit] of parts) {
    const whole = Math.floor(left / size);
    if (whole) out.push(`${whole} ${unit}`);
    left -= whole * size;
    if (out.length === 2) break;
  }
  return out.join(" ");
}

/** How long ago an ISO time was, "3 min ago"; the exact time belongs in a title. */
export function ago(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return MISSING;
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return MISSING;
  const ms = now - then;
  if (ms < 45_000) return "just now";
  return `${duration(Math.round(ms / 60_000) * 60_000)} ago`;
}

/** A broker's address for people: the API's ``address`` may already carry the port ("host:port"). */
export function hostPort(address: string | null | undefined, port?: number | null): string {
  if (!address) return MISSING;
  const bracketed = address.startsWith("[");
  const hasPort = bracketed ? /\]:\d+$/.test(address) : /:\d+$/.test(address) && address.split(":").length === 2;
  if (hasPort || port == null) return address;
  return `${address}:${port}`;
}

/** A topic or broker config's value in human units, by its name's suffix; raw when it is not a number. */
export function configValue(name: string, value: string | null | undefined): string {
  if (value == null) return MISSING;
  if (!/^-?\d+(\.\d+)?$/.test(value)) return value;
  const n = Number(value);
  if (n === -2 && /^local\.retention\./.test(name)) return `as ${name.replace(/^local\./, "")}`;
  if (n === -1 && /\.(ms|bytes)$|retention/.test(name)) return "unlimited";
  if (/\.ms$/.test(name)) return `${duration(n)}`;
  if (/\.bytes$|\.size$|buffer\.bytes$/.test(name)) return bytes(n);
  return value;
}

/** The raw value when the human one differs ("604800000"), for a title or a second line. */
export function configRaw(name: string, value: string | null | undefined): string | null {
  if (value == null) return null;
  const shown = configValue(name, value);
  return shown === value ? null : value;
}
