import { defineConfig, type Plugin } from "vite";
import preact from "@preact/preset-vite";

// The build is embedded in the `deepsolve` binary (crates/deepsolve-web): everything the page
// loads comes from the server's own origin, with no inline script (the pages' CSP forbids it).
// For `vite` and `vite preview` during development, DEEPSOLVE_API=http://127.0.0.1:8080 sends
// the API to a running `deepsolve serve` (same origin for the browser, so cookies work).
const api = process.env.DEEPSOLVE_API;
const proxy = api ? { "/api": { target: api, changeOrigin: false } } : undefined;

// KaTeX's stylesheet offers each font as woff2, woff and ttf; every browser that runs this UI
// takes woff2, so the other two would only add ~700 KB to the binary.
const katexWoff2Only: Plugin = {
  name: "katex-woff2-only",
  enforce: "pre",
  transform(code, id) {
    if (!id.includes("katex") || !id.endsWith(".css")) return null;
    return code.replace(/,\s*url\([^)]*\.(?:woff|ttf)\)\s*format\("(?:woff|truetype)"\)/g, "");
  },
};

export default defineConfig({
  plugins: [preact(), katexWoff2Only],
  build: { outDir: "dist", assetsInlineLimit: 0, modulePreload: { polyfill: false } },
  server: { proxy },
  preview: { proxy },
});
