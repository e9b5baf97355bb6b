// A line diff of two schema texts (longest common subsequence), shown between two versions of a subject. Schemas
// are small (tens to hundreds of lines), so the quadratic table is cheap and no dependency is needed.

export type DiffLine = { op: " " | "+" | "-"; text: string };

/** ``text`` laid out one field per line when it is JSON (Avro and JSON Schema are often stored on one line), so
 * the diff shows what changed rather than one long replaced line; Protobuf (or anything not JSON) as written. */
export function layout(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The edit from ``before`` to ``after``, line by line: kept (" "), removed ("-") and added ("+") lines in order,
 * removals before additions where lines were replaced. */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before === "" ? [] : before.split("\n");
  const b = after === "" ? [] : after.split("\n");
  // common[i][j]: the length of the longest common subsequence of a[i:] and b[j:].
  const common = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: " ", text: a[i] });
      i++;
      j++;
    } else if (common[i + 1][j] >= common[i][j + 1]) out.push({ op: "-", text: a[i++] });
    else out.push({ op: "+", text: b[j++] });
  }
  while (i < a.length) out.push({ op: "-", text: a[i++] });
  while (j < b.length) out.push({ op: "+", text: b[j++] });
  return out;
}

/** How many lines were added and removed: the diff's summary line. */
export function diffStats(lines: DiffLine[]): { added: number; removed: number } {
  return { added: lines.filter((l) => l.op === "+").length, removed: lines.filter((l) => l.op === "-").length };
}
