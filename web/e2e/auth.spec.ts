// Tokens mode: signing in and out, one user's sessions out of another's reach, a revoked
// browser session.
import { test, expect, signIn, submitProblem, waitForFooter, expectStepsDone } from "./fixtures";

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

test("sign in: a bad token is refused with a message, a good one sets the cookie, SSE works; sign out", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", users: ["alice", "bob"] });
  await page.goto(app.base + "/");
  await expect(page).toHaveURL(/\/login$/);

  await signIn(page, "dst_0000000000000000000000000000000000000000000000000000000000000000");
  await expect(page.getByTestId("error")).toBeVisible();
  await expect(page.getByTestId("login")).toBeVisible();

  await signIn(page, app.tokens.alice);
  await expect(page.getByTestId("problem")).toBeVisible();
  const cookie = (await page.context().cookies(app.base)).find((c) => c.name === "deepsolve_session");
  expect(cookie, "the session cookie").toBeTruthy();
  expect(cookie!.httpOnly).toBe(true);
  expect(cookie!.sameSite).toBe("Strict");
  expect(await page.evaluate(() => document.cookie)).not.toContain("deepsolve_session");
  const session = await (await page.request.get(app.base + "/api/v1/auth/session")).json();
  expect(session.user?.name).toBe("alice");

  // The turn runs and streams on the cookie alone.
  await submitProblem(page);
  await expectStepsDone(page, 3);
  await waitForFooter(page);

  await page.getByTestId("logout").click();
  await expect(page.getByTestId("login")).toBeVisible();
  const old = await fetch(app.base + "/api/v1/sessions", { headers: { cookie: `deepsolve_session=${cookie!.value}` } });
  expect(old.status).toBe(401);
  await page.goto(app.base + "/history");
  await expect(page.getByTestId("login")).toBeVisible();
});

test("another user's session is not reachable, in the page or the API", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", users: ["alice", "bob"] });
  const created = await fetch(app.base + "/api/v1/turns", {
    method: "POST",
    headers: { ...bearer(app.tokens.alice), "content-type": "application/json" },
    body: JSON.stringify({ problem: "Alice's private problem: factor x^2-1" }),
  });
  expect(created.status).toBe(201);
  const { session_id: sessionId } = await created.json();

  const api = await fetch(`${app.base}/api/v1/sessions/${sessionId}`, { headers: bearer(app.tokens.bob) });
  expect(api.status).toBe(404);

  await page.goto(app.base + "/login");
  await signIn(page, app.tokens.bob);
  await expect(page.getByTestId("problem")).toBeVisible();
  await page.goto(`${app.base}/sessions/${sessionId}`);
  await expect(page.getByTestId("not-found").or(page.getByTestId("error")).first()).toContainText(/not found/i);
  await expect(page.getByText("Alice's private problem")).toHaveCount(0);
  expect((await page.request.get(`${app.base}/api/v1/sessions/${sessionId}`)).status()).toBe(404);

  await page.goto(app.base + "/history");
  await expect(page.getByTestId("history")).toBeVisible();
  await expect(page.getByTestId("history")).not.toContainText("Alice's private problem");
});

test("a revoked browser session sends the page back to sign-in", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", users: ["alice", "bob"] });
  await page.goto(app.base + "/login");
  // The solve page loads capabilities and settings after it shows the editor; revoking before
  // they answer would send the page to sign-in before the test acts on it.
  const loaded = ["/api/v1/capabilities", "/api/v1/capabilities/settings"].map((path) =>
    page.waitForResponse((response) => new URL(response.url()).pathname === path),
  );
  await signIn(page, app.tokens.bob);
  await expect(page.getByTestId("problem")).toBeVisible();
  for (const response of await Promise.all(loaded)) expect(response.status()).toBe(200);
  await app.server.cli(["users", "revoke", "bob"]);
  // Acting on the dead session: the page says so, or asks to sign in again.
  await submitProblem(page);
  await expect(page.getByTestId("login").or(page.getByTestId("error")).first()).toBeVisible();
  await page.reload();
  await expect(page.getByTestId("login")).toBeVisible();
});
