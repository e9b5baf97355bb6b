// Fails when src/api/schema.d.ts is not what openapi-typescript makes of api_schema/openapi.yaml now
// (run `npm run gen:api` after `make schema`), so the console cannot drift from the API.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const here = fileURLToPath(new URL("..", import.meta.url));
const schema = new URL("../api_schema/openapi.yaml", new URL(`file://${here}`));
const committed = readFileSync(`${here}src/api/schema.d.ts`, "utf8");
const fresh = astToString(await openapiTS(schema));
const strip = (text) => text.replace(/^\/\*\*[\s\S]*?\*\/\s*/, "").trim();
if (strip(committed) !== strip(fresh)) {
  console.error("src/api/schema.d.ts is stale: run `npm run gen:api` in frontend/ (after `make schema`).");
  process.exit(1);
}
console.log("src/api/schema.d.ts matches api_schema/openapi.yaml");
