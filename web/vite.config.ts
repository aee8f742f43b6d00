// The web gallery of h3 serve.  `npm run build` writes dist/ (index.html, assets/ with content hashes in
// their names, and a .gz beside each text file) that the h3 build embeds (cmake/embed_web.cmake);
// `npm run dev` serves the UI with hot reload and proxies the API to a running `h3 serve`
// (H3_SERVER, default http://127.0.0.1:8000).
import { gzipSync } from "node:zlib";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defineConfig, type Plugin } from "vite";
import react from "@vitejs/plugin-react";

const outDir = "dist";

/* Writes FILE.gz beside every text file of dist/ (h3 serve sends it to clients that take gzip) and prints
 * the size of the JavaScript, plain and gzipped (the budget: 300 KB gzipped). */
function gzipAssets(): Plugin {
  return {
    name: "h3-gzip",
    apply: "build",
    closeBundle() {
      let js = 0, jsGz = 0;
      const walk = (dir: string) => {
        for (const name of readdirSync(dir)) {
          const p = join(dir, name);
          if (statSync(p).isDirectory()) { walk(p); continue; }
          if (!/\.(js|css|html|svg|json|txt)$/.test(name)) continue;
          const data = readFileSync(p);
          const gz = gzipSync(data, { level: 9 });
          writeFileSync(p + ".gz", gz);
          if (name.endsWith(".js")) { js += data.length; jsGz += gz.length; }
        }
      };
      walk(outDir);
      console.log(`h3: JavaScript ${(js / 1024).toFixed(1)} KiB, ${(jsGz / 1024).toFixed(1)} KiB gzipped`);
    },
  };
}

const server = process.env.H3_SERVER || "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react(), gzipAssets()],
  build: { outDir, emptyOutDir: true, target: "es2022", sourcemap: false, assetsInlineLimit: 0 },
  server: {
    proxy: {
      "/api": { target: server, changeOrigin: true },
      "/v1": { target: server, changeOrigin: true },
      "/openapi.json": { target: server, changeOrigin: true },
      "/health": { target: server, changeOrigin: true },
    },
  },
});
