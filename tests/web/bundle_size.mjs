// The built web UI's JavaScript stays under 300 KB gzipped (every .js of web/dist/assets, gzipped here at
// level 9, 300,000 bytes at most), and index.html loads only files that are there.
//   node tests/web/bundle_size.mjs      (ctest web.bundle_size; H3_WEB_DIST overrides web/dist)
// Skipped (77) when the UI was not built, unless H3_REQUIRE_WEB=1 (CI).
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { skip } from "./h3web.mjs";

const LIMIT = 300000;
const here = dirname(fileURLToPath(import.meta.url));
const dist = process.env.H3_WEB_DIST || join(here, "..", "..", "web", "dist");
if (!existsSync(join(dist, "index.html"))) skip(`no built UI at ${dist} (cd web && npm ci && npm run build)`);

let passed = 0, failed = 0;
const check = (ok, what) => {
  console.log((ok ? "ok   " : "FAIL ") + what);
  ok ? passed++ : failed++;
};
const assets = join(dist, "assets");
const js = readdirSync(assets).filter((f) => f.endsWith(".js"));
let raw = 0, gz = 0;
for (const f of js) {
  const b = readFileSync(join(assets, f));
  raw += b.length;
  gz += gzipSync(b, { level: 9 }).length;
}
check(js.length >= 1, `JavaScript files: ${js.join(", ")}`);
check(gz <= LIMIT, `JavaScript ${raw} bytes, ${gz} bytes gzipped (limit ${LIMIT})`);
const html = readFileSync(join(dist, "index.html"), "utf8");
const refs = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
check(refs.length >= 2, `index.html loads ${refs.join(", ")}`);
check(refs.every((r) => existsSync(join(dist, r))), "every file index.html loads is built");
check(js.every((f) => existsSync(join(assets, f + ".gz"))), "every script has its .gz beside it (h3 serve sends it)");
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
