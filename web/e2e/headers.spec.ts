// What the server sends with the UI: the pages' security headers, the assets' caching and
// compression, JSON 404s under /api.
import { test, expect } from "./fixtures";

test("pages carry the CSP and their headers; hashed assets are immutable and gzipped; /api stays JSON", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  for (const path of ["/", "/history", "/sessions/ses_x", "/settings"]) {
    const response = await fetch(app.base + path, { headers: { accept: "text/html" } });
    expect(response.status, path).toBe(200);
    const headers = response.headers;
    expect(headers.get("content-type"), path).toMatch(/^text\/html/);
    const csp = headers.get("content-security-policy") ?? "";
    for (const directive of ["default-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"]) {
      expect(csp, `${path}: ${directive}`).toContain(directive);
    }
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(headers.get("x-frame-options"), path).toBe("DENY");
    expect(headers.get("x-content-type-options"), path).toBe("nosniff");
    expect(headers.get("referrer-policy"), path).toBe("no-referrer");
    expect(headers.get("cache-control"), path).toMatch(/no-cache/);
  }

  // Every asset the page loads comes from this origin, under /assets/, cached for good.
  const assets: string[] = [];
  page.on("request", (request) => {
    if (!request.url().startsWith("data:")) assets.push(request.url());
  });
  await page.goto(app.base + "/");
  await expect(page.getByTestId("problem")).toBeVisible();
  expect(assets.every((url) => url.startsWith(app.base)), assets.join("\n")).toBe(true);
  const script = assets.find((url) => /\/assets\/.*\.js$/.test(url));
  expect(script, "a hashed script").toBeTruthy();
  const asset = await fetch(script!, { headers: { "accept-encoding": "gzip" } });
  expect(asset.status).toBe(200);
  expect(asset.headers.get("content-type")).toMatch(/javascript/);
  expect(asset.headers.get("cache-control")).toMatch(/max-age=31536000/);
  expect(asset.headers.get("cache-control")).toMatch(/immutable/);
  expect(asset.headers.get("content-encoding")).toBe("gzip");
  const etag = asset.headers.get("etag");
  expect(etag).toBeTruthy();
  expect((await fetch(script!, { headers: { "if-none-match": etag! } })).status).toBe(304);

  const unknown = await fetch(app.base + "/api/v1/nope", { headers: { accept: "text/html" } });
  expect(unknown.status).toBe(404);
  expect(unknown.headers.get("content-type")).toMatch(/json/);
  expect((await unknown.json()).error.code).toBeTruthy();
});
