// A figure drawn by geogebra_analysis, as a student sees it: the tool toggled on, its card
// shows our own SVG inline (served by the inline route as image/svg+xml with nosniff and a
// sandboxing CSP) and the browser draws it; the answer uses the figure's table.
import { test, expect, submitProblem, waitForFooter, screenshotPath, openAllWork } from "./fixtures";

const PROBLEM = "In triangle ABC, AB = 4, AC = 3 and the angle at A is 90°. Find angle B.";

test("geogebra_analysis draws our figure inline in its tool card, at 1280 px in English and 360 px in Chinese", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "geogebra" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(app.base + "/");
  await page.locator("details.options > summary").click();
  const toggle = page.locator('input[id$="-tool-geogebra_analysis"]');
  await expect(toggle).toBeEnabled();
  await toggle.check();
  await submitProblem(page, PROBLEM);
  await waitForFooter(page);
  await expect(page.getByTestId("answer")).toContainText("∠B = 36.8699°");

  await openAllWork(page);
  const card = page.getByTestId("tool-card").filter({ has: page.locator("code.tool-name", { hasText: /^geogebra_analysis$/ }) });
  await expect(card).toHaveCount(1);
  await expect(card).toContainText("```ggbscript");
  const figure = card.getByTestId("figure").locator("img");
  await figure.scrollIntoViewIfNeeded();
  await expect(figure).toBeVisible();
  // The browser drew it: an SVG that failed to load or parse has no natural size.
  await expect.poll(() => figure.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))).toBe(640);
  expect(await figure.evaluate((img: HTMLImageElement) => img.naturalHeight)).toBeGreaterThanOrEqual(320);
  const src = await figure.getAttribute("src");
  expect(src).toMatch(/^\/api\/v1\/artifacts\/[^/]+\/inline$/);
  const served = await page.request.get(app.base + src!);
  expect(served.status()).toBe(200);
  expect(served.headers()["content-type"]).toBe("image/svg+xml");
  expect(served.headers()["x-content-type-options"]).toBe("nosniff");
  expect(served.headers()["content-security-policy"]).toBe("sandbox; default-src 'none'");
  await card.scrollIntoViewIfNeeded();
  await page.screenshot({ path: screenshotPath("figure-desktop"), fullPage: true });
  await card.screenshot({ path: screenshotPath("figure-tool-card") });
  expect(pageErrors).toEqual([]);

  const phone = await page.context().browser()!.newContext({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.addInitScript(() => localStorage.setItem("deepsolve.lang", "zh"));
  await small.goto(page.url());
  await waitForFooter(small, /.+/);
  await openAllWork(small);
  const smallFigure = small.getByTestId("figure").locator("img");
  await smallFigure.scrollIntoViewIfNeeded();
  await expect.poll(() => smallFigure.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))).toBe(640);
  const shown = await smallFigure.boundingBox();
  expect(shown!.width).toBeLessThanOrEqual(360);
  expect(await small.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await small.screenshot({ path: screenshotPath("figure-phone-zh"), fullPage: true });
  await phone.close();
});
