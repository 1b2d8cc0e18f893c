// Playwright fixtures: `deepsolve(…)` starts a mock model and a server for one test (stopped
// after it), in single-user mode or with users; helpers drive the solve page.
import { test as base, expect, type Page } from "@playwright/test";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Mock, Server, type MockOptions, type ServerOptions } from "./harness";

export { expect };

export type Deepsolve = {
  mock: Mock;
  server: Server;
  /** The server's origin, e.g. http://127.0.0.1:41234. */
  base: string;
  /** Tokens by user name (tokens mode only). */
  tokens: Record<string, string>;
};

export type StartOptions = MockOptions &
  ServerOptions & {
    /** Users to create before the server starts: `alice` is an admin, the others are not. */
    users?: string[];
  };

export const test = base.extend<{ deepsolve: (options?: StartOptions) => Promise<Deepsolve> }>({
  deepsolve: async ({}, use) => {
    const running: Deepsolve[] = [];
    await use(async (options = {}) => {
      const mock = await Mock.start(options);
      const server = new Server(mock, options);
      const app: Deepsolve = { mock, server, base: "", tokens: {} };
      running.push(app);
      for (const name of options.users ?? []) app.tokens[name] = await server.addUser(name, name === "alice");
      app.base = await server.start();
      return app;
    });
    for (const app of running) {
      await app.server.stop();
      app.mock.stop();
    }
  },
});

export const PROBLEM = "Solve x² − 5x + 6 = 0 and plot the parabola";

/** Where the screenshots go (web/test-results/screenshots). */
export function screenshotPath(name: string): string {
  const dir = fileURLToPath(new URL("../test-results/screenshots", import.meta.url));
  mkdirSync(dir, { recursive: true });
  return `${dir}/${name}.png`;
}

/** Type the problem into the editor and submit it with Ctrl+Enter. */
export async function submitProblem(page: Page, problem = PROBLEM) {
  const editor = page.getByTestId("problem");
  await expect(editor).toBeVisible();
  await editor.fill(problem);
  await editor.press("Control+Enter");
}

/** Wait until the turn on the page has finished: the footer names its stop reason. */
export async function waitForFooter(page: Page, stopReason: RegExp = /answered/i) {
  await expect(page.getByTestId("footer").last()).toContainText(stopReason, { timeout: 60_000 });
}

/** The newest turn of the newest session, from the API (`headers` for tokens mode). */
export async function latestTurnId(base: string, headers: Record<string, string> = {}): Promise<string> {
  const list = await (await fetch(`${base}/api/v1/sessions?limit=1`, { headers })).json();
  const sessionId: string | undefined = list.sessions?.[0]?.id;
  if (!sessionId) throw new Error(`no session yet: ${JSON.stringify(list)}`);
  const session = await (await fetch(`${base}/api/v1/sessions/${sessionId}`, { headers })).json();
  const turns: { id: string }[] = session.turns ?? [];
  if (!turns.length) throw new Error(`session ${sessionId} has no turn`);
  return turns[turns.length - 1].id;
}

/** The newest session's id, from the API. */
export async function latestSessionId(base: string, headers: Record<string, string> = {}): Promise<string> {
  const list = await (await fetch(`${base}/api/v1/sessions?limit=1`, { headers })).json();
  const id: string | undefined = list.sessions?.[0]?.id;
  if (!id) throw new Error(`no session yet: ${JSON.stringify(list)}`);
  return id;
}

/** What a turn view shows, for comparing two renderings of the same turn. */
export async function turnSnapshot(page: Page) {
  const text = async (testId: string) => (await page.getByTestId(testId).allInnerTexts()).map((t) => t.trim());
  return {
    plan: await text("plan"),
    steps: await text("step"),
    toolCards: await text("tool-card"),
    answer: await text("answer"),
  };
}

/** Wait for the (last) plan to show `n` steps, every one done. */
export async function expectStepsDone(page: Page, n: number) {
  const plan = page.getByTestId("plan").last();
  await expect(plan.getByTestId("step")).toHaveCount(n);
  await expect(plan.locator('[data-testid="step"][data-status="done"]')).toHaveCount(n, { timeout: 60_000 });
}

/** The turn on the page has not finished yet. */
export async function expectStillRunning(page: Page) {
  await expect(page.getByTestId("footer").filter({ hasText: /answered/i })).toHaveCount(0);
  await expect(page.getByTestId("answer")).toHaveCount(0);
}

/** Sign in on the login page with `token`. */
export async function signIn(page: Page, token: string) {
  const form = page.getByTestId("login");
  await expect(form).toBeVisible();
  const input = form.locator("input").first();
  await input.fill(token);
  await input.press("Enter");
}

/** Fold open the work of every step of the (last) plan: finished steps start folded. */
export async function openAllWork(page: Page) {
  const folded = page.getByTestId("plan").last().getByRole("button", { expanded: false });
  for (let guard = 0; guard < 20 && (await folded.count()) > 0; guard++) await folded.first().click();
  await expect(folded).toHaveCount(0);
}

/** The first figure of a tool card has loaded (scrolled to: the UI loads images lazily). */
export async function expectFigureLoaded(page: Page) {
  const figure = page.locator('[data-testid="tool-card"] img').first();
  await expect(figure).toBeAttached();
  await figure.scrollIntoViewIfNeeded();
  await expect(figure).toBeVisible();
  await expect.poll(() => figure.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))).toBeGreaterThan(0);
}
