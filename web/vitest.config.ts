import { defineConfig } from "vitest/config";
import preact from "@preact/preset-vite";

// Unit tests of the web UI (the browser tests under e2e/ run with Playwright). Files that need a
// DOM say so with `// @vitest-environment jsdom`.
export default defineConfig({
  plugins: [preact()],
  test: {
    include: ["src/**/*.test.ts", "src/**/*.test.tsx"],
    environment: "node",
  },
});
