import { defineConfig } from "@playwright/test";

// The browser tests drive the real `deepsolve serve` (with the UI embedded) and the scripted
// mock model, both from DEEPSOLVE_BIN_DIR (default ../target/debug), in the system Chromium:
// Playwright's own browser download is not used.
export default defineConfig({
  testDir: "e2e",
  outputDir: "test-results/artifacts",
  workers: 2,
  fullyParallel: true,
  retries: 0,
  timeout: 90_000,
  expect: { timeout: 30_000 },
  reporter: [["list"]],
  use: {
    browserName: "chromium",
    viewport: { width: 1280, height: 900 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
    trace: "off",
    screenshot: "only-on-failure",
  },
});
