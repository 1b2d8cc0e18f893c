// Bad input gets a clear message in the page (data-testid="error").
import { test, expect, submitProblem } from "./fixtures";

test("an empty problem is refused with a message", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  await page.goto(app.base + "/");
  await submitProblem(page, "");
  await expect(page.getByTestId("error")).toBeVisible();
  await expect(page.getByTestId("plan")).toHaveCount(0);
});

test("an over-long problem is refused with a message naming the limit", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  const capabilities = await (await fetch(app.base + "/api/v1/capabilities")).json();
  const max: number = capabilities.limits.max_problem_chars;
  expect(max).toBeGreaterThan(0);
  await page.goto(app.base + "/");
  await submitProblem(page, "x".repeat(max + 1));
  const error = page.getByTestId("error");
  await expect(error).toBeVisible();
  await expect(error).toContainText(/long|characters|字/i);
  await expect(page.getByTestId("plan")).toHaveCount(0);
});

test("a knob out of range is refused with a message", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  const settings = await (await fetch(app.base + "/api/v1/capabilities/settings")).json();
  const knob = settings.knobs.find((k: { max: number | null }) => k.max !== null);
  expect(knob, "a knob with a maximum").toBeTruthy();
  await page.goto(app.base + "/settings");
  const input = page.locator(`input[name="${knob.key}"], input[data-key="${knob.key}"], #knob-${knob.key.replace(/\./g, "-")}`).first();
  const field = (await input.count()) ? input : page.locator("input[type=number]").first();
  await expect(field).toBeVisible();
  const tooLarge = knob.max * 10 + 1000;
  await field.fill(String(tooLarge));
  await page.getByRole("button", { name: /save|apply|保存|应用/i }).first().click();
  await expect(page.getByTestId("error")).toBeVisible();
  const after = await (await fetch(app.base + "/api/v1/capabilities/settings")).json();
  const inForce = Number(after.solve[knob.key]);
  expect(inForce).not.toBe(tooLarge);
  expect(inForce).toBeLessThanOrEqual(knob.max);
});

test("an unknown session shows not found", async ({ page, deepsolve }) => {
  const app = await deepsolve();
  await page.goto(app.base + "/sessions/ses_00000000000000000000000000000000");
  await expect(page.getByTestId("not-found").or(page.getByTestId("error")).first()).toContainText(/not found/i);
});
