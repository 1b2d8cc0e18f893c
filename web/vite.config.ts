import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The build is embedded in the `deepsolve` binary (crates/deepsolve-web): everything the page
// loads comes from the server's own origin, with no inline script (the pages' CSP forbids it).
// For `vite` and `vite preview` during development, DEEPSOLVE_API=http://127.0.0.1:8080 sends
// the API to a running `deepsolve serve` (same origin for the browser, so cookies work).
const api = process.env.DEEPSOLVE_API;
const proxy = api ? { "/api": { target: api, changeOrigin: false } } : undefined;

export default defineConfig({
  plugins: [preact()],
  build: { outDir: "dist", assetsInlineLimit: 0, modulePreload: { polyfill: false } },
  server: { proxy },
  preview: { proxy },
});
