// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import type { CitedSource } from "../kb";
import { citedNumbers, ID_PREFIX, renderMarkdown, sourceAnchor, type Citations } from "./markdown";

function dom(html: string): HTMLElement {
  const root = document.createElement("div");
  root.innerHTML = html;
  return root;
}

const LECTURE: CitedSource = {
  n: 1,
  title: "lecture.pdf",
  kb: "kb_1",
  document_id: "doc_1",
  page: 12,
  chunk_id: "chk_1",
  section: "3 Limits › 3.2 Squeeze",
  excerpt: "A sequence squeezed between two sequences with the same limit has that limit too.",
};
const NOTES: CitedSource = { n: 2, title: "notes.md", document_id: "doc_2", excerpt: "Second source." };

function citations(sources: CitedSource[] = [LECTURE, NOTES]): Citations {
  return { sources, scope: "turn_a", pageLabel: (p) => `p. ${p}` };
}

describe("citations in an answer", () => {
  it("a marker that resolves becomes a link to the source with a card naming document, page, section and passage", () => {
    const root = dom(renderMarkdown("By the definition [1], the limit is 0.", citations()));
    const link = root.querySelector<HTMLAnchorElement>("a.cite-link");
    expect(link?.textContent).toBe("[1]");
    expect(link?.getAttribute("href")).toBe(`#${sourceAnchor("turn_a", 1)}`);
    // An in-page link: it stays in this tab.
    expect(link?.hasAttribute("target")).toBe(false);
    const card = root.querySelector(".cite-card");
    expect(card?.getAttribute("role")).toBe("tooltip");
    expect(card?.querySelector(".cite-title")?.textContent).toBe("lecture.pdf");
    expect(card?.querySelector(".cite-place")?.textContent).toBe("p. 12 · 3 Limits › 3.2 Squeeze");
    expect(card?.querySelector(".cite-excerpt")?.textContent).toContain("squeezed between two sequences");
    // The link is described by the card, under the id the sanitiser gave it.
    expect(card?.id.startsWith(ID_PREFIX)).toBe(true);
    expect(link?.getAttribute("aria-describedby")).toBe(card?.id);
    expect(root.textContent).toContain("the limit is 0.");
  });

  it("a marker that does not resolve stays text, and so does every marker without sources", () => {
    const root = dom(renderMarkdown("As shown [7] and [1].", citations([LECTURE])));
    expect(root.querySelectorAll("a.cite-link")).toHaveLength(1);
    expect(root.textContent).toContain("As shown [7] and");
    const plain = dom(renderMarkdown("As shown [1]."));
    expect(plain.querySelector("a")).toBeNull();
    expect(plain.textContent?.trim()).toBe("As shown [1].");
  });

  it("markers inside code spans and blocks stay code", () => {
    const root = dom(renderMarkdown("Use `xs[1]` here.\n\n```python\nprint(xs[1])\n```\n\nand [2].", citations()));
    expect(root.querySelector("p code")?.textContent).toBe("xs[1]");
    expect(root.querySelector("pre code")?.textContent).toContain("print(xs[1])");
    expect(root.querySelectorAll("a.cite-link")).toHaveLength(1);
    expect(root.querySelector("a.cite-link")?.textContent).toBe("[2]");
  });

  it("groups, runs and ranges each link every number they name", () => {
    const root = dom(renderMarkdown("See [1, 2], [1][2] and [1–2].", citations()));
    expect(Array.from(root.querySelectorAll("a.cite-link"), (a) => a.textContent)).toEqual(["[1]", "[2]", "[1]", "[2]", "[1]", "[2]"]);
    // Every card has its own id: the same source cited twice is two descriptions.
    const ids = Array.from(root.querySelectorAll(".cite-card"), (c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("a link the model wrote as [1](url) stays a link", () => {
    const root = dom(renderMarkdown("[1](https://example.com/x)", citations()));
    expect(root.querySelector("a.cite-link")).toBeNull();
    expect(root.querySelector("a")?.getAttribute("href")).toBe("https://example.com/x");
  });

  it("a web source's card names its host, and a non-web URL names none", () => {
    const web: CitedSource = { n: 1, title: "Squeeze theorem", url: "https://math.example.org/squeeze?x=1", excerpt: "Squeezed." };
    const odd: CitedSource = { n: 2, title: "odd", url: "javascript:alert(1)" };
    const root = dom(renderMarkdown("See [1] and [2].", citations([web, odd])));
    const places = [...root.querySelectorAll(".cite-card")].map((c) => c.querySelector(".cite-place")?.textContent ?? "");
    expect(places).toEqual(["math.example.org", ""]);
  });

  it("a title or an excerpt with HTML in it shows as text", () => {
    const hostile: CitedSource = {
      n: 1,
      title: '<img src=x onerror="alert(1)">.pdf',
      section: "<b>bold</b>",
      excerpt: '<script>alert(1)</script><a href="javascript:alert(2)">x</a>',
      page: 3,
    };
    const root = dom(renderMarkdown("Hence [1].", citations([hostile])));
    expect(root.querySelector("img, script, b")).toBeNull();
    expect(root.querySelectorAll("a")).toHaveLength(1);
    expect(root.querySelector(".cite-title")?.textContent).toBe(hostile.title);
    expect(root.querySelector(".cite-excerpt")?.textContent).toContain("<script>alert(1)</script>");
  });

  it("a long excerpt is clipped for the card", () => {
    const long: CitedSource = { n: 1, title: "big.txt", excerpt: "word ".repeat(400) };
    const text = dom(renderMarkdown("x [1]", citations([long]))).querySelector(".cite-excerpt")?.textContent ?? "";
    expect(text.length).toBeLessThanOrEqual(320);
    expect(text.endsWith("…")).toBe(true);
  });
});

describe("citedNumbers", () => {
  it("reads lists and ranges, refusing absurd ones", () => {
    expect(citedNumbers("1")).toEqual([1]);
    expect(citedNumbers("1, 3")).toEqual([1, 3]);
    expect(citedNumbers("2–4")).toEqual([2, 3, 4]);
    expect(citedNumbers("1-2, 5")).toEqual([1, 2, 5]);
    expect(citedNumbers("4–2")).toEqual([4, 2]);
    expect(citedNumbers("1–900")).toEqual([1, 900]);
  });
});
