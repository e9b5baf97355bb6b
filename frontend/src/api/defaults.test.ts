// @vitest-environment node
// The console's create forms start from the API's defaults: each value in API_DEFAULTS is the field default the
// OpenAPI schema publishes (the schema is generated from the API, so the API is the one source of truth).
/// <reference types="node" />
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { API_DEFAULTS } from "./defaults";

const schema = readFileSync(resolve(process.cwd(), "../api_schema/openapi.yaml"), "utf8");

/** The `default:` of components.schemas.<component>.properties.<property>, read from the YAML as written. */
function schemaDefault(yaml: string, component: string, property: string): unknown {
  const lines = yaml.split("\n");
  const start = lines.indexOf(`    ${component}:`);
  if (start < 0) throw new Error(`no component ${component}`);
  const end = lines.findIndex((line, i) => i > start && /^ {4}\S/.test(line));
  const block = lines.slice(start + 1, end < 0 ? undefined : end);
  const at = block.indexOf(`        ${property}:`);
  if (at < 0) throw new Error(`no property ${component}.${property}`);
  const after = block.findIndex((line, i) => i > at && /^ {8}\S/.test(line));
  const own = block.slice(at + 1, after < 0 ? undefined : after);
  const line = own.find((l) => /^ {10}default: /.test(l));
  if (line === undefined) throw new Error(`${component}.${property} has no default`);
  const raw = line.replace(/^ {10}default: /, "").trim().replace(/^'(.*)'$/, "$1");
  return /^-?\d+$/.test(raw) ? Number(raw) : raw;
}

describe("create forms start from the API's defaults", () => {
  it.each([
    ["TopicCreateRequest", "partitions", API_DEFAULTS.topic.partitions],
    ["ClusterWriteRequest", "plan", API_DEFAULTS.cluster.plan],
    ["InvitationCreateRequest", "role", API_DEFAULTS.invitation.role],
    ["ServiceAccountWriteRequest", "role", API_DEFAULTS.serviceAccount.role],
  ])("%s.%s", (component, property, value) => {
    expect(schemaDefault(schema, component, property)).toBe(value);
  });

  it("reads a default as written, and says when there is none", () => {
    const yaml = ["    A:", "      properties:", "        n:", "          type: integer", "          default: 6",
      "        s:", "          default: ''", "        none:", "          type: string", "    B:", "      x: 1"].join("\n");
    expect(schemaDefault(yaml, "A", "n")).toBe(6);
    expect(schemaDefault(yaml, "A", "s")).toBe("");
    expect(() => schemaDefault(yaml, "A", "none")).toThrow("no default");
    expect(() => schemaDefault(yaml, "B", "n")).toThrow("no property");
  });
});
