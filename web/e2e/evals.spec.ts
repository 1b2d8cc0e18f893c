// Evaluations as a user runs one: start a small run of a shipped set against the mock model from
// the form, watch it finish live, read the report and plots, open a problem's turn; an uploaded
// file that fits no layout is refused naming the line; the phone width.
import type { Page } from "@playwright/test";
import { test, expect, screenshotPath } from "./fixtures";

async function noHorizontalScroll(page: Page) {
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
}

test("a small run starts from the form, finishes live, and a problem opens its turn", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "well-behaved" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  await page.goto(app.base + "/");
  await page.getByRole("link", { name: "Evaluations" }).click();
  await expect(page).toHaveURL(/\/evals$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Evaluations");
  await expect(page.getByTestId("eval-list")).toContainText("No evaluation runs yet");
  await page.screenshot({ path: screenshotPath("evals-empty-desktop"), fullPage: true });

  await page.getByTestId("eval-shipped").selectOption("gsm-style-en");
  await page.getByTestId("eval-limit").fill("2");
  await page.getByTestId("eval-start").click();

  // The run's page: live progress until it is over, then the report, plots and rows.
  await expect(page).toHaveURL(/\/evals\/ev_[0-9a-f]+$/);
  const run = page.getByTestId("eval-run");
  await expect(run).toHaveAttribute("data-status", "finished", { timeout: 60_000 });
  await expect(page.getByTestId("eval-progress")).toContainText("4 of 4 done");
  await expect(page.getByTestId("eval-report")).toContainText("deepsolve");
  await expect(page.getByTestId("eval-report")).toContainText("plain");
  // The scripted solver follows the spine to the end on both problems; plain runs none.
  await expect(page.getByTestId("eval-engaged")).toHaveText(["2/2", "—"]);
  // No answer carries the engine's own words.
  await expect(page.getByTestId("eval-engine-text")).toHaveText(["0", "0"]);
  await expect(page.getByTestId("eval-plots").locator("img")).toHaveCount(2);
  await expect(page.getByTestId("eval-row")).toHaveCount(4);
  await page.screenshot({ path: screenshotPath("evals-run-desktop"), fullPage: true });

  // The list shows the run.
  await page.getByRole("link", { name: /All evaluations/ }).click();
  const item = page.getByTestId("eval-item");
  await expect(item).toHaveCount(1);
  await expect(item.getByTestId("eval-status")).toHaveText("finished");
  await expect(item).toContainText("4 of 4 done");
  await page.screenshot({ path: screenshotPath("evals-list-desktop"), fullPage: true });
  await item.getByRole("link", { name: "Open" }).click();

  // A deepsolve problem opens its turn: the session page with the problem and its answer.
  const deep = page.locator('[data-testid="eval-row"][data-mode="deepsolve"]').first();
  const question = (await deep.locator(".eval-question-text").textContent()) ?? "";
  expect(question.length).toBeGreaterThan(10);
  await deep.getByRole("link", { name: "Open turn" }).click();
  await expect(page).toHaveURL(/\/sessions\/[^/]+$/);
  await expect(page.getByText(question.slice(0, 40)).first()).toBeVisible();
  await expect(page.getByTestId("answer").first()).toBeVisible({ timeout: 30_000 });
  expect(pageErrors).toEqual([]);
});

test("an uploaded file that fits no layout is refused naming its line", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "well-behaved" });
  await page.goto(app.base + "/evals");
  await page.getByTestId("eval-file").setInputFiles({
    name: "mine.jsonl",
    mimeType: "application/jsonl",
    buffer: Buffer.from('{"id": "a", "question": "What is 6 times 7?", "answer": "42"}\n{"prompt": "hi"}\n'),
  });
  await expect(page.getByTestId("eval-source-upload")).toBeChecked();
  await page.getByTestId("eval-start").click();
  await expect(page.getByTestId("error")).toContainText("mine.jsonl:2: the record fits no known layout");
  await expect(page).toHaveURL(/\/evals$/);

  // A good file runs, in the plain mode only.
  await page.getByTestId("eval-file").setInputFiles({
    name: "mine.jsonl",
    mimeType: "application/jsonl",
    buffer: Buffer.from('{"id": "a", "question": "What is 6 times 7?", "answer": "42"}\n'),
  });
  await page.getByTestId("eval-mode-deepsolve").uncheck();
  await page.getByTestId("eval-start").click();
  await expect(page.getByTestId("eval-run")).toHaveAttribute("data-status", "finished", { timeout: 60_000 });
  await expect(page.getByTestId("eval-row")).toHaveCount(1);
});

test("the Evaluations pages fit a phone", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "well-behaved" });
  await page.setViewportSize({ width: 360, height: 780 });
  await page.goto(app.base + "/evals");
  await expect(page.getByTestId("eval-form")).toBeVisible();
  await noHorizontalScroll(page);
  await page.screenshot({ path: screenshotPath("evals-list-phone"), fullPage: true });
  await page.getByTestId("eval-shipped").selectOption("zh-arith");
  await page.getByTestId("eval-limit").fill("2");
  await page.getByTestId("eval-start").click();
  await expect(page.getByTestId("eval-run")).toHaveAttribute("data-status", "finished", { timeout: 60_000 });
  await expect(page.getByTestId("eval-row")).toHaveCount(4);
  await noHorizontalScroll(page);
  await page.screenshot({ path: screenshotPath("evals-run-phone"), fullPage: true });

  // The same run in Chinese, at the phone's width and a desktop's.
  await page.evaluate(() => localStorage.setItem("deepsolve.lang", "zh"));
  await page.reload();
  await expect(page.getByTestId("eval-report")).toContainText("引擎文字");
  await noHorizontalScroll(page);
  await page.screenshot({ path: screenshotPath("evals-run-phone-zh"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: screenshotPath("evals-run-desktop-zh"), fullPage: true });
});
