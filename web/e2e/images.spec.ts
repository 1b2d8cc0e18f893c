// A problem that comes as a picture: pasted into the editor, dropped on it, or chosen with the
// button; thumbnails that can be removed; the page's own message for a file that is not an
// image or is too large; the turn sent with its image to a model that sees (the scripted
// `vision` model measures the triangle it is sent), and the image shown above the problem,
// live and in the history. En and zh, desktop and 360 px.
import type { Page } from "@playwright/test";
import { test, expect, waitForFooter, screenshotPath, openAllWork } from "./fixtures";

/** The triangle the page draws: A red, B green, C blue, as the testkit's vision model reads them. */
const TRIANGLE = { width: 480, height: 360, a: [60, 40], b: [60, 320], c: [270, 320] } as const;

function angleC(): number {
  const { a, b, c } = TRIANGLE;
  const u = [a[0] - c[0], a[1] - c[1]];
  const v = [b[0] - c[0], b[1] - c[1]];
  const cos = (u[0] * v[0] + u[1] * v[1]) / (Math.hypot(u[0], u[1]) * Math.hypot(v[0], v[1]));
  return (Math.acos(cos) * 180) / Math.PI;
}

/**
 * Hand files to the editor as a paste (`paste`) or a drop (`drop`): `triangle` is drawn on a
 * canvas in the page, `solid` is one colour; both PNG.
 */
async function giveImage(page: Page, how: "paste" | "drop", name: string, kind: "triangle" | "solid") {
  await page.evaluate(
    async ({ how, name, kind, t }) => {
      const canvas = document.createElement("canvas");
      canvas.width = t.width;
      canvas.height = t.height;
      const g = canvas.getContext("2d")!;
      g.fillStyle = kind === "solid" ? "rgb(30,30,220)" : "#ffffff";
      g.fillRect(0, 0, t.width, t.height);
      if (kind === "triangle") {
        g.strokeStyle = "#000000";
        g.lineWidth = 3;
        g.beginPath();
        g.moveTo(t.a[0], t.a[1]);
        g.lineTo(t.b[0], t.b[1]);
        g.lineTo(t.c[0], t.c[1]);
        g.closePath();
        g.stroke();
        const marks: [readonly number[], string][] = [
          [t.a, "rgb(220,30,30)"],
          [t.b, "rgb(30,180,30)"],
          [t.c, "rgb(30,30,220)"],
        ];
        for (const [[x, y], colour] of marks) {
          g.fillStyle = colour;
          g.beginPath();
          g.arc(x, y, 8, 0, 2 * Math.PI);
          g.fill();
        }
      }
      const blob = await new Promise<Blob>((done) => canvas.toBlob((b) => done(b!), "image/png"));
      const data = new DataTransfer();
      data.items.add(new File([blob], name, { type: "image/png" }));
      if (how === "paste") {
        const editor = document.querySelector('[data-testid="problem"]')!;
        editor.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
      } else {
        const target = document.querySelector(".editor")!;
        target.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true, cancelable: true }));
        target.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
      }
    },
    { how, name, kind, t: TRIANGLE },
  );
}

function thumb(page: Page, name: string) {
  return page.locator(`[data-testid="image-thumb"][data-name="${name}"]`);
}

/** The images shown in the (last) turn's problem have loaded. */
async function expectTurnImageLoaded(page: Page) {
  const image = page.getByTestId("turn-image").last();
  await expect(image).toBeVisible();
  await expect.poll(() => image.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))).toBe(TRIANGLE.width);
}

function angleIn(text: string): number {
  const match = /Angle C ≈ ([0-9.]+)°/.exec(text);
  return match ? Number(match[1]) : NaN;
}

test("a pasted figure reaches the model, and the turn shows it above its problem, live and in history", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "vision" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(app.base + "/");
  await page.getByTestId("problem").fill("Find angle C of the triangle in the picture.");

  await giveImage(page, "paste", "triangle.png", "triangle");
  await expect(thumb(page, "triangle.png")).toBeVisible();
  await giveImage(page, "drop", "blue.png", "solid");
  await expect(page.getByTestId("image-thumb")).toHaveCount(2);
  await thumb(page, "blue.png").getByRole("button", { name: "Remove blue.png" }).click();
  await expect(page.getByTestId("image-thumb")).toHaveCount(1);

  // Checked in the page: by the file's bytes, whatever its name, and by its size.
  const input = page.getByTestId("image-input");
  await input.setInputFiles([{ name: "notes.png", mimeType: "image/png", buffer: Buffer.from("Find angle C.\n") }]);
  await expect(page.getByTestId("image-picker").getByTestId("error")).toHaveText("notes.png is not a PNG, JPEG, WebP or GIF image.");
  const big = Buffer.alloc(11 * 1024 * 1024);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(big);
  await input.setInputFiles([{ name: "big.png", mimeType: "image/png", buffer: big }]);
  await expect(page.getByTestId("image-picker").getByTestId("error")).toHaveText("big.png is 11.0 MB; an image may be at most 10.0 MB.");
  await expect(page.getByTestId("image-thumb")).toHaveCount(1);
  await page.screenshot({ path: screenshotPath("images-editor-desktop"), fullPage: true });

  await page.getByTestId("problem").press("Control+Enter");
  await waitForFooter(page);
  await expect(page.getByTestId("image-thumb")).toHaveCount(0);
  const answer = await page.getByTestId("answer").innerText();
  expect(Math.abs(angleIn(answer) - angleC())).toBeLessThan(1);
  await expect(page.getByTestId("turn-images")).toBeVisible();
  await expectTurnImageLoaded(page);
  // Above the problem's text.
  const imageBox = await page.getByTestId("turn-images").boundingBox();
  const textBox = await page.locator(".problem-text").first().boundingBox();
  expect(imageBox!.y + imageBox!.height).toBeLessThanOrEqual(textBox!.y);
  await page.screenshot({ path: screenshotPath("images-turn-desktop"), fullPage: true });

  // From the history: the replayed turn shows the same image.
  await page.reload();
  await waitForFooter(page);
  await expectTurnImageLoaded(page);
  expect(pageErrors).toEqual([]);
});

test("in Chinese at 360 px: the picker, its message and the turn's image fit the width", async ({ browser, deepsolve }) => {
  const app = await deepsolve({ policy: "vision" });
  const context = await browser.newContext({ viewport: { width: 360, height: 780 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true, locale: "zh-CN" });
  const page = await context.newPage();
  await page.addInitScript(() => localStorage.setItem("deepsolve.lang", "zh"));
  await page.goto(app.base + "/");
  await expect(page.getByText("添加图片")).toBeVisible();
  await page.getByTestId("problem").fill("求图中三角形的角 C。");
  await giveImage(page, "paste", "三角形.png", "triangle");
  await expect(thumb(page, "三角形.png")).toBeVisible();
  await page.getByTestId("image-input").setInputFiles([{ name: "笔记.png", mimeType: "image/png", buffer: Buffer.from("不是图片") }]);
  await expect(page.getByTestId("image-picker").getByTestId("error")).toHaveText("笔记.png 不是 PNG、JPEG、WebP 或 GIF 图片。");
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await page.screenshot({ path: screenshotPath("images-editor-zh-phone"), fullPage: true });
  await page.getByTestId("submit").click();
  await waitForFooter(page, /.+/);
  await expectTurnImageLoaded(page);
  expect(Math.abs(angleIn(await page.getByTestId("answer").innerText()) - angleC())).toBeLessThan(1);
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await page.screenshot({ path: screenshotPath("images-turn-zh-phone"), fullPage: true });
  await context.close();
});

test("a pasted photo drawn by geogebra_analysis: a blind main model, the vision model reads it, the figure shows in its card", async ({ page, deepsolve }) => {
  const app = await deepsolve({
    policy: "vision",
    set: ["llm.vision=false", "models.vision.base_url={mock}", "models.vision.model=mock-vision"],
  });
  await page.goto(app.base + "/");
  await page.getByTestId("problem").fill("Find angle C of the triangle in the picture.");
  await giveImage(page, "paste", "triangle.png", "triangle");
  await expect(thumb(page, "triangle.png")).toBeVisible();
  await page.locator("details.options > summary").click();
  await page.locator('input[id$="-tool-geogebra_analysis"]').check();
  await page.getByTestId("submit").click();
  await waitForFooter(page);

  // The answer's angle is the one the figure's table gives, and that is the photo's.
  const answer = await page.getByTestId("answer").innerText();
  expect(answer).toContain("From the figure: γ = ");
  expect(Math.abs(angleIn(answer) - angleC())).toBeLessThan(1);
  await openAllWork(page);
  const card = page.getByTestId("tool-card").filter({ has: page.locator("code.tool-name", { hasText: /^geogebra_analysis$/ }) });
  await expect(card).toContainText("```ggbscript");
  const figure = card.getByTestId("figure").locator("img");
  await figure.scrollIntoViewIfNeeded();
  await expect.poll(() => figure.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))).toBeGreaterThan(0);
  await page.screenshot({ path: screenshotPath("images-figure-desktop"), fullPage: true });
});
