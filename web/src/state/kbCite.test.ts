// @vitest-environment jsdom
// The recorded log of a solve over a knowledge base (the mock's kb-cite policy, a real server).
import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../render/markdown";
import { fixture } from "./fixtures";
import { initialTurnState, reduceAll } from "./view";

describe("a recorded solve citing a knowledge base", () => {
  const events = fixture("kb-cite");
  const state = reduceAll(initialTurnState(events[0].turn_id), events);

  it("the answer's sources are the rag hit and the read source, by n", () => {
    expect(state.sources.map((s) => [s.n, s.title])).toEqual([
      [1, "limits.md"],
      [2, "limits.md"],
    ]);
    expect(state.sources[0].section).toBe("Limits › The squeeze theorem");
    expect(state.sources[0].excerpt).toContain("squeeze theorem");
    // What the tools numbered includes everything the answer cites.
    const numbered = new Set(state.numbered.map((s) => s.n));
    for (const s of state.sources) expect(numbered.has(s.n)).toBe(true);
  });

  it("the answer renders each marker as a link with its card; the summaries cite too", () => {
    const citations = { sources: state.sources, scope: state.turnId, pageLabel: (n: number) => `p. ${n}` };
    const root = document.createElement("div");
    root.innerHTML = renderMarkdown(state.answer?.text ?? "", citations);
    expect(Array.from(root.querySelectorAll("a.cite-link"), (a) => a.textContent)).toEqual(["[1]", "[2]"]);
    expect(root.querySelector(".cite-card .cite-title")?.textContent).toBe("limits.md");
    const summary = state.plan?.steps[0].summary ?? "";
    expect(summary).toContain("[1]");
    const s1 = document.createElement("div");
    s1.innerHTML = renderMarkdown(summary, { ...citations, sources: state.numbered });
    expect(s1.querySelector("a.cite-link")?.textContent).toBe("[1]");
  });
});
