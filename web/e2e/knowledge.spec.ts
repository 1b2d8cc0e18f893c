// Knowledge bases as a student uses them: create one, upload notes, watch them become ready,
// solve with them picked, and read where the answer's [1] comes from; a bad file says what is
// wrong with it; files attached to one problem; the phone width.
import type { Page } from "@playwright/test";
import { test, expect, submitProblem, waitForFooter, screenshotPath, latestTurnId } from "./fixtures";
import { eventLog } from "./harness";
import { lecturePdf } from "./documents";

const PROBLEM = "Use the squeeze theorem to find the limit of sin(n)/n";

/** Create a knowledge base on the Knowledge page; its page opens. */
async function createKb(page: Page, base: string, name: string) {
  await page.goto(base + "/knowledge");
  await page.getByTestId("kb-create-name").fill(name);
  await page.getByTestId("kb-create").click();
  await expect(page).toHaveURL(/\/knowledge\/[^/]+$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(name);
}

function documentRow(page: Page, name: string) {
  return page.locator(`[data-testid="kb-document"][data-name="${name}"]`);
}

async function noHorizontalScroll(page: Page) {
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
}

test("a knowledge base from creation to an answer whose [1] names the file and the page", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "kb-cite" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await createKb(page, app.base, "Calculus notes");
  const kbUrl = page.url();

  await page.getByTestId("kb-file-input").setInputFiles([
    { name: "lecture-03.pdf", mimeType: "application/pdf", buffer: lecturePdf() },
    { name: "summary.md", mimeType: "text/markdown", buffer: Buffer.from("# Summary\n\nLimits of sequences, and the squeeze theorem.\n") },
  ]);
  const lecture = documentRow(page, "lecture-03.pdf");
  await expect(lecture).toBeVisible();
  // Polled until the ingest ends: no reload needed.
  await expect(lecture).toHaveAttribute("data-status", "ready", { timeout: 60_000 });
  await expect(lecture.getByTestId("kb-doc-status")).toHaveText(/Ready · 3 pages/);
  await expect(documentRow(page, "summary.md")).toHaveAttribute("data-status", "ready", { timeout: 60_000 });

  // A file that only claims to be a PDF: an error that names it, and the others are untouched.
  await page.getByTestId("kb-file-input").setInputFiles([{ name: "broken.pdf", mimeType: "application/pdf", buffer: Buffer.from("this is not a PDF at all") }]);
  // Accepted, then refused by the reader: the document is kept as failed, with why.
  const broken = documentRow(page, "broken.pdf");
  await expect(broken).toHaveAttribute("data-status", "failed", { timeout: 60_000 });
  await expect(broken.getByTestId("kb-doc-error")).toHaveText("broken.pdf: not a PDF (no %PDF header)");
  await expect(documentRow(page, "summary.md").getByTestId("kb-doc-status")).toHaveText("Ready");
  await expect(lecture).toHaveAttribute("data-status", "ready");
  await page.screenshot({ path: screenshotPath("knowledge-kb-desktop"), fullPage: true });

  // The list shows the knowledge base with its counts.
  await page.getByRole("link", { name: /All knowledge bases/ }).click();
  const item = page.locator('[data-testid="kb-item"][data-kb-name="Calculus notes"]');
  await expect(item).toContainText("3 documents · 2 ready · 1 failed");

  // Solve with it picked.
  await page.goto(app.base + "/");
  await page.locator('[data-testid="kb-pick"][data-kb-name="Calculus notes"]').check();
  await submitProblem(page, PROBLEM);
  await waitForFooter(page);
  const answer = page.getByTestId("answer");
  const cite = answer.locator("a.cite-link").first();
  await expect(cite).toHaveText("[1]");
  await cite.hover();
  const card = answer.locator(".cite-card").first();
  await expect(card).toBeVisible();
  await expect(card).toContainText("lecture-03.pdf");
  await expect(card).toContainText("p. 2");
  await expect(card).toContainText(/squeeze/i);
  await page.screenshot({ path: screenshotPath("knowledge-answer-desktop"), fullPage: true });

  // The Sources list under the answer, which [1] links to.
  const sources = page.getByTestId("sources");
  await expect(sources.getByTestId("source").first()).toContainText("lecture-03.pdf");
  await expect(sources.getByTestId("source").first()).toContainText("p. 2");
  // Following [1] goes to its entry there, in this tab.
  await cite.click();
  await expect(page).toHaveURL(/#src-turn_[^-]+-1$/);
  await expect(sources.getByTestId("source").first()).toBeInViewport();
  expect(page.context().pages()).toHaveLength(1);

  // What the page showed is what the log carries.
  const events = await eventLog(app.base, await latestTurnId(app.base));
  const answered = events.find((e) => e.type === "answer") as { sources?: { n: number; title: string; page?: number }[] } | undefined;
  expect(answered?.sources?.[0]).toMatchObject({ n: 1, title: "lecture-03.pdf", page: 2 });

  // A replay (the session opened again) shows the same card, reached from the keyboard.
  await page.reload();
  await waitForFooter(page);
  await page.mouse.move(0, 0);
  const replayed = page.getByTestId("answer").locator("a.cite-link").first();
  await replayed.focus();
  await expect(page.getByTestId("answer").locator(".cite-card").first()).toBeVisible();
  await expect(page.getByTestId("answer").locator(".cite-card").first()).toContainText("lecture-03.pdf");
  expect(pageErrors).toEqual([]);

  // At 360 px, in Chinese: the Knowledge page and the cited answer fit the width.
  const phone = await page.context().browser()!.newContext({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.addInitScript(() => localStorage.setItem("deepsolve.lang", "zh"));
  await small.goto(kbUrl);
  await expect(documentRow(small, "lecture-03.pdf")).toHaveAttribute("data-status", "ready");
  await noHorizontalScroll(small);
  await small.screenshot({ path: screenshotPath("knowledge-kb-phone-zh"), fullPage: true });
  await small.goto(page.url());
  await waitForFooter(small, /.+/);
  const phoneCite = small.getByTestId("answer").locator("a.cite-link").first();
  await phoneCite.focus();
  await expect(small.getByTestId("answer").locator(".cite-card").first()).toBeVisible();
  await expect(small.getByTestId("answer").locator(".cite-card").first()).toContainText("第 2 页");
  await noHorizontalScroll(small);
  await small.screenshot({ path: screenshotPath("knowledge-answer-phone-zh"), fullPage: true });
  await phone.close();
});

test("files attached to one problem are what its answer cites", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "kb-cite" });
  await page.goto(app.base + "/");
  await page.getByTestId("kb-attach-input").setInputFiles([{ name: "handout.pdf", mimeType: "application/pdf", buffer: lecturePdf() }]);
  await expect(page.getByTestId("kb-attachments")).toContainText("handout.pdf");
  await submitProblem(page, PROBLEM);
  await waitForFooter(page);
  const cite = page.getByTestId("answer").locator("a.cite-link").first();
  await cite.hover();
  await expect(page.getByTestId("answer").locator(".cite-card").first()).toContainText("handout.pdf");
  // An attachment belongs to its turn: the Knowledge page does not list it.
  await page.goto(app.base + "/knowledge");
  await expect(page.getByTestId("kb-list")).not.toContainText("handout");
});

test("a knowledge base that does not exist; a file too big; a name with a path; deleting", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "kb-cite", set: ["kb.max_file_mb=1"] });
  await page.goto(app.base + "/knowledge/no-such-kb");
  await expect(page.getByTestId("not-found")).toBeVisible();
  await createKb(page, app.base, "Scratch");

  // Over the server's cap: refused before a byte is sent, naming the file and the cap.
  await page.getByTestId("kb-file-input").setInputFiles([{ name: "big.txt", mimeType: "text/plain", buffer: Buffer.alloc(1024 * 1024 + 10, "a") }]);
  await expect(page.getByTestId("kb-upload-error")).toContainText("big.txt");
  await expect(page.getByTestId("kb-upload-error")).toContainText("1 MB");
  await expect(page.getByTestId("kb-document")).toHaveCount(0);

  // Only the base name of an upload is kept.
  await page.getByTestId("kb-file-input").setInputFiles([{ name: "../../etc/notes.md", mimeType: "text/markdown", buffer: Buffer.from("# Notes\n\nA line.\n") }]);
  await expect(page.getByTestId("kb-upload-error")).toHaveCount(0);
  await expect(page.getByTestId("kb-document")).toHaveCount(1);
  await expect(page.getByTestId("kb-document").first()).toHaveAttribute("data-name", "notes.md");
  await expect(page.getByTestId("kb-document").first()).toHaveAttribute("data-status", "ready", { timeout: 60_000 });

  await page.getByTestId("kb-doc-delete").click();
  await page.getByTestId("kb-doc-confirm-delete").click();
  await expect(page.getByTestId("kb-document")).toHaveCount(0);
  await page.getByTestId("kb-delete").click();
  await page.getByTestId("kb-confirm-delete").click();
  await expect(page).toHaveURL(/\/knowledge$/);
  await expect(page.getByTestId("kb-list")).not.toContainText("Scratch");
});
