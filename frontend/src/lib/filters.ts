// The console's filter fields as one JMESPath expression for the tail's server-side filter (see
// controlplane/kafkarest/tail/filters.py: a record has key, value, key_json, value_json and headers).

export interface FilterFields {
  key?: string; // substring of the key
  value?: string; // substring of the value
  header?: string; // "name=value" (or "name" for presence)
  jsonPath?: string; // a dotted path into the JSON value, e.g. "order.status"
  jsonValue?: string; // compared as JSON when it parses (5, true, "x"), else as a string
  expression?: string; // raw JMESPath, and-ed with the rest
}

export function rawString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

function quotedPath(path: string): string {
  return path.split(".").filter(Boolean).map((part) => `"${part.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`).join(".");
}

function jsonLiteral(text: string): string {
  let literal: string;
  try {
    literal = JSON.stringify(JSON.parse(text));
  } catch {
    literal = JSON.stringify(text);
  }
  return "`" + literal.replace(/`/g, "\\`") + "`";
}

export function buildFilter(fields: FilterFields): string | undefined {
  const parts: string[] = [];
  if (fields.key) parts.push(`contains(key, ${rawString(fields.key)})`);
  if (fields.value) parts.push(`contains(value, ${rawString(fields.value)})`);
  if (fields.header) {
    const at = fields.header.indexOf("=");
    const name = at < 0 ? fields.header : fields.header.slice(0, at);
    const headerPath = `headers."${name.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
    parts.push(at < 0 ? `${headerPath} != null` : `${headerPath} == ${rawString(fields.header.slice(at + 1))}`);
  }
  if (fields.jsonPath) parts.push(`value_json.${quotedPath(fields.jsonPath)} == ${jsonLiteral(fields.jsonValue ?? "")}`);
  if (fields.expression?.trim()) parts.push(`(${fields.expression.trim()})`);
  return parts.length ? parts.join(" && ") : undefined;
}
