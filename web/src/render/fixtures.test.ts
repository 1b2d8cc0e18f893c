// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { FIXTURES } from "../state/fixtures";
import { mountMath, renderMarkdown } from "./markdown";

describe("the recorded turns' text", () => {
  for (const [name, events] of Object.entries(FIXTURES)) {
    it(`${name}: renders as Markdown without a style attribute or script`, () => {
      const texts = events.flatMap((e) => (e.type === "answer" || e.type === "text_delta" ? [e.text] : []));
      for (const text of texts) {
        const html = renderMarkdown(text);
        expect(html).not.toMatch(/style=|<script/i);
        const root = document.createElement("div");
        root.innerHTML = html;
        mountMath(root);
        if (text.trim()) expect(root.textContent?.trim()).not.toBe("");
      }
    });
  }

  it("the answer's Markdown is read: bold and a list", () => {
    const answer = FIXTURES["well-behaved-code"].find((e) => e.type === "answer");
    const root = document.createElement("div");
    root.innerHTML = renderMarkdown(answer && answer.type === "answer" ? answer.text : "");
    expect(root.querySelector("strong")?.textContent).toBe("Answer:");
    expect(root.querySelectorAll("li")).toHaveLength(3);
  });
});
