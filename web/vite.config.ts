import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// The build is embedded in the `deepsolve` binary (crates/deepsolve-web): everything the page
// loads comes from the server's own origin, with no inline script (the pages' CSP forbids it).
export default defineConfig({
  plugins: [preact()],
  build: { outDir: "dist", assetsInlineLimit: 0, modulePreload: { polyfill: false } },
});
