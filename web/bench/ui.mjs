// The browser half of `bench ui` (crates/deepsolve-bench): Playwright's library drives the
// system Chromium against a running server and prints one JSON report on stdout.
//
//   node web/bench/ui.mjs --base http://127.0.0.1:PORT --session SES --turn TURN [--loads 5]
//
// - first_load: every response of a fresh profile's load of `/`, by kind (js, css, html,
//   KaTeX fonts, other fonts, other): requests, bytes transferred (headers included, as
//   compressed by the server), decoded, and gzip -9 of the decoded body;
// - render: navigation start → the problem editor visible, and the first contentful paint;
// - turn: for `--loads` loads of /sessions/SES, the time between the UI's marks
//   `deepsolve:events-start:TURN` and `deepsolve:rendered:TURN`, and their median.
import { chromium } from "playwright-core";
import { gzipSync } from "node:zlib";

const LAUNCH_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function options(argv) {
  const out = { loads: 5 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    out[key] = argv[i + 1];
  }
  for (const key of ["base", "session", "turn"]) {
    if (!out[key]) throw new Error(`--${key} is required`);
  }
  out.loads = Math.max(1, Number(out.loads));
  return out;
}

function kindOf(url, mime) {
  const path = new URL(url).pathname;
  if (/font/.test(mime) || /\.(woff2?|ttf|otf)$/.test(path)) return /KaTeX_/.test(path) ? "font_katex" : "font_other";
  if (/javascript/.test(mime) || path.endsWith(".js")) return "js";
  if (/css/.test(mime) || path.endsWith(".css")) return "css";
  if (/html/.test(mime)) return "html";
  return "other";
}

/** Every response of one navigation, with its sizes (from the DevTools protocol). */
async function firstLoad(browser, base) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  const responses = new Map();
  cdp.on("Network.responseReceived", (e) => {
    responses.set(e.requestId, { url: e.response.url, mime: e.response.mimeType, encoding: e.response.headers["content-encoding"] ?? e.response.headers["Content-Encoding"] ?? "" });
  });
  const finished = [];
  cdp.on("Network.loadingFinished", (e) => finished.push(e));
  await page.goto(base + "/", { waitUntil: "networkidle" });
  await page.getByTestId("problem").waitFor({ state: "visible" });
  const rows = [];
  for (const done of finished) {
    const response = responses.get(done.requestId);
    if (!response || response.url.startsWith("data:")) continue;
    let decoded = 0;
    let gzip = 0;
    try {
      const body = await cdp.send("Network.getResponseBody", { requestId: done.requestId });
      const bytes = Buffer.from(body.body, body.base64Encoded ? "base64" : "utf8");
      decoded = bytes.length;
      gzip = gzipSync(bytes, { level: 9 }).length;
    } catch {
      // No body kept (a redirect, a 204): sizes stay 0.
    }
    rows.push({ ...response, kind: kindOf(response.url, response.mime), transfer: done.encodedDataLength, decoded, gzip });
  }
  await context.close();
  const sum = (list) => ({
    count: list.length,
    transfer: list.reduce((a, r) => a + r.transfer, 0),
    decoded: list.reduce((a, r) => a + r.decoded, 0),
    gzip: list.reduce((a, r) => a + r.gzip, 0),
  });
  const report = { resources: rows };
  for (const kind of ["js", "css", "html", "font_katex", "font_other", "other"]) report[kind] = sum(rows.filter((r) => r.kind === kind));
  report.total = sum(rows);
  report.total_without_katex_fonts = sum(rows.filter((r) => r.kind !== "font_katex"));
  return report;
}

/** Navigation start → the editor visible (an observer set before any script of the page),
 * and the first contentful paint. */
async function firstRender(browser, base) {
  const context = await browser.newContext();
  await context.addInitScript(() => {
    const visible = () => {
      const editor = document.querySelector('[data-testid="problem"]');
      return editor && editor.getBoundingClientRect().height > 0;
    };
    const check = () => {
      if (window.__editorVisibleAt === undefined && visible()) window.__editorVisibleAt = performance.now();
    };
    new MutationObserver(check).observe(document, { childList: true, subtree: true });
  });
  const page = await context.newPage();
  await page.goto(base + "/", { waitUntil: "load" });
  await page.waitForFunction(() => window.__editorVisibleAt !== undefined);
  // FCP is reported after the paint; give it a frame.
  await page.waitForFunction(() => performance.getEntriesByName("first-contentful-paint").length > 0);
  const result = await page.evaluate(() => ({
    editor_visible_ms: window.__editorVisibleAt,
    fcp_ms: performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null,
  }));
  await context.close();
  return result;
}

/** One load of the session page: the time between the UI's two marks of the turn. */
async function renderTurn(page, base, session, turn) {
  await page.goto(`${base}/sessions/${session}`, { waitUntil: "load" });
  const rendered = `deepsolve:rendered:${turn}`;
  await page.waitForFunction((name) => performance.getEntriesByName(name).length > 0, rendered, { timeout: 120_000 });
  return page.evaluate(
    ({ start, end }) => performance.measure("deepsolve:bench", start, end).duration,
    { start: `deepsolve:events-start:${turn}`, end: rendered },
  );
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const opts = options(process.argv.slice(2));
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: LAUNCH_ARGS });
try {
  const first_load = await firstLoad(browser, opts.base);
  const render = await firstRender(browser, opts.base);
  const context = await browser.newContext();
  const page = await context.newPage();
  // One load to warm the cache and the browser's code caches, not counted.
  await renderTurn(page, opts.base, opts.session, opts.turn);
  const samples_ms = [];
  for (let i = 0; i < opts.loads; i++) samples_ms.push(await renderTurn(page, opts.base, opts.session, opts.turn));
  await context.close();
  process.stdout.write(JSON.stringify({ browser: browser.version(), first_load, render, turn: { samples_ms, median_ms: median(samples_ms) } }) + "\n");
} finally {
  await browser.close();
}
