// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { findStored, isInlineImage, isOurFigure } from "./components/artifacts";
import { markdownOf } from "./exportMarkdown";
import { firstLine, formatDuration, formatMoney, costOf } from "./format";
import { stopReasonText, translator, type Key } from "./i18n";
import { checkKnob, collectKnobs, describeClamp } from "./knobs";
import type { KnobView, StopReason } from "./protocol";
import { parseRoute } from "./router";
import { initialTurnState, type TurnState } from "./state/view";

const t = translator("en");
const zh = translator("zh");
const rounds: KnobView = { key: "max_rounds", default: 12, min: 1, max: 50, integer: true, help: "", help_zh: "" };
const temperature: KnobView = { key: "temperature", default: 0.3, min: 0, max: 2, integer: false, help: "", help_zh: "" };

describe("knob checks", () => {
  it("treat an empty field as the value in force", () => {
    expect(checkKnob(rounds, "  ", t)).toEqual({ ok: true, value: null });
  });
  it("refuse a value out of range, naming the knob and the range", () => {
    const check = checkKnob(rounds, "99", t);
    expect(check).toEqual({ ok: false, message: "max_rounds must be between 1 and 50." });
  });
  it("refuse a fraction for an integer knob and text for any", () => {
    expect(checkKnob(rounds, "2.5", t).ok).toBe(false);
    expect(checkKnob(temperature, "warm", t).ok).toBe(false);
    expect(checkKnob(temperature, "0.7", t)).toEqual({ ok: true, value: 0.7 });
  });
  it("collect only filled-in knobs, or the first refusal", () => {
    expect(collectKnobs([rounds, temperature], { max_rounds: "20", temperature: "" }, t)).toEqual({
      ok: true,
      config: { max_rounds: 20 },
    });
    const refused = collectKnobs([rounds, temperature], { max_rounds: "0", temperature: "5" }, t);
    expect(refused.ok === false && refused.key).toBe("max_rounds");
  });
  it("say what the server clamped: asked, applied and the range, in both languages", () => {
    const clamp = { key: "solve.max_rounds", asked: "99", applied: 50, min: 1, max: 50 };
    expect(describeClamp(clamp, t, "en")).toBe("asked 99, applied 50 (allowed 1 to 50)");
    expect(describeClamp(clamp, zh, "zh")).toBe("请求 99，实际采用 50（允许范围 1 至 50）");
    expect(describeClamp({ ...clamp, asked: ".inf" }, t, "en")).toContain("asked .inf,");
  });
});

describe("routes", () => {
  it("name every page and nothing else", () => {
    expect(parseRoute("/")).toEqual({ page: "solve" });
    expect(parseRoute("/history/")).toEqual({ page: "history" });
    expect(parseRoute("/settings")).toEqual({ page: "settings" });
    expect(parseRoute("/login")).toEqual({ page: "login" });
    expect(parseRoute("/sessions/ses_1")).toEqual({ page: "session", id: "ses_1" });
    expect(parseRoute("/sessions/a%2Fb")).toEqual({ page: "session", id: "a/b" });
    expect(parseRoute("/sessions/x/y")).toEqual({ page: "missing" });
    expect(parseRoute("/knowledge")).toEqual({ page: "knowledge" });
    expect(parseRoute("/knowledge/Calculus%20notes")).toEqual({ page: "kb", id: "Calculus notes" });
    expect(parseRoute("/knowledge/a/b")).toEqual({ page: "missing" });
    expect(parseRoute("/nope")).toEqual({ page: "missing" });
  });
});

describe("the dictionaries", () => {
  const reasons: StopReason[] = [
    "max_rounds", "context_limit", "turn_timeout", "model_error", "cancelled", "answered",
    "answered_with_open_steps", "answered_without_plan", "budget", "repetition", "empty_rounds", "format_errors",
  ];
  it("say every stop reason in words, in both languages", () => {
    for (const reason of reasons) {
      expect(stopReasonText(t, reason)).not.toContain("stop.");
      expect(stopReasonText(zh, reason)).toMatch(/[\u4e00-\u9fff]/);
    }
  });
  it("fill parameters and leave unknown ones visible", () => {
    expect(t("turn.round", { r: 3, n: 12 })).toBe("round 3 of 12");
    expect(zh("turn.round", { r: 3, n: 12 })).toBe("第 3 / 12 轮");
    expect(t("turn.round" as Key, { r: 3 })).toBe("round 3 of {n}");
  });
});

describe("formatting", () => {
  it("durations, money, first lines", () => {
    expect(formatDuration("en", 340)).toBe("340 ms");
    expect(formatDuration("en", 3200)).toBe("3.2 s");
    expect(formatDuration("zh", 125_000)).toBe("2 分 5 秒");
    expect(formatMoney("en", 1.5, "USD")).toBe("$1.50");
    expect(formatMoney("en", 2, "credits")).toBe("2.00 credits");
    expect(costOf({ prompt_tokens: 1_000_000, completion_tokens: 2_000_000, estimated: false }, {
      input_per_mtok: 0.5, output_per_mtok: 1.5, currency: "USD",
    })).toBe(3.5);
    expect(firstLine("\n  Solve $x$.\nmore")).toBe("Solve $x$.");
  });
});

describe("artifacts", () => {
  const stored = [
    { id: "a1", name: "plot.png", mime: "image/png", size: 10, url: "/api/v1/artifacts/a1" },
    { id: "a2", name: "out/data.csv", mime: "text/csv", size: 5, url: "/api/v1/artifacts/a2" },
  ];
  it("match a tool's workspace path to the stored file", () => {
    expect(findStored(stored, { path: "plot.png", mime: "image/png", size: 10 })?.id).toBe("a1");
    expect(findStored(stored, { path: "out/data.csv", mime: "text/csv", size: 5 })?.id).toBe("a2");
    expect(findStored(stored, { path: "sub/plot.png", mime: "image/png", size: 10 })?.id).toBe("a1");
    expect(findStored(stored, { path: "missing.txt", mime: "text/plain", size: 1 })).toBeNull();
  });
  it("show only raster images inline", () => {
    expect(isInlineImage("image/png")).toBe(true);
    expect(isInlineImage("image/svg+xml")).toBe(false);
    expect(isInlineImage("text/html")).toBe(false);
  });
  it("show an SVG inline only when deepsolve drew it", () => {
    const svg = { path: "geogebra_call_1.svg", mime: "image/svg+xml", size: 10 };
    expect(isOurFigure({ ...svg, rendered_sha256: "ab12" })).toBe(true);
    expect(isOurFigure(svg)).toBe(false);
    expect(isOurFigure({ ...svg, mime: "text/html", rendered_sha256: "ab12" })).toBe(false);
  });
});

describe("export as Markdown", () => {
  it("has the problem, the plan with summaries, and the answer", () => {
    const state: TurnState = {
      ...initialTurnState("turn_1"),
      problem: "Solve $x^2=4$.",
      plan: {
        analysis: "Take square roots.",
        steps: [
          { id: "S1", goal: "roots", status: "done", summary: "$x=\\pm 2$", timeline: [] },
          { id: "S2", goal: "check", status: "pending", summary: null, timeline: [] },
        ],
      },
      answer: { text: "$x = 2$ or $x = -2$", streaming: false, forced: false },
    };
    const md = markdownOf(state, t);
    expect(md).toContain("# Problem\n\nSolve $x^2=4$.");
    expect(md).toContain("1. ✓ **S1** roots\n   $x=\\pm 2$");
    expect(md).toContain("2. **S2** check");
    expect(md).toContain("## Answer\n\n$x = 2$ or $x = -2$");
  });
});
