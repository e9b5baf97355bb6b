// The JavaScript the first page loads (index.html's entry and its static imports), gzipped, against the
// 300 KB budget; lazily loaded chunks (charts) are listed apart. Exits 1 over budget. Writes dist/bundle-size.json.
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const BUDGET = 300 * 1024;
const dist = new URL("../dist/", import.meta.url);
const manifest = JSON.parse(readFileSync(new URL(".vite/manifest.json", dist), "utf8"));
const entry = Object.values(manifest).find((chunk) => chunk.isEntry);
const seen = new Set();
const walk = (key) => {
  if (seen.has(key)) return;
  seen.add(key);
  for (const child of manifest[key].imports ?? []) walk(child);
};
walk(Object.keys(manifest).find((key) => manifest[key] === entry));
const gz = (file) => gzipSync(readFileSync(new URL(file, dist))).length;
const first = [...seen].map((key) => ({ file: manifest[key].file, gzip: gz(manifest[key].file) }));
const firstTotal = first.reduce((sum, item) => sum + item.gzip, 0);
const lazy = Object.values(manifest)
  .filter((chunk) => chunk.file.endsWith(".js") && !first.some((f) => f.file === chunk.file))
  .map((chunk) => ({ file: chunk.file, gzip: gz(chunk.file) }));
writeFileSync(new URL("bundle-size.json", dist), JSON.stringify({ budget: BUDGET, firstPage: firstTotal, first, lazy }, null, 2));
console.log(`first-page JS: ${(firstTotal / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB); lazy chunks: ${lazy
  .map((c) => `${c.file} ${(c.gzip / 1024).toFixed(1)} KB`).join(", ")}`);
if (firstTotal > BUDGET) {
  console.error("over the first-page budget");
  process.exit(1);
}
