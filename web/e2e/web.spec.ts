// Checking a fact on the web, as a student sees it: web_search toggled on, the search's
// result cited as [1] with a card naming its host and a Sources entry linking to its URL, and
// the server refusing to fetch pages on its own loopback (a tool card that says why).
import { test, expect, submitProblem, waitForFooter, screenshotPath, latestTurnId } from "./fixtures";
import { eventLog, WebFixture } from "./harness";

test("a web search cited as [1]: its card names the host, its source links to the page; loopback fetches are refused", async ({ page, deepsolve }) => {
  const web = await WebFixture.start();
  try {
    const app = await deepsolve({ policy: "web-cite", ...web.serverOptions() });
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    await page.goto(app.base + "/");
    await page.locator("details.options > summary").click();
    const toggle = page.locator('input[id$="-tool-web_search"]');
    await expect(toggle).toBeEnabled();
    await toggle.check();
    await submitProblem(page, "What does the squeeze theorem say?");
    await waitForFooter(page);

    // Both fetches went to loopback: refused, each card says why (the reading step's work).
    await page.getByTestId("step").nth(1).locator(".step-toggle").click();
    const fetches = page.getByTestId("tool-card").filter({ hasText: "web_fetch" });
    await expect(fetches).toHaveCount(2);
    for (const card of await fetches.all()) {
      await expect(card).toHaveAttribute("data-status", "error");
      await expect(card).toContainText(/loopback/i);
    }

    const answer = page.getByTestId("answer");
    const cite = answer.locator("a.cite-link").first();
    await expect(cite).toHaveText("[1]");
    await cite.hover();
    const card = answer.locator(".cite-card").first();
    await expect(card).toBeVisible();
    await expect(card).toContainText("Squeeze theorem (mirror)");
    await expect(card.locator(".cite-place")).toHaveText(new URL(web.searchBase).host);
    const source = page.getByTestId("sources").getByTestId("source").first();
    await expect(source.locator("a.source-title")).toHaveAttribute("href", `${web.searchBase}/trap`);
    await page.screenshot({ path: screenshotPath("web-answer-desktop"), fullPage: true });

    const events = await eventLog(app.base, await latestTurnId(app.base));
    const answered = events.find((e) => e.type === "answer") as { sources?: { n: number; url?: string }[] } | undefined;
    expect(answered?.sources).toEqual([expect.objectContaining({ n: 1, url: `${web.searchBase}/trap` })]);
    // The key is the server's: it reaches no event.
    expect(JSON.stringify(events)).not.toContain(web.key);
    expect(pageErrors).toEqual([]);

    // At 360 px, in Chinese: the refusals wrap and the page keeps to the width.
    const phone = await page.context().browser()!.newContext({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
    const small = await phone.newPage();
    await small.addInitScript(() => localStorage.setItem("deepsolve.lang", "zh"));
    await small.goto(page.url());
    await waitForFooter(small, /.+/);
    await small.getByTestId("step").nth(1).locator(".step-toggle").click();
    await expect(small.getByTestId("tool-card").filter({ hasText: "web_fetch" })).toHaveCount(2);
    expect(await small.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await small.screenshot({ path: screenshotPath("web-answer-phone-zh"), fullPage: true });
    await phone.close();
  } finally {
    web.stop();
  }
});
