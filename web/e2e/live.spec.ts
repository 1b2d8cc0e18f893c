// A live turn under trouble: the connection cut mid-turn, a cancel, the server killed.
import { test, expect, submitProblem, waitForFooter, expectStepsDone, latestTurnId, latestSessionId, expectStillRunning, openAllWork } from "./fixtures";
import { CuttableProxy, SLOW, eventLog, narrations, occurrences, plainPieces } from "./harness";

test("a connection cut mid-turn: after it every step, card and answer shows once, nothing lost", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", ...SLOW });
  const proxy = new CuttableProxy(new URL(app.base));
  await proxy.start();
  try {
    // What the browser receives over EventSource, per message (its `id:` is the seq).
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("Network.enable");
    const received: number[] = [];
    cdp.on("Network.eventSourceMessageReceived", (message) => received.push(Number(message.eventId)));

    const streams: string[] = [];
    page.on("request", (request) => {
      if (/\/api\/v1\/turns\/[^/]+\/events/.test(request.url())) streams.push(request.url());
    });
    await page.goto(proxy.base + "/");
    await submitProblem(page);
    await expect(page.locator('[data-testid="step"][data-status="done"]').first()).toBeVisible({ timeout: 60_000 });
    await expectStillRunning(page);
    // The live checklist marks the step being worked.
    await expect(page.locator('[data-testid="step"][aria-current="step"]')).toHaveCount(1);
    await expect(page.locator('[data-testid="step"][aria-current="step"]')).toHaveAttribute("data-status", "current");
    await proxy.cut(2_000);
    await waitForFooter(page);
    await expectStepsDone(page, 3);
    await openAllWork(page);
    expect(streams.length, "the page opened the event stream again after the cut").toBeGreaterThan(1);

    const turnId = await latestTurnId(app.base);
    const log = await eventLog(app.base, turnId);
    const last = log[log.length - 1];
    expect(last.type).toBe("turn_finished");
    // One card per call, the spine's (plan, finish step) included.
    const calls = log.filter((e) => e.type === "tool_call");
    await expect(page.getByTestId("tool-card")).toHaveCount(calls.length);
    await expect(page.getByTestId("answer")).toHaveCount(1);
    const shown = (await page.locator("body").textContent()) ?? "";
    expect(occurrences(shown, "Solution.")).toBe(1);
    // Every narrated sentence once: a replayed delta would double it, a lost one cut it.
    const pieces = narrations(log).flatMap(plainPieces);
    expect(pieces.length).toBeGreaterThan(2);
    for (const piece of pieces) expect(occurrences(shown, piece), piece).toBe(1);

    // The seqs the browser received over SSE cover the whole log: none missing. (One received
    // twice is allowed: the client reads again from what it had applied, and ignores a repeat;
    // a repeat applied would have doubled a sentence above.)
    if (received.length) {
      const seqs = [...new Set(received)].sort((a, b) => a - b);
      expect(seqs).toEqual(log.map((e) => e.seq));
    } else {
      test.info().annotations.push({ type: "note", description: "the page does not use EventSource; seqs checked through the DOM only" });
    }
  } finally {
    await proxy.stop();
  }
});

test("cancel mid-turn: the footer says cancelled", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", ...SLOW });
  await page.goto(app.base + "/");
  await submitProblem(page);
  await expect(page.getByTestId("plan")).toBeVisible();
  const cancel = page.getByTestId("cancel");
  await expect(cancel).toBeVisible();
  // One turn per session runs at a time: the follow-up waits, and says so.
  await expect(page.getByTestId("submit")).toBeDisabled();
  await expect(page.getByTestId("followup-wait")).toBeVisible();
  await cancel.click();
  await expect(page.getByTestId("footer")).toContainText(/cancel/i, { timeout: 30_000 });
  await expect(page.getByTestId("cancel")).toHaveCount(0);
  await expect(page.getByTestId("submit")).toBeEnabled();
  await expect(page.getByTestId("followup-wait")).toHaveCount(0);
  const turn = await (await fetch(`${app.base}/api/v1/turns/${await latestTurnId(app.base)}`)).json();
  expect(turn.stop_reason ?? turn.status).toMatch(/cancel/);
});

test("the server killed mid-turn: after a restart the turn shows interrupted, Resume finishes it", async ({ page, deepsolve }) => {
  const app = await deepsolve({ policy: "showcase", ...SLOW });
  await page.goto(app.base + "/");
  await submitProblem(page);
  await expect(page.locator('[data-testid="step"][data-status="done"]').first()).toBeVisible({ timeout: 60_000 });
  await expectStillRunning(page);
  const sessionId = await latestSessionId(app.base);
  await app.server.kill();
  await app.server.start();
  await page.goto(`${app.base}/sessions/${sessionId}`);
  await expect(page.getByText(/interrupted/i).first()).toBeVisible();
  const resume = page.getByTestId("resume");
  await expect(resume).toBeVisible();
  await resume.click();
  await waitForFooter(page, /answered/i);
  await expectStepsDone(page, 3);
  await expect(page.getByTestId("answer").last()).toContainText("Solution.");
});
