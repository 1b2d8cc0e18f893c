// A whole solve as a student sees it, its replay from History, the phone width, the Chinese
// UI and what a hostile model's text can (not) do.
import { test, expect, PROBLEM, submitProblem, waitForFooter, expectStepsDone, turnSnapshot, screenshotPath, openAllWork, expectFigureLoaded, latestTurnId } from "./fixtures";
import { HOSTILE_GLOBAL } from "./constants";

test("a whole solve: plan, steps done with summaries, the code card and its figure, KaTeX, the answer, the footer", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase" });
  // The page's CSP forbids inline script and style: KaTeX must go through its DOM path.
  const refused: string[] = [];
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) refused.push(message.text());
  });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(app.base + "/");
  await submitProblem(page);

  const plan = page.getByTestId("plan");
  await expect(plan).toBeVisible();
  await expect(plan.getByTestId("step")).toHaveCount(3);
  await expect(plan.getByTestId("step").first()).toContainText("Factor");
  await expectStepsDone(page, 3);
  await expect(page.getByTestId("step").nth(2)).toContainText("Both roots satisfy the equation");
  // The summaries' LaTeX is typeset.
  await expect(page.getByTestId("step").first().locator(".katex").first()).toBeAttached();
  await expect(page.locator('[aria-current="step"]')).toHaveCount(0);

  await openAllWork(page);
  const code = page.getByTestId("tool-card").filter({ hasText: "saved parabola.png" });
  await expect(code).toHaveCount(1);
  await expect(code).toHaveAttribute("data-status", "ok");
  await expect(code).toContainText("roots: [2.0, 3.0]");
  // A file that is not an image is a download, not an <img>.
  const chip = code.locator("a[download]").filter({ hasText: "roots.txt" });
  await expect(chip).toBeVisible();
  await expect(code.locator('img[alt*="roots.txt"]')).toHaveCount(0);
  await expectFigureLoaded(page);

  const answer = page.getByTestId("answer");
  await expect(answer).toContainText("Solution.");
  await expect(answer.locator(".katex").first()).toBeAttached();
  await expect(answer.locator(".katex-display")).toHaveCount(1);
  await expect(answer.locator("table")).toHaveCount(1);
  await expect(answer.locator("pre code")).toContainText("np.roots");
  // Maths was rendered through KaTeX's DOM path: no raw TeX delimiters left in the text.
  await expect(answer).not.toContainText("$$");
  await waitForFooter(page, /answered/i);

  await page.screenshot({ path: screenshotPath("solve-desktop-light"), fullPage: true });
  expect(refused).toEqual([]);
  expect(pageErrors).toEqual([]);

  // The figure comes from the verified-image route, with the headers that keep it inert.
  const turn = await (await fetch(`${app.base}/api/v1/turns/${await latestTurnId(app.base)}`)).json();
  const png = turn.artifacts.find((a: { name: string }) => a.name.endsWith("parabola.png"));
  expect(png, "the figure is a stored artifact").toBeTruthy();
  const inline = await fetch(`${app.base}/api/v1/artifacts/${png.id}/inline`);
  expect(inline.status).toBe(200);
  expect(inline.headers.get("content-type")).toBe("image/png");
  expect(inline.headers.get("x-content-type-options")).toBe("nosniff");
  expect(inline.headers.get("content-security-policy")).toMatch(/sandbox/);
  const text = turn.artifacts.find((a: { name: string }) => a.name.endsWith("roots.txt"));
  const refusedInline = await fetch(`${app.base}/api/v1/artifacts/${text.id}/inline`);
  expect(refusedInline.status).toBe(415);
  expect((await refusedInline.json()).error.message).toMatch(/download/i);
  const download = await fetch(app.base + text.url);
  expect(await download.text()).toBe("x1 = 2.0\nx2 = 3.0\n");
  const src = await page.locator('[data-testid="tool-card"] img').first().evaluate((img: HTMLImageElement) => img.currentSrc);
  expect(src).toMatch(new RegExp(`/api/v1/artifacts/${png.id}/inline$`));
});

test("a session opened from History shows what the live view showed", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase" });
  await page.goto(app.base + "/");
  await submitProblem(page);
  await expectStepsDone(page, 3);
  await waitForFooter(page);
  await openAllWork(page);
  await expectFigureLoaded(page);
  const live = await turnSnapshot(page);
  expect(live.steps).toHaveLength(3);
  expect(live.answer).toHaveLength(1);

  await page.goto(app.base + "/history");
  const history = page.getByTestId("history");
  await expect(history).toBeVisible();
  await history.getByRole("link").first().click();
  await expect(page).toHaveURL(/\/sessions\/[^/]+$/);
  await waitForFooter(page);
  await expectStepsDone(page, 3);
  await openAllWork(page);
  await expectFigureLoaded(page);
  expect(await turnSnapshot(page)).toEqual(live);
});

test("at 360 px the solve fits the width: no horizontal scroll", async ({ browser, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase" });
  const context = await browser.newContext({ viewport: { width: 360, height: 780 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  await page.goto(app.base + "/");
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await submitProblem(page);
  await expectStepsDone(page, 3);
  await waitForFooter(page);
  await openAllWork(page);
  await expectFigureLoaded(page);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await page.screenshot({ path: screenshotPath("solve-phone"), fullPage: true });
  await context.close();
});

/** Switch the UI to Chinese, whatever control the switch is (a select or a button). */
async function switchToChinese(page: import("@playwright/test").Page) {
  const control = page.getByTestId("lang-switch");
  await expect(control).toBeVisible();
  if ((await control.evaluate((el) => el.tagName)) === "SELECT") await control.selectOption("zh");
  else await control.click();
}

test("the Chinese UI: headings in Chinese; dark theme", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase" });
  await page.goto(app.base + "/");
  await switchToChinese(page);
  const han = /[\u4e00-\u9fff]/;
  await expect.poll(async () => (await page.locator("h1, h2").allInnerTexts()).join(" ")).toMatch(han);
  const english = /\b(Solve|History|Settings)\b/;
  expect((await page.locator("h1, h2").allInnerTexts()).join(" ")).not.toMatch(english);
  const themeSwitch = page.getByTestId("theme-switch");
  await expect(themeSwitch).toBeVisible();
  const background = () =>
    page.evaluate(() => `${getComputedStyle(document.body).backgroundColor} ${getComputedStyle(document.documentElement).backgroundColor}`);
  const before = await background();
  if ((await themeSwitch.evaluate((el) => el.tagName)) === "SELECT") await themeSwitch.selectOption("dark");
  else await themeSwitch.click();
  await expect.poll(background).not.toBe(before);
  await submitProblem(page, PROBLEM);
  await expectStepsDone(page, 3);
  await waitForFooter(page, /.+/);
  await openAllWork(page);
  await expectFigureLoaded(page);
  await page.screenshot({ path: screenshotPath("solve-zh-dark"), fullPage: true });
  // The choice survives a reload.
  await page.reload();
  await expect.poll(async () => (await page.locator("h1, h2").allInnerTexts()).join(" ")).toMatch(han);
});

test("nothing the model writes runs script", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase-hostile" });
  const dialogs: string[] = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await page.goto(app.base + "/");
  const scriptsBefore = await page.evaluate(() => document.scripts.length);
  await submitProblem(page);
  await expectStepsDone(page, 3);
  await waitForFooter(page);
  await expect(page.getByTestId("answer")).toContainText("Solution.");
  // The hostile markup reached the page (its link text shows), defused.
  await expect(page.getByTestId("answer")).toContainText("click");
  await openAllWork(page);
  await expect(page.getByTestId("step").nth(2)).toContainText("click");
  // Give any injected handler (an image's onerror) time to fire.
  await page.waitForTimeout(500);
  expect(await page.evaluate((name) => (window as unknown as Record<string, unknown>)[name], HOSTILE_GLOBAL)).toBeUndefined();
  expect(await page.evaluate(() => document.scripts.length)).toBe(scriptsBefore);
  expect(await page.locator("main script, [onerror], [onclick], a[href^='javascript:' i]").count()).toBe(0);
  expect(dialogs).toEqual([]);
  // Links the model writes cannot reach the opener or send a referrer.
  for (const rel of await page.locator("[data-testid=answer] a[href]").evaluateAll((as) => as.map((a) => a.getAttribute("rel") ?? ""))) {
    expect(rel).toMatch(/noopener/);
    expect(rel).toMatch(/noreferrer/);
  }
});
