// The official OpenAI client (npm `openai`) against h3 serve, unchanged: pointed at its base URL with
// its key.  Create (multipart, as the client sends it), poll, download the content and the thumbnail,
// list with the client's own cursor paging, delete.  Prints one JSON line of what it saw.
import OpenAI from "openai";

const base = process.env.H3_BASE_URL, key = process.env.H3_KEY || "any-key";
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 120000 });
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const created = [];
for (const prompt of ["a red fox in the snow", "a lighthouse at night"]) {
  const v = await client.videos.create({ prompt, model: "sora-2", seconds: "1", size: "128x128" });
  created.push(v);
}
out.created = created.map((v) => ({ id: v.id, object: v.object, status: v.status, size: v.size, seconds: v.seconds }));
let v = created[0];
const t0 = Date.now();
while (v.status !== "completed" && v.status !== "failed" && Date.now() - t0 < 120000) {
  await sleep(200);
  v = await client.videos.retrieve(v.id);
}
out.final = { id: v.id, status: v.status, progress: v.progress, error: v.error };
const content = await client.videos.downloadContent(v.id);
const bytes = Buffer.from(await content.arrayBuffer());
out.content = { type: content.headers.get("content-type"), bytes: bytes.length, ftyp: bytes.subarray(4, 8).toString() };
const thumb = Buffer.from(await (await client.videos.downloadContent(v.id, { variant: "thumbnail" })).arrayBuffer());
out.thumbnail = { png: thumb.subarray(1, 4).toString(), bytes: thumb.length };
if (process.env.H3_MP4_OUT) (await import("node:fs")).writeFileSync(process.env.H3_MP4_OUT, bytes);
// the list, paged by the client (limit 1: it follows has_more / last_id by itself)
const ids = [];
for await (const item of client.videos.list({ limit: 1 })) ids.push(item.id);
out.listed = ids;
const page = await client.videos.list({ limit: 1, order: "asc" });
out.first_page = { ids: page.data.map((x) => x.id), has_more: page.has_more };
// errors come back as the client's typed errors
try {
  await client.videos.retrieve("video_nope");
  out.not_found = "no error";
} catch (e) {
  out.not_found = { status: e.status, name: e.constructor.name };
}
const second = created[1];
for (let i = 0; i < 600; i++) {
  const s = await client.videos.retrieve(second.id);
  if (s.status === "completed" || s.status === "failed") break;
  await sleep(200);
}
const del = await client.videos.delete(created[1].id);
out.deleted = del;
console.log(JSON.stringify(out));
