import { describe, expect, it } from "vitest";
import { buildRequest, engineText, percent, progressFraction, svgDataUrl, tallyAccuracy } from "./evals";

describe("the evaluation form's request", () => {
  const base = { source: "shipped" as const, shipped: "zh-arith", file: null, modes: ["plain"], limit: "3" };

  it("names a shipped set with the modes and the limit", () => {
    expect(buildRequest(base)).toEqual({ ok: true, body: { set: "zh-arith", modes: ["plain"], limit: 3 } });
    expect(buildRequest({ ...base, limit: " " })).toEqual({ ok: true, body: { set: "zh-arith", modes: ["plain"] } });
  });

  it("uploads the file's text under its name", () => {
    const file = { name: "mine.jsonl", text: '{"question":"q","answer":"1"}' };
    expect(buildRequest({ ...base, source: "upload", file })).toEqual({
      ok: true,
      body: { set: "mine.jsonl", data: file.text, modes: ["plain"], limit: 3 },
    });
  });

  it("says what is missing or wrong", () => {
    expect(buildRequest({ ...base, modes: [] })).toEqual({ ok: false, problem: "noModes" });
    expect(buildRequest({ ...base, source: "upload" })).toEqual({ ok: false, problem: "noFile" });
    for (const limit of ["0", "-1", "2.5", "many"]) expect(buildRequest({ ...base, limit })).toEqual({ ok: false, problem: "badLimit" });
  });
});

describe("numbers shown", () => {
  it("formats accuracy and progress", () => {
    expect(percent(0.5)).toBe("50.0 %");
    expect(tallyAccuracy({ mode: "plain", done: 0, correct: 0, errors: 0 })).toBe(0);
    expect(tallyAccuracy({ mode: "plain", done: 4, correct: 3, errors: 0 })).toBe(0.75);
    expect(progressFraction({ done: 3, total: 0 })).toBe(0);
    expect(progressFraction({ done: 9, total: 6 })).toBe(1);
  });

  it("counts the answers with engine text and names them", () => {
    expect(engineText({ engine_text: [] })).toEqual({ count: "0", ids: "" });
    expect(engineText({ engine_text: ["line-3", "line-9"] })).toEqual({ count: "2", ids: "line-3, line-9" });
    // A report written before the count existed.
    expect(engineText({})).toEqual({ count: "—", ids: "" });
  });

  it("turns an SVG into an image URL with its markup escaped", () => {
    const url = svgDataUrl('<svg xmlns="http://www.w3.org/2000/svg"><text>a#b</text></svg>');
    expect(url.startsWith("data:image/svg+xml;charset=utf-8,")).toBe(true);
    expect(url).not.toContain("#");
    expect(url).not.toContain("<");
  });
});
