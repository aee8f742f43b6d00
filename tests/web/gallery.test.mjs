// The web gallery in a real browser: Debian's Chromium, headless, driven by playwright-core against the
// real `h3 serve` on the built-in toy model (clips of 22 frames at 24 fps).  It submits a prompt and
// watches the progress to completion, opens the lightbox and steps frames (the readout moves by exactly
// one, and so does the picture), reloads the deep link and goes back and forward, approves in one tab and
// sees it in another, attaches images (drop and file picker, reorder, pin as the last frame) and submits
// them, attaches references (video, pasted image, sound), cancels a job in flight, searches and filters,
// edits and reruns, deletes, loads more on scroll, works behind an API key, takes screenshots, checks that
// no console error was printed and nothing was asked of anyone but the server, and shows the reconnecting
// banner while the server is away.  It waits for conditions (with time limits), never for fixed times.
//
//   H3=build/h3 node tests/web/gallery.test.mjs       (ctest web.gallery; screenshots in $H3_WEB_SHOTS)
// Skipped (77) when Chromium, tests/web/node_modules or a binary with the built UI is missing, unless
// H3_REQUIRE_WEB=1 (CI), where that fails.
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { CHROMIUM, CHROMIUM_ARGS, getJSON, removeDir, skip, startServer, tempDir, until } from "./h3web.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const H3 = process.env.H3;
if (!H3 || !existsSync(H3)) skip("H3 is not set to the h3 binary");
if (!existsSync(CHROMIUM)) skip(`no Chromium at ${CHROMIUM} (Debian: apt-get install chromium; tools/deps.sh)`);
if (!existsSync(join(here, "node_modules", "playwright-core"))) skip("tests/web/node_modules is missing (cd tests/web && npm ci)");
const { chromium } = await import("playwright-core");

const SHOTS = process.env.H3_WEB_SHOTS || join(here, "..", "..", "build", "web-shots");
const FRAMES = 22; // the toy's clips: 17·1 + 5 frames at 24 fps

let dir, srv, browser, context, page, page2;
const consoleErrors = [];
const outside = []; // requests the pages made to anywhere but the server
let outcome = "not reached"; // what the server said to keyframes

// the error test's own refusals: Chromium logs every 4xx answer of a fetch as a console error
let expectRefusals = false;
const refusals = [];
function watch(p, name) {
  p.on("console", (m) => {
    if (m.type() !== "error") return;
    const refused = /^Failed to load resource: the server responded with a status of (4\d\d)/.exec(m.text());
    if (expectRefusals && refused) refusals.push(Number(refused[1]));
    else consoleErrors.push(`${name}: ${m.text()}`);
  });
  p.on("pageerror", (e) => consoleErrors.push(`${name}: uncaught ${e.message}`));
}

const tile = (p, id) => p.locator(`article.tile[data-id="${id}"]`);
const attr = (loc, name) => loc.getAttribute(name);
const promptBox = (p) => p.getByRole("textbox", { name: "Prompt", exact: true });
const readout = (p) => p.locator("output.readout");
const frameOf = async (p) => Number(await readout(p).getAttribute("data-frame"));

/** The seed of a job as the server wrote it (as text: seeds run past 2^53). */
async function seedOf(id) {
  const t = await (await fetch(srv.base + "/api/ai/queue/" + id)).text();
  return /"seed":\s*"?(\d+)"?/.exec(t)[1];
}

/** Records every status and progress value each tile shows, from now on (a MutationObserver). */
function recordTiles(p) {
  return p.evaluate(() => {
    const seen = (window.__seen = {});
    const scan = () => {
      for (const t of document.querySelectorAll("article.tile")) {
        const s = (seen[t.dataset.id] ??= { status: [], progress: [], phase: [] });
        if (s.status.at(-1) !== t.dataset.status) s.status.push(t.dataset.status);
        const pr = Number(t.dataset.progress);
        if (s.progress.at(-1) !== pr) s.progress.push(pr);
        const ph = t.querySelector(".tile-phase")?.textContent;
        if (ph && s.phase.at(-1) !== ph) s.phase.push(ph);
      }
    };
    new MutationObserver(scan).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    scan();
  });
}

/** A hash of the picture the video element shows now (drawn into a canvas). */
function pictureHash(p) {
  return p.evaluate(() => {
    const v = document.querySelector("video.player-video");
    const c = document.createElement("canvas");
    c.width = v.videoWidth;
    c.height = v.videoHeight;
    const g = c.getContext("2d", { willReadFrequently: true });
    g.drawImage(v, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    let h = 2166136261;
    for (let i = 0; i < d.length; i += 7) h = Math.imul(h ^ d[i], 16777619) >>> 0;
    return h;
  });
}

/** Presses a key in the lightbox and waits for the readout to settle on `want` (1-based); returns every
 * value the readout showed meanwhile. */
async function stepTo(p, key, want) {
  await p.evaluate(() => {
    const o = document.querySelector("output.readout");
    window.__frames = [];
    window.__fobs?.disconnect();
    window.__fobs = new MutationObserver(() => window.__frames.push(Number(o.dataset.frame)));
    window.__fobs.observe(o, { attributes: true, childList: true, subtree: true, characterData: true });
  });
  await p.keyboard.press(key);
  await until(async () => (await frameOf(p)) === want, `readout ${want} / ${FRAMES} after ${key}`, 10000);
  // settled: the video paused and not seeking, and still on that frame after two more painted frames
  await until(() => p.evaluate(() => new Promise((res) => {
    const v = document.querySelector("video.player-video");
    requestAnimationFrame(() => requestAnimationFrame(() => res(v.paused && !v.seeking && v.readyState >= 2)));
  })), `the player to settle after ${key}`, 10000);
  assert.equal(await frameOf(p), want, `readout stays at ${want} after ${key}`);
  const seen = await p.evaluate(() => [...new Set(window.__frames)]);
  return seen;
}

/** Buttons, links and fields without an accessible name (its label, text, aria-label or title). */
function unnamed(p) {
  return p.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll("button, a[href], input, select, textarea, [role=button]")) {
      if (el.closest("[inert]")) continue;
      const labels = el.labels ? [...el.labels].map((l) => l.textContent).join(" ") : "";
      const name = (el.getAttribute("aria-label") || labels || el.textContent || el.title || "").trim();
      if (!name) bad.push(el.outerHTML.slice(0, 140));
    }
    return bad;
  });
}

/** A WAV of `secs` seconds of a 440 Hz tone (16-bit mono, 32 kHz). */
function wav(secs) {
  const rate = 32000, n = Math.round(rate * secs), b = Buffer.alloc(44 + 2 * n);
  b.write("RIFF", 0); b.writeUInt32LE(36 + 2 * n, 4); b.write("WAVEfmt ", 8); b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22); b.writeUInt32LE(rate, 24); b.writeUInt32LE(2 * rate, 28);
  b.writeUInt16LE(2, 32); b.writeUInt16LE(16, 34); b.write("data", 36); b.writeUInt32LE(2 * n, 40);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), 44 + 2 * i);
  return b;
}

async function submit(p, text) {
  await promptBox(p).fill(text);
  await promptBox(p).press("Control+Enter");
  return until(async () => {
    const first = p.locator("article.tile").first();
    return (await first.locator(".tile-prompt").textContent()) === text ? attr(first, "data-id") : null;
  }, `a tile for "${text}"`);
}

describe("the web gallery in Chromium", { concurrency: false }, () => {
  let jobId, seed;
  // the tab a person acts in is the one in front (a hidden tab gets no animation frames, which
  // Playwright's actionability checks wait for); the other one keeps updating in the background
  beforeEach(() => page?.bringToFront());

  before(async () => {
    dir = tempDir();
    srv = await startServer(H3, dir);
    const html = await (await fetch(srv.base + "/")).text();
    if (!html.includes('name="h3-ui" content="built"')) {
      await srv.stop();
      removeDir(dir);
      skip("this h3 was built without the web UI (cd web && npm ci && npm run build, then build h3 again)");
    }
    mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 720 }, deviceScaleFactor: 1 });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: srv.base });
    // the page loads nothing from outside the server (no CDN, no fonts from elsewhere)
    context.on("request", (r) => {
      const u = new URL(r.url());
      if (!["blob:", "data:"].includes(u.protocol) && u.origin !== srv.base) outside.push(r.url());
    });
    page = await context.newPage();
    watch(page, "tab 1");
  });

  after(async () => {
    await browser?.close();
    const rc = srv ? await srv.stop() : 0;
    removeDir(dir);
    // under the sanitizers a leak or a report makes the exit status non-zero
    if (rc !== 0) throw new Error(`h3 serve exited ${rc} at the end:\n${srv.log().slice(-4000)}`);
    console.log(`keyframes: ${outcome}`);
    console.log(`screenshots: ${SHOTS}`);
  });

  it("loads the empty gallery", async () => {
    await page.goto(srv.base + "/");
    await page.getByText("No clips yet").waitFor();
    assert.equal(await page.title(), "h3 gallery");
  });

  it("submits a prompt and shows its progress live until it completes", async () => {
    await recordTiles(page);
    jobId = await submit(page, "a red fox running through fresh snow at dawn");
    const t = tile(page, jobId);
    await until(async () => (await attr(t, "data-status")) === "completed", "the job to complete", 60000);
    const seen = await page.evaluate((id) => window.__seen[id], jobId);
    assert.ok(seen.status.includes("in_progress"), `the tile showed the job running: ${JSON.stringify(seen.status)}`);
    assert.equal(seen.status.at(-1), "completed");
    assert.ok(seen.progress.some((x) => x > 0 && x < 100), `progress shown between 0 and 100: ${seen.progress}`);
    assert.ok(seen.progress.length >= 3, `progress moved live (${seen.progress})`);
    for (let i = 1; i < seen.progress.length; i++)
      assert.ok(seen.progress[i] >= seen.progress[i - 1] || seen.progress[i] === 100, `progress never goes back: ${seen.progress}`);
    assert.ok(seen.phase.length >= 1, `a phase was named: ${seen.phase}`);
    // the poster, and the clip playing muted while hovered
    await until(() => t.locator("img.tile-poster").evaluate((im) => im.complete && im.naturalWidth > 0), "the poster");
    await t.locator(".tile-media").hover();
    const v = t.locator("video.tile-video");
    await until(() => v.evaluate((el) => !el.paused && el.currentTime > 0), "the clip playing on hover");
    assert.equal(await v.evaluate((el) => el.muted), true, "hover plays muted");
    await page.mouse.move(5, 300);
    await until(async () => (await v.count()) === 0, "the hover clip to go when the pointer leaves");
    seed = await seedOf(jobId);
  });

  it("opens the lightbox and steps exactly one frame at a time", async () => {
    await tile(page, jobId).locator(".tile-media").click();
    await until(() => page.url() === `${srv.base}/g/${jobId}`, "the lightbox URL");
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await dialog.waitFor();
    await until(() => page.locator("video.player-video").evaluate((v) => v.readyState >= 2), "the clip to load");
    assert.equal(Number(await readout(page).getAttribute("data-total")), FRAMES, "the readout's total");
    assert.equal(await dialog.locator("[data-seed]").getAttribute("data-seed"), seed, "the seed shown is the job's");
    await dialog.getByLabel("Timings").getByText("denoise").waitFor();
    // to the first frame (Shift+← is a second back, clamped at 0), then one at a time
    await stepTo(page, "Shift+ArrowLeft", 1);
    const h1 = await pictureHash(page);
    assert.deepEqual(await stepTo(page, "ArrowRight", 2), [2], "→ moves the readout from 1 to 2, nothing else");
    const h2 = await pictureHash(page);
    assert.deepEqual(await stepTo(page, "ArrowRight", 3), [3], "→ moves the readout from 2 to 3");
    const h3 = await pictureHash(page);
    assert.deepEqual(await stepTo(page, "ArrowLeft", 2), [2], "← moves it back from 3 to 2");
    assert.equal(await pictureHash(page), h2, "frame 2 again shows frame 2's picture");
    assert.ok(h1 !== h2 && h2 !== h3 && h1 !== h3, "each step shows another picture");
    const t = await page.locator("video.player-video").evaluate((v) => v.currentTime);
    assert.equal(Math.floor(t * 24), 1, `the video is at frame index 1 (currentTime ${t})`);
    assert.deepEqual(await stepTo(page, "Shift+ArrowRight", FRAMES), [FRAMES], "Shift+→: a second on, clamped at the last frame");
    assert.deepEqual(await stepTo(page, "ArrowRight", FRAMES), [], "→ on the last frame stays there");
    assert.deepEqual(await stepTo(page, "ArrowLeft", FRAMES - 1), [FRAMES - 1], "← from the last frame");
    assert.deepEqual(await stepTo(page, "Shift+ArrowLeft", 1), [1], "Shift+←: a second back, clamped at the first");
    assert.equal(await pictureHash(page), h1, "frame 1 shows frame 1's picture again");
    // the download link is the clip
    const dl = dialog.getByRole("link", { name: "Download" });
    assert.equal(await dl.getAttribute("href"), `/v1/videos/${jobId}/content`);
    assert.equal(await dl.getAttribute("download"), `${jobId}.mp4`);
    const r = await fetch(srv.base + (await dl.getAttribute("href")));
    assert.equal(r.headers.get("content-type"), "video/mp4", "the download is the MP4");
    assert.deepEqual(await unnamed(page), [], "every control of the lightbox has a name");
    // the buttons step too
    await dialog.getByRole("button", { name: "Next frame" }).click();
    await until(async () => (await frameOf(page)) === 2, "the Next frame button");
    // space plays and pauses; l loop; m mute
    const video = page.locator("video.player-video");
    await page.keyboard.press(" ");
    await until(() => video.evaluate((v) => !v.paused), "space to play");
    await page.keyboard.press(" ");
    await until(() => video.evaluate((v) => v.paused), "space to pause");
    const loop = await video.evaluate((v) => v.loop);
    await page.keyboard.press("l");
    await until(async () => (await video.evaluate((v) => v.loop)) === !loop, "l to toggle the loop");
    const muted = await video.evaluate((v) => v.muted);
    await page.keyboard.press("m");
    await until(async () => (await video.evaluate((v) => v.muted)) === !muted, "m to toggle the sound");
    await page.keyboard.press("m");
  });

  it("reloads the deep link; back and forward work", async () => {
    await page.reload();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await dialog.waitFor();
    await dialog.locator(".details-prompt").getByText("a red fox running").waitFor();
    await until(() => page.locator("video.player-video").evaluate((v) => v.readyState >= 2), "the clip after the reload");
    await page.goBack();
    await until(async () => new URL(page.url()).pathname === "/" && (await dialog.count()) === 0, "back: the gallery");
    await page.goForward();
    await until(() => dialog.isVisible(), "forward: the lightbox again");
    assert.equal(new URL(page.url()).pathname, `/g/${jobId}`);
    await page.keyboard.press("Escape");
    await until(async () => new URL(page.url()).pathname === "/" && (await dialog.count()) === 0, "Escape closes it");
  });

  it("approves in one tab and shows it in another", async () => {
    page2 = await context.newPage();
    watch(page2, "tab 2");
    await page2.goto(srv.base + "/");
    const other = tile(page2, jobId);
    await other.waitFor();
    assert.equal(await attr(other, "data-rating"), "");
    await tile(page, jobId).locator(".tile-media").click();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await dialog.getByRole("button", { name: "Approve" }).click();
    await until(async () => (await attr(other, "data-rating")) === "approved", "tab 2 to show the approval");
    await other.getByRole("img", { name: "Approved" }).waitFor();
    assert.equal((await getJSON(srv.base, "/api/ai/queue/" + jobId)).body.rating, "approved");
    // and back: reject from tab 2's lightbox, tab 1 follows
    await page2.bringToFront();
    await other.locator(".tile-media").click();
    await page2.getByRole("dialog", { name: "Clip" }).getByRole("button", { name: "Reject" }).click();
    await until(async () => (await dialog.getByRole("button", { name: "Reject" }).getAttribute("aria-pressed")) === "true",
      "tab 1's lightbox to show the rejection");
    await page2.getByRole("dialog", { name: "Clip" }).getByRole("button", { name: "Approve" }).click();
    await until(async () => (await dialog.getByRole("button", { name: "Approve" }).getAttribute("aria-pressed")) === "true",
      "tab 1 to show the approval again");
    await page2.keyboard.press("Escape");
    await page.bringToFront();
    await page.keyboard.press("Escape");
  });

  it("copies the prompt, edits and resubmits with the seed kept, reruns with a new seed", async () => {
    await tile(page, jobId).locator(".tile-media").click();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await dialog.getByRole("button", { name: "Copy prompt" }).click();
    await dialog.getByText("Prompt copied.").waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "a red fox running through fresh snow at dawn");
    await dialog.getByRole("button", { name: "Edit" }).click();
    await until(async () => (await dialog.count()) === 0, "Edit closes the lightbox");
    assert.equal(await promptBox(page).inputValue(), "a red fox running through fresh snow at dawn", "the prompt is in the bar");
    const params = page.getByRole("button", { name: /^Parameters:/ });
    assert.match(await params.getAttribute("aria-label"), new RegExp(`seed ${seed}`), "the seed is locked to the job's");
    const edited = await submit(page, "a red fox running through fresh snow at dawn, closer");
    await until(async () => (await attr(tile(page, edited), "data-status")) === "completed", "the edited job", 60000);
    assert.equal(await seedOf(edited), seed, "edit and resubmit keeps the seed");
    // rerun: the same request, a new seed; the lightbox follows the new job
    await tile(page, jobId).locator(".tile-media").click();
    await dialog.getByRole("button", { name: "Rerun" }).click();
    await until(() => !page.url().endsWith(jobId) && page.url().includes("/g/video_"), "the rerun's lightbox");
    const rerun = new URL(page.url()).pathname.split("/").pop();
    await until(async () => (await dialog.locator("[data-status]").first().getAttribute("data-status")) === "completed",
      "the rerun to complete in the lightbox", 60000);
    assert.notEqual(await seedOf(rerun), seed, "rerun draws a new seed");
    await page.keyboard.press("Escape");
    // the params popover: a locked seed goes back to random
    await params.click();
    const pop = page.getByRole("dialog", { name: "Parameters" });
    await pop.getByRole("button", { name: "Random" }).click();
    await page.keyboard.press("Escape");
    assert.match(await params.getAttribute("aria-label"), /random seed/);
  });

  it("attaches images (drop and picker), reorders, pins the last frame, submits: the keyframe job completes", async () => {
    // two pictures: the poster of the first clip (PNG), dropped; a second one through the file picker
    const png = Buffer.from(await (await fetch(`${srv.base}/api/files/videos/${jobId}.png`)).arrayBuffer());
    const dt = await page.evaluateHandle((b64) => {
      const bin = atob(b64);
      const d = new DataTransfer();
      d.items.add(new File([Uint8Array.from(bin, (c) => c.charCodeAt(0))], "dropped.png", { type: "image/png" }));
      return d;
    }, png.toString("base64"));
    for (const type of ["dragenter", "dragover", "drop"]) await page.dispatchEvent("form.composer", type, { dataTransfer: dt });
    await page.locator('input[type="file"]').setInputFiles({ name: "picked.png", mimeType: "image/png", buffer: png });
    const chips = page.locator("li.chip");
    await until(async () => (await chips.count()) === 2 &&
      (await chips.evaluateAll((cs) => cs.every((c) => c.dataset.state === "ready"))), "two uploaded chips");
    const names = () => chips.locator(".chip-name").allTextContents();
    assert.deepEqual(await names(), ["dropped.png", "picked.png"]);
    assert.ok(await chips.first().locator(".chip-thumb img").evaluate((im) => im.complete && im.naturalWidth > 0),
      "the chip shows a thumbnail");
    // reorder by dragging: the picked one first
    await chips.nth(1).dragTo(chips.nth(0));
    await until(async () => JSON.stringify(await names()) === '["picked.png","dropped.png"]', "the chips reordered by dragging");
    // pin the dropped one as the last frame
    await page.getByRole("button", { name: "Pin dropped.png as the last frame" }).click();
    await page.locator(".plan").getByText("fl2va · first frame + last frame").waitFor();
    const [pickedId, droppedId] = await chips.evaluateAll((cs) => cs.map((c) => c.dataset.uploadId));
    await promptBox(page).fill("from this picture to that one");
    await promptBox(page).press("Control+Enter");
    // the server either refuses keyframes (said where it happens: on the job's tile, or at once in the prompt
    // bar) or, once they land, runs the job to completion with its reference thumbnails on the tile
    const result = await until(async () => {
      const bar = page.locator("form.composer [role=alert]");
      if (await bar.count()) return { where: "prompt bar", text: await bar.textContent() };
      const t = page.locator("article.tile").first();
      if ((await t.locator(".tile-prompt").textContent()) !== "from this picture to that one") return null;
      const st = await attr(t, "data-status");
      return st === "failed" || st === "completed" ? { where: "tile", status: st, id: await attr(t, "data-id") } : null;
    }, "the server's answer to the keyframes", 60000);
    // keyframes run (fl2va on the toy): the job completes; a refusal or a failure shows where it happens
    // (asserted there) and fails the test with the server's words
    const job = result.where === "tile" ? (await getJSON(srv.base, "/api/ai/queue/" + result.id)).body : null;
    if (result.where === "prompt bar") outcome = `refused at submit, shown in the prompt bar: "${result.text}"`;
    else if (result.status === "failed") {
      const shown = await tile(page, result.id).locator(".tile-error").textContent();
      assert.equal(shown, job.error.message, "the tile shows the server's error");
      outcome = `the job failed (${job.error.code}); the tile shows the server's error: "${shown}"`;
    }
    assert.equal(result.status, "completed", `the keyframe job completes: ${outcome}`);
    assert.deepEqual(job.inputs, { first_frame: pickedId, last_frame: droppedId },
      "the first chip is the first frame, the pinned one the last");
    assert.equal(job.input_media.map((m) => m.role).join(","), "first_frame,last_frame");
    const t = tile(page, result.id);
    await until(async () => (await t.locator(".tile-refs img").count()) === 2, "the keyframe thumbnails on the tile");
    outcome = "the job completed; its tile shows both keyframe thumbnails";
    // the lightbox plays it; its rail switches to a keyframe and back
    await t.locator(".tile-media").click();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await until(() => page.locator("video.player-video").evaluate((v) => v.readyState >= 2), "the keyframe clip to load");
    await dialog.getByRole("button", { name: "Reference 1: first frame" }).click();
    await until(() => dialog.locator("img.viewer-img").evaluate((im) => im.complete && im.naturalWidth > 0), "the keyframe in the viewer");
    await dialog.getByRole("button", { name: "Reference 2: last frame" }).click();
    await until(() => dialog.locator("img.viewer-img").evaluate((im) => im.complete && im.naturalWidth > 0), "the last frame in the viewer");
    await dialog.getByRole("button", { name: "Result" }).click();
    await until(() => page.locator("video.player-video").evaluate((v) => v.readyState >= 2), "the result in the viewer again");
    await page.keyboard.press("Escape");
    console.log(`keyframes: ${outcome}`);
  });

  it("switches to references for video and audio (pasted, picked), with the parameters of the popover", async () => {
    const mp4 = Buffer.from(await (await fetch(`${srv.base}/api/files/videos/${jobId}.mp4`)).arrayBuffer());
    const png = Buffer.from(await (await fetch(`${srv.base}/api/files/videos/${jobId}.png`)).arrayBuffer());
    await page.locator('input[type="file"]').setInputFiles({ name: "clip.mp4", mimeType: "video/mp4", buffer: mp4 });
    await page.locator(".plan").getByText("Switched to ref2va").waitFor();
    // an image pasted into the prompt, then a sound picked
    await promptBox(page).focus();
    await page.evaluate((b64) => {
      const bin = atob(b64);
      const d = new DataTransfer();
      d.items.add(new File([Uint8Array.from(bin, (c) => c.charCodeAt(0))], "pasted.png", { type: "image/png" }));
      document.querySelector("textarea.prompt").dispatchEvent(new ClipboardEvent("paste", { clipboardData: d, bubbles: true, cancelable: true }));
    }, png.toString("base64"));
    await page.locator('input[type="file"]').setInputFiles({ name: "tone.wav", mimeType: "audio/wav", buffer: wav(1) });
    const chips = page.locator("li.chip");
    await until(async () => (await chips.count()) === 3 &&
      (await chips.evaluateAll((cs) => cs.every((c) => c.dataset.state === "ready"))), "three uploaded chips");
    assert.deepEqual(await chips.evaluateAll((cs) => cs.map((c) => c.dataset.kind)), ["video", "image", "audio"]);
    assert.ok(await chips.first().locator(".chip-thumb img").evaluate((im) => im.complete && im.naturalWidth > 0),
      "the video chip shows the server's poster");
    await page.locator(".plan").getByText("ref2va · 3 references, read in this order").waitFor();
    const ids = await chips.evaluateAll((cs) => cs.map((c) => c.dataset.uploadId));
    // the popover: 39 frames (17·2 + 5), 512×512, no audio; its partition shows the switch
    const params = page.getByRole("button", { name: /^Parameters:/ });
    await params.click();
    const pop = page.getByRole("dialog", { name: "Parameters" });
    assert.equal(await pop.getByLabel("Partition").inputValue(), "ref2va");
    await pop.getByRole("slider", { name: "Length" }).fill("2");
    assert.equal(await pop.getByTestId("length-value").textContent(), "1.63 s · 39 frames");
    await pop.getByRole("button", { name: "512×512" }).click();
    await pop.getByLabel("Audio").uncheck();
    assert.deepEqual(await unnamed(page), [], "every control of the bar and the popover has a name");
    await page.keyboard.press("Escape");
    const id = await submit(page, "in the manner of these references\nsecond line of the prompt");
    const t = tile(page, id);
    await until(async () => ["failed", "completed"].includes(await attr(t, "data-status")), "the references' job to end", 60000);
    const job = (await getJSON(srv.base, "/api/ai/queue/" + id)).body;
    assert.equal(job.prompt, "in the manner of these references\nsecond line of the prompt", "a multi-line prompt");
    assert.deepEqual(job.inputs.references, [{ id: ids[0], type: "video" }, { id: ids[1], type: "image" }, { id: ids[2], type: "audio" }],
      "the references in the chips' order");
    assert.equal(job.num_frames, 39);
    assert.equal(job.size, "512x512");
    assert.equal(job.params.audio, false);
    assert.equal(job.params.partition, "ref2va");
    assert.equal(await t.locator(".tile-refs .ref-thumb").count() >= 2, true, "the tile shows the references");
    if (job.status === "failed") assert.equal(await t.locator(".tile-error").textContent(), job.error.message);
    console.log(`references: the job ${job.status}${job.error ? ` (${job.error.message})` : ""}`);
    // back to the defaults for what follows
    await params.click();
    await pop.getByRole("button", { name: "Length: the server's default" }).click();
    await pop.getByRole("group", { name: "Size" }).getByRole("button", { name: "default" }).click();
    await pop.getByLabel("Audio").check();
    await pop.getByLabel("Partition").selectOption("auto");
    await page.keyboard.press("Escape");
  });

  it("cancels a job in flight", async () => {
    const params = page.getByRole("button", { name: /^Parameters:/ });
    await params.click();
    await page.getByRole("dialog", { name: "Parameters" }).getByLabel("Steps").fill("5000");
    await page.keyboard.press("Escape");
    assert.match(await params.getAttribute("aria-label"), /5000 steps/);
    const id = await submit(page, "a very long take of waves");
    const t = tile(page, id);
    await until(async () => (await attr(t, "data-status")) === "in_progress" && Number(await attr(t, "data-progress")) > 5,
      "the long job to be denoising", 60000);
    // the gallery with every kind of tile: running, failed (keyframes), completed, approved
    await page.mouse.move(5, 300);
    await page.screenshot({ path: join(SHOTS, "gallery.png") });
    await page.screenshot({ path: join(SHOTS, "gallery.jpg"), type: "jpeg", quality: 85 }); // the README's picture
    await t.getByRole("button", { name: "Cancel job" }).click();
    await until(async () => (await attr(t, "data-status")) === "cancelled", "the tile to show it cancelled", 30000);
    await t.getByText("Cancelled").first().waitFor();
    const job = (await getJSON(srv.base, "/api/ai/queue/" + id)).body;
    assert.equal(job.status, "cancelled");
    assert.ok(job.step < job.total_steps, `stopped early (step ${job.step} of ${job.total_steps})`);
    await params.click();
    await page.getByRole("dialog", { name: "Parameters" }).getByLabel("Steps").fill("");
    await page.keyboard.press("Escape");
  });

  it("searches prompts (Ctrl+K) and filters by status", async () => {
    await page.keyboard.press("Control+k");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Search prompts");
    await page.keyboard.type("closer");
    const tiles = page.locator("article.tile");
    await until(async () => (await tiles.count()) === 1, "one tile matching 'closer'");
    assert.match(await tiles.first().locator(".tile-prompt").textContent(), /closer/);
    await page.keyboard.press("Escape");
    await until(async () => (await tiles.count()) >= 5, "every tile again");
    await page.getByRole("group", { name: "Status filter" }).getByRole("button", { name: "Cancelled" }).click();
    await until(async () => (await tiles.count()) === 1 && (await attr(tiles.first(), "data-status")) === "cancelled",
      "the cancelled filter");
    await page.getByRole("group", { name: "Status filter" }).getByRole("button", { name: "Completed" }).click();
    await until(async () => (await tiles.count()) >= 3 &&
      (await tiles.evaluateAll((ts) => ts.every((t) => t.dataset.status === "completed"))), "the completed filter");
    await page.getByRole("group", { name: "Status filter" }).getByRole("button", { name: "All" }).click();
    await until(async () => (await tiles.count()) >= 5, "all again");
  });

  it("shows the server's errors where they happen", async () => {
    expectRefusals = true;
    // an upload that is not media: refused on its chip
    await page.locator('input[type="file"]').setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("not a picture\n") });
    const chip = page.locator("li.chip");
    await until(async () => (await attr(chip, "data-state")) === "error", "the chip to show the refusal");
    const refusal = await chip.locator(".chip-error").textContent();
    assert.match(refusal, /notes|media|format|image|video|audio/i, `the server's reason on the chip: ${refusal}`);
    await promptBox(page).fill("with a text file");
    await promptBox(page).press("Control+Enter");
    await page.locator("form.composer [role=alert]").getByText("Remove the attachments the server refused").waitFor();
    await page.getByRole("button", { name: "Remove notes.txt" }).click();
    // a request the server refuses (1 step): its message under the prompt bar, nothing queued
    const before = (await getJSON(srv.base, "/api/ai/queue")).body.total;
    const params = page.getByRole("button", { name: /^Parameters:/ });
    await params.click();
    await page.getByRole("dialog", { name: "Parameters" }).getByLabel("Steps").fill("1");
    await page.keyboard.press("Escape");
    await promptBox(page).press("Control+Enter");
    const alert = page.locator("form.composer [role=alert]");
    await until(async () => /step/i.test((await alert.textContent()) ?? ""), "the server's refusal under the prompt bar");
    assert.equal((await getJSON(srv.base, "/api/ai/queue")).body.total, before, "nothing was queued");
    await params.click();
    await page.getByRole("dialog", { name: "Parameters" }).getByLabel("Steps").fill("");
    await page.keyboard.press("Escape");
    await promptBox(page).fill("");
    expectRefusals = false;
    assert.deepEqual(refusals, [415, 400], "the browser saw exactly the two refusals");
  });

  it("saves a screenshot of the lightbox", async () => {
    await tile(page, jobId).locator(".tile-media").click();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await until(() => page.locator("video.player-video").evaluate((v) => v.readyState >= 2), "the clip");
    await stepTo(page, "Shift+ArrowLeft", 1);
    await stepTo(page, "ArrowRight", 2);
    await stepTo(page, "ArrowRight", 3);
    await dialog.getByLabel("Timings").waitFor();
    await page.screenshot({ path: join(SHOTS, "lightbox.png") });
    await page.keyboard.press("Escape");
    assert.ok(existsSync(join(SHOTS, "gallery.png")) && existsSync(join(SHOTS, "lightbox.png")));
  });

  it("deletes a clip (confirmed), in every tab", async () => {
    const victim = await page.locator('article.tile[data-status="completed"]').nth(1).getAttribute("data-id");
    assert.notEqual(victim, jobId);
    await tile(page2, victim).waitFor();
    await tile(page, victim).locator(".tile-media").click();
    const dialog = page.getByRole("dialog", { name: "Clip" });
    await dialog.getByRole("button", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Confirm delete" }).click();
    await until(async () => (await dialog.count()) === 0, "the lightbox to close after the delete");
    await until(async () => (await tile(page, victim).count()) === 0, "the tile gone");
    await until(async () => (await tile(page2, victim).count()) === 0, "the tile gone in the other tab too");
    assert.equal((await getJSON(srv.base, "/api/ai/queue/" + victim)).status, 404);
  });

  it("opens a clip from the keyboard", async () => {
    await page.locator("input[type=search]").focus();
    const onTile = () => page.evaluate(() => document.activeElement?.classList.contains("tile-media"));
    for (let i = 0; i < 30 && !(await onTile()); i++) await page.keyboard.press("Tab");
    assert.ok(await onTile(), "Tab reaches the clips");
    await page.keyboard.press("Enter");
    await page.getByRole("dialog", { name: "Clip" }).waitFor();
    await page.keyboard.press("Escape");
    await until(async () => (await page.getByRole("dialog", { name: "Clip" }).count()) === 0, "Escape");
  });

  it("loads more clips on scroll", async () => {
    const made = [];
    for (let i = 0; i < 30; i++) {
      const r = await fetch(srv.base + "/api/ai/queue", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ prompt: `filler ${i}`, steps: 2 }) });
      made.push((await r.json()).id);
    }
    for (const id of made) await fetch(srv.base + "/api/ai/queue/" + id, { method: "DELETE" });
    // every filler settled (a running one is cancelled within a step), and their events shown
    await until(async () => (await getJSON(srv.base, "/api/ai/queue?status=queued,in_progress&limit=1")).body.total === 0,
      "the fillers to be cancelled");
    const want = (await getJSON(srv.base, "/api/ai/queue?status=cancelled&limit=1")).body.total;
    assert.ok(want > 24, `more cancelled clips (${want}) than a page`);
    const tiles = page.locator("article.tile");
    const count = async () => `${await tiles.count()} tiles, scrolled to ${await page.evaluate(() => scrollY)}`;
    await until(async () => (await page.locator('article.tile[data-status="queued"], article.tile[data-status="in_progress"]').count()) === 0,
      "the fillers' tiles to show them cancelled");
    const pages = [];
    const onResponse = (r) => {
      const u = new URL(r.url());
      if (u.pathname === "/api/ai/queue" && u.searchParams.get("status") === "cancelled") pages.push(Number(u.searchParams.get("offset")));
    };
    page.on("response", onResponse);
    await page.getByRole("group", { name: "Status filter" }).getByRole("button", { name: "Cancelled" }).click();
    // the filter starts at the top with its first page; the rest comes on scrolling
    await until(async () => (await tiles.count()) === 24 && (await tiles.evaluateAll((ts) => ts.every((t) => t.dataset.status === "cancelled"))),
      async () => `the first page (24 cancelled): ${await count()}`);
    assert.deepEqual(pages, [0], "one page asked for before scrolling");
    await until(async () => {
      await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
      return (await tiles.count()) === want;
    }, async () => `every cancelled clip (${want}) after scrolling: ${await count()}`);
    page.off("response", onResponse);
    assert.equal(pages[0], 0);
    assert.ok(pages.includes(24), `the next page asked for from offset 24: ${pages}`);
    const ids = await tiles.evaluateAll((ts) => ts.map((t) => t.dataset.id));
    assert.equal(new Set(ids).size, ids.length, "no clip twice");
    await page.getByRole("group", { name: "Status filter" }).getByRole("button", { name: "All" }).click();
    await page.evaluate(() => window.scrollTo(0, 0));
  });

  it("works behind an API key: refused until it is set in Settings, then the media load with it", async () => {
    const KEY = "sekret-key-of-the-test";
    const dir2 = tempDir();
    const srv2 = await startServer(H3, dir2, 0, ["--api-key", KEY]);
    const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    try {
      const auth = { Authorization: "Bearer " + KEY };
      const made = await (await fetch(srv2.base + "/api/ai/queue", { method: "POST",
        headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "behind a key" }) })).json();
      await until(async () => (await (await fetch(srv2.base + "/api/ai/queue/" + made.id, { headers: auth })).json()).status === "completed",
        "the keyed server's job", 60000);
      const p3 = await ctx2.newPage();
      const refused = [];
      p3.on("console", (m) => {
        if (m.type() !== "error") return;
        if (/status of 401/.test(m.text())) refused.push(m.text());
        else consoleErrors.push(`keyed tab: ${m.text()}`);
      });
      p3.on("pageerror", (e) => consoleErrors.push(`keyed tab: uncaught ${e.message}`));
      await p3.goto(srv2.base + "/");
      await p3.getByRole("alert").filter({ hasText: "The server refused the API key" }).waitFor();
      await p3.getByRole("alert").filter({ hasText: "This server needs an API key" }).waitFor();
      assert.ok(refused.length >= 1, "the browser saw the 401s");
      await p3.getByRole("button", { name: "Settings" }).click();
      await p3.getByRole("dialog", { name: "Settings" }).getByLabel("API key of this server").fill(KEY);
      await p3.getByRole("dialog", { name: "Settings" }).getByRole("button", { name: "Save" }).click();
      const t = p3.locator(`article.tile[data-id="${made.id}"]`);
      await until(async () => (await attr(t, "data-status")) === "completed", "the job listed with the key");
      assert.equal(await p3.getByRole("alert").count(), 0, "no refusal once the key is set");
      // media elements cannot send the key: the poster and the clip come as blobs fetched with it
      const poster = t.locator("img.tile-poster");
      await until(() => poster.evaluate((im) => im.complete && im.naturalWidth > 0), "the poster through the key");
      assert.match(await poster.getAttribute("src"), /^blob:/);
      await t.locator(".tile-media").click();
      await until(() => p3.locator("video.player-video").evaluate((v) => v.readyState >= 2 && v.src.startsWith("blob:")),
        "the clip through the key in the lightbox");
      assert.equal(Number(await readout(p3).getAttribute("data-total")), FRAMES);
      // live: a job made elsewhere shows up through the keyed event stream
      const next = await (await fetch(srv2.base + "/api/ai/queue", { method: "POST",
        headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "a second one behind the key" }) })).json();
      await p3.keyboard.press("Escape");
      await p3.locator(`article.tile[data-id="${next.id}"]`).waitFor();
    } finally {
      await ctx2.close();
      const rc = await srv2.stop();
      removeDir(dir2);
      assert.equal(rc, 0, `the keyed server stops cleanly:\n${srv2.log().slice(-4000)}`);
    }
  });

  it("printed no console error, and asked nothing of anyone but the server", () => {
    assert.deepEqual(consoleErrors, []);
    assert.deepEqual(outside, []);
  });

  it("shows a banner while the event stream reconnects", async () => {
    const port = srv.port;
    const tiles = page.locator("article.tile");
    // every clip shown (scrolled down page by page), more than one page
    const shown = (await getJSON(srv.base, "/api/ai/queue?limit=1")).body.total;
    assert.ok(shown > 24, `more than a page of clips (${shown})`);
    await until(async () => {
      await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
      return (await tiles.count()) === shown;
    }, `every clip (${shown}) shown`);
    const rc = await srv.stop();
    assert.equal(rc, 0, `the server stops cleanly:\n${srv.log().slice(-4000)}`);
    const banner = page.getByRole("status").filter({ hasText: "Reconnecting to the server" });
    await banner.waitFor({ timeout: 15000 });
    // once back, the gallery lists again what it showed (the first `shown` clips), so the place stays
    const relisted = page.waitForResponse((r) => {
      const u = new URL(r.url());
      return u.pathname === "/api/ai/queue" && u.searchParams.get("offset") === "0" && r.status() === 200;
    }, { timeout: 30000 });
    srv = await startServer(H3, dir, port);
    const r = await relisted;
    assert.equal(new URL(r.url()).searchParams.get("limit"), String(shown), "the resync asks for every clip shown");
    await until(async () => (await banner.count()) === 0, "the banner to go once the server is back", 20000);
    await until(async () => (await tiles.count()) === shown, `the ${shown} clips after the resync`);
    await tile(page, jobId).waitFor();
    // live again: a new job shows up without a reload
    const id = await submit(page, "after the restart");
    await until(async () => (await attr(tile(page, id), "data-status")) === "completed", "a job after the restart", 60000);
  });
});
