// Helpers of the web gallery's browser test: the real `h3 serve` on the built-in toy model in a temporary
// folder, Debian's Chromium through playwright-core, and waiting for what the page shows.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve as resolvePath } from "node:path";

export const REQUIRED = process.env.H3_REQUIRE_WEB === "1"; // CI: nothing may be missing
export const CHROMIUM = process.env.H3_CHROMIUM || "/usr/bin/chromium";

/** Ends the test as skipped (77), or as failed where everything is required. */
export function skip(why) {
  console.log((REQUIRED ? "FAIL (H3_REQUIRE_WEB=1): " : "skipped: ") + why);
  process.exit(REQUIRED ? 1 : 77);
}

/** `h3 serve --port PORT` (0: any free one) on the toy, in `dir`; resolves once it listens. */
export function startServer(h3, dir, port = 0, args = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(resolvePath(h3), ["serve", "--port", String(port), "--outputs", join(dir, "out"), ...args], {
      cwd: dir,
      env: { ...process.env, H3_TOY_DIR: join(dir, "toy") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "", err = "";
    proc.stderr.on("data", (d) => { err += d; });
    proc.stdout.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m && !proc.port) {
        proc.port = Number(m[1]);
        resolve({
          proc,
          port: proc.port,
          base: "http://127.0.0.1:" + proc.port,
          log: () => err,
          stop: () => new Promise((res) => {
            if (proc.exitCode !== null) return res(proc.exitCode);
            proc.once("exit", (code) => res(code));
            proc.kill("SIGTERM");
          }),
        });
      }
    });
    proc.once("error", reject);
    proc.once("exit", (code) => { if (!proc.port) reject(new Error(`h3 serve exited ${code}: ${err}`)); });
  });
}

export function tempDir() {
  return mkdtempSync(join(tmpdir(), "h3web."));
}

export function removeDir(d) {
  if (d && existsSync(d)) rmSync(d, { recursive: true, force: true });
}

/** Chromium as root in a sandbox-less container: the flags that keep it off the (closed) network. */
export const CHROMIUM_ARGS = [
  "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--autoplay-policy=no-user-gesture-required",
];

/** Polls `fn` (async, truthy when done) until it holds; throws naming `what` (a text, or an async function
 * giving one: what the page shows at that time) after `ms`. */
export async function until(fn, what, ms = 20000, every = 50) {
  const t0 = Date.now();
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() - t0 > ms)
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === "function" ? await what() : what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** JSON from the server (the test's own look at what the UI should show). */
export async function getJSON(base, path) {
  const r = await fetch(base + path);
  return { status: r.status, body: await r.json().catch(() => null) };
}
