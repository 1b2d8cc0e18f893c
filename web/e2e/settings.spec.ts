// The settings page's playbook per language: shown, changed by an admin for one language, in
// force on the server, reset to the built-in one; read-only for a user; en and zh, 360 px.
import type { Page } from "@playwright/test";
import { test, expect, screenshotPath, signIn } from "./fixtures";

async function noHorizontalScroll(page: Page) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  expect(overflow).toBeLessThanOrEqual(0);
}

async function playbookFrom(base: string, language: string): Promise<string | null> {
  const view = await (await fetch(base + "/api/v1/capabilities/settings")).json();
  return view.prompts.playbooks.find((p: { language: string }) => p.language === language).from;
}

test("an admin changes the Chinese playbook and resets it", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  await page.goto(app.base + "/settings");
  const zh = page.getByTestId("playbook-zh");
  const en = page.getByTestId("playbook-en");
  await expect(zh.locator("textarea")).toHaveValue(/solve_plan/);
  await expect(zh).toContainText("The built-in playbook.");
  await expect(zh.getByRole("button", { name: "Reset to default" })).toBeDisabled();

  await zh.locator("textarea").fill("ZH-E2E 先调用 solve_plan。\n{tools}\n讲清楚。");
  await zh.getByRole("button", { name: "Save playbook" }).click();
  await expect(zh.getByRole("status")).toContainText("The next turn in this language uses it.");
  await expect(zh).toContainText("From prompts.solve.zh.system.");
  await expect(en).toContainText("The built-in playbook.");
  expect(await playbookFrom(app.base, "zh")).toBe("prompts.solve.zh.system");
  expect(await playbookFrom(app.base, "en")).toBeNull();
  await page.screenshot({ path: screenshotPath("settings-playbook-desktop"), fullPage: true });

  await zh.getByRole("button", { name: "Reset to default" }).click();
  await expect(zh.getByRole("status")).toContainText("Back to the default playbook.");
  await expect(zh).toContainText("The built-in playbook.");
  await expect(zh.locator("textarea")).not.toHaveValue(/ZH-E2E/);
  expect(await playbookFrom(app.base, "zh")).toBeNull();
});

test("the playbooks read in Chinese at 360 px, read-only for a user", async ({ browser, deepsolve }) => {
  const app = await deepsolve({ users: ["alice", "bob"] });
  const phone = await browser.newContext({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
  const page = await phone.newPage();
  await page.addInitScript(() => localStorage.setItem("deepsolve.lang", "zh"));
  await page.goto(app.base + "/");
  await signIn(page, app.tokens.bob);
  await expect(page.getByTestId("problem")).toBeVisible();
  await page.goto(app.base + "/settings");
  const zh = page.getByTestId("playbook-zh");
  await expect(zh).toContainText("内置的解题手册。");
  await expect(zh.locator("textarea")).toHaveAttribute("readonly", "");
  await expect(page.getByRole("button", { name: "保存解题手册" })).toHaveCount(0);
  await noHorizontalScroll(page);
  await page.screenshot({ path: screenshotPath("settings-playbook-phone-zh"), fullPage: true });
  await page.locator(".playbooks").screenshot({ path: screenshotPath("settings-playbook-phone-zh-section") });
  await phone.close();
});
