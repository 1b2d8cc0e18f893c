// @vitest-environment jsdom
import { describe, expect, it, vi } from "vitest";
import katex from "katex";
import { highlightCode, markdownToHtml, mountMath, renderMarkdown } from "./markdown";

function dom(html: string): HTMLElement {
  const root = document.createElement("div");
  root.innerHTML = html;
  return root;
}

/** Everything in the markup that could run script or load another document. */
const DANGEROUS_TAGS = ["script", "iframe", "object", "embed", "svg", "math", "style", "form", "base", "link", "meta"];
const URL_ATTRS = ["href", "src", "xlink:href", "action", "formaction"];

function dangers(html: string): string[] {
  const root = dom(html);
  const found: string[] = [];
  for (const el of Array.from(root.querySelectorAll("*"))) {
    const tag = el.tagName.toLowerCase();
    if (DANGEROUS_TAGS.includes(tag)) found.push(`<${tag}>`);
    for (const attr of Array.from(el.attributes)) {
      if (attr.name.startsWith("on")) found.push(`${tag}[${attr.name}]`);
      if (attr.name === "style") found.push(`${tag}[style]`);
      if (URL_ATTRS.includes(attr.name) && /^\s*(javascript|data|vbscript):/i.test(attr.value)) {
        found.push(`${tag}[${attr.name}=${attr.value}]`);
      }
    }
  }
  if (/<!--/.test(html)) found.push("comment");
  return found;
}

function maths(html: string): { cls: string; tex: string }[] {
  return Array.from(dom(html).querySelectorAll<HTMLElement>("span.math-inline, span.math-display")).map((el) => ({
    cls: el.className,
    tex: el.getAttribute("data-tex") ?? "",
  }));
}

describe("sanitising", () => {
  const vectors = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt&#58;alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="data:text/html,<script>alert(1)</script>">x</a>',
    "<svg onload=alert(1)><circle/></svg>",
    '<iframe src="https://example.com"></iframe>',
    "<!--><img src=x onerror=alert(1)>-->",
    "<!-- --!><img src=x onerror=alert(1)> -->",
    '<p style="color:red" onclick="alert(1)">x</p>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<form action="https://evil.example"><input name=a><button>go</button></form>',
    "$\\href{javascript:alert(1)}{x}$",
    "$x</span><script>alert(1)</script>$",
    '$$"><img src=x onerror=alert(1)>$$',
    "```html\n<script>alert(1)</script>\n```",
    "`<img src=x onerror=alert(1)>`",
  ];
  for (const v of vectors) {
    it(`makes nothing executable of ${JSON.stringify(v)}`, () => {
      const html = renderMarkdown(v);
      expect(dangers(html)).toEqual([]);
      // KaTeX's own output: styles set through the CSSOM and MathML for screen readers.
      const root = dom(html);
      mountMath(root);
      for (const el of Array.from(root.querySelectorAll(".katex-mathml"))) el.remove();
      expect(dangers(root.innerHTML.replace(/ style="[^"]*"/g, ""))).toEqual([]);
      expect(root.querySelector("a[href^='javascript']")).toBeNull();
    });
  }

  it("hands the sanitiser no event handler to parse (a browser reports each as a CSP violation)", () => {
    for (const v of vectors) {
      const parsed = document.createElement("template");
      parsed.innerHTML = markdownToHtml(v);
      const attrs = Array.from(parsed.content.querySelectorAll("*")).flatMap((el) => Array.from(el.attributes));
      expect(attrs.filter((a) => a.name.startsWith("on"))).toEqual([]);
    }
  });

  it("shows raw HTML as text, except a few bare tags", () => {
    const root = dom(renderMarkdown('x<sub>2</sub> and H<SUP>+</SUP>, a<br/>b, <span class="k">k</span> <b onclick="f()">no</b>'));
    expect(root.querySelector("sub")?.textContent).toBe("2");
    expect(root.querySelector("sup")?.textContent).toBe("+");
    expect(root.querySelector("br")).not.toBeNull();
    expect(root.querySelector("span")).toBeNull();
    expect(root.textContent).toContain('<span class="k">k</span>');
    expect(root.textContent).toContain('<b onclick="f()">no');
    const block = dom(renderMarkdown("<div>\n<script>alert(1)</script>\n</div>\n\nafter"));
    expect(block.querySelector("div, script")).toBeNull();
    expect(block.textContent).toContain("<script>alert(1)</script>");
    expect(block.querySelectorAll("p")).toHaveLength(2);
  });

  it("keeps the text of a script as text inside code", () => {
    const root = dom(renderMarkdown("`<script>alert(1)</script>`"));
    expect(root.querySelector("code")?.textContent).toBe("<script>alert(1)</script>");
  });

  it("opens links in a new tab without an opener or referrer", () => {
    const root = dom(renderMarkdown("see [the docs](https://example.com/a) and <https://example.org>"));
    const links = Array.from(root.querySelectorAll("a"));
    expect(links.map((a) => a.getAttribute("href"))).toEqual(["https://example.com/a", "https://example.org"]);
    for (const a of links) {
      expect(a.getAttribute("target")).toBe("_blank");
      expect(a.getAttribute("rel")).toBe("noopener noreferrer");
    }
  });

  it("writes no style attribute anywhere", () => {
    const html = renderMarkdown("# t\n\n**b** _i_ $x^2$ and $$\\frac{1}{2}$$\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n```python\nx = 1\n```\n");
    expect(html).not.toMatch(/style=/i);
  });

  it("shows the turn's own images and links to any other", () => {
    const root = dom(renderMarkdown("![plot](/api/v1/artifacts/art_1/inline) ![far](https://example.com/x.png) ![](data:image/png;base64,AA==)"));
    expect(Array.from(root.querySelectorAll("img")).map((i) => i.getAttribute("src"))).toEqual(["/api/v1/artifacts/art_1/inline"]);
    const links = Array.from(root.querySelectorAll("a"));
    expect(links.map((a) => [a.getAttribute("href"), a.textContent])).toEqual([
      ["https://example.com/x.png", "far"],
      [null, "data:image/png;base64,AA=="],
    ]);
  });

  it("marks a task list with characters, not form inputs", () => {
    const html = renderMarkdown("- [x] done\n- [ ] open\n");
    expect(html).not.toContain("<input");
    expect(dom(html).textContent).toContain("☑ done");
  });
});

describe("maths", () => {
  it("finds each delimiter", () => {
    expect(maths(renderMarkdown("a $x^2$ b"))).toEqual([{ cls: "math-inline", tex: "x^2" }]);
    expect(maths(renderMarkdown("a \\(y_1\\) b"))).toEqual([{ cls: "math-inline", tex: "y_1" }]);
    expect(maths(renderMarkdown("a $$\\sum_i i$$ b"))).toEqual([{ cls: "math-display", tex: "\\sum_i i" }]);
    expect(maths(renderMarkdown("a \\[\\int_0^1 f\\] b"))).toEqual([{ cls: "math-display", tex: "\\int_0^1 f" }]);
  });

  it("reads display maths on lines of their own as one block, Markdown inside untouched", () => {
    const text = "Thus\n\n$$\n- a * b * c\n# x\n$$\n\nand\n\\[\n1. y\n\\]\n";
    expect(maths(renderMarkdown(text))).toEqual([
      { cls: "math-display", tex: "- a * b * c\n# x" },
      { cls: "math-display", tex: "1. y" },
    ]);
    const html = renderMarkdown(text);
    expect(html).not.toContain("<li>");
    expect(html).not.toContain("<h1>");
  });

  it("keeps underscores and stars inside maths away from emphasis", () => {
    expect(maths(renderMarkdown("$a_1 * b_2 * c$ and *em*"))).toEqual([{ cls: "math-inline", tex: "a_1 * b_2 * c" }]);
    expect(renderMarkdown("$a_1 * b_2 * c$ and *em*")).toContain("<em>em</em>");
  });

  it("leaves currency alone", () => {
    expect(maths(renderMarkdown("It costs $5 and $6 a day."))).toEqual([]);
    expect(maths(renderMarkdown("between $5 and $10, or $20"))).toEqual([]);
    expect(maths(renderMarkdown("from $5 to $10 per item, and $x$ more"))).toEqual([{ cls: "math-inline", tex: "x" }]);
    expect(maths(renderMarkdown("$ 5 $"))).toEqual([]);
    expect(maths(renderMarkdown("$x$5"))).toEqual([]);
  });

  it("leaves an escaped dollar alone", () => {
    const html = renderMarkdown("price \\$5 and \\$x\\$");
    expect(maths(html)).toEqual([]);
    expect(dom(html).textContent?.trim()).toBe("price $5 and $x$");
  });

  it("is not maths inside code spans or code blocks", () => {
    expect(maths(renderMarkdown("`$x$` and `\\(y\\)`"))).toEqual([]);
    expect(maths(renderMarkdown("```\n$$z$$\n```\n"))).toEqual([]);
    expect(maths(renderMarkdown("    $x$ indented\n"))).toEqual([]);
  });

  it("shows an unclosed delimiter of streaming text as text", () => {
    for (const partial of ["so $$\\frac{1}{", "so $$\n\\frac{1}{2", "so $x^", "so \\(x", "so \\[x", "so $$a+b$"]) {
      const html = renderMarkdown(partial);
      expect(maths(html)).toEqual([]);
      expect(dom(html).textContent?.trim()).toBe(partial.replace(/\\([([])/g, "$1"));
    }
  });

  it("mountMath renders KaTeX into each placeholder", () => {
    const root = dom(renderMarkdown("inline $e^{i\\pi}+1=0$ and\n\n$$\\frac{a}{b}$$\n"));
    mountMath(root);
    expect(root.querySelectorAll(".katex").length).toBe(2);
    expect(root.querySelectorAll(".katex-display").length).toBe(1);
    expect(root.querySelectorAll("[data-mounted]").length).toBe(2);
    // Running it again changes nothing.
    const before = root.innerHTML;
    mountMath(root);
    expect(root.innerHTML).toBe(before);
  });

  it("draws a formula seen before from a copy, identical to KaTeX's", () => {
    const render = vi.spyOn(katex, "render");
    try {
      const text = "seen $\\binom{n}{k}$ and $$\\sqrt[3]{x}$$ once";
      const first = dom(renderMarkdown(text));
      mountMath(first);
      const calls = render.mock.calls.length;
      expect(calls).toBe(2);
      const second = dom(renderMarkdown(text));
      mountMath(second);
      expect(render.mock.calls.length).toBe(calls);
      expect(second.innerHTML).toBe(first.innerHTML);
      // The copies are the page's own nodes, not shared with the first block.
      expect(second.querySelector(".katex")).not.toBe(first.querySelector(".katex"));
    } finally {
      render.mockRestore();
    }
  });

  it("a formula KaTeX cannot parse, or one asking for a link, shows as an error, not a link", () => {
    const root = dom(renderMarkdown("$\\frac{$ and $\\href{javascript:alert(1)}{x}$ and $\\url{https://e.org}$"));
    mountMath(root);
    expect(root.querySelector("a")).toBeNull();
    expect(root.querySelectorAll(".katex-error, .katex").length).toBeGreaterThan(0);
  });
});

describe("code", () => {
  it("highlights fenced code with hljs classes", () => {
    const root = dom(renderMarkdown("```python\ndef f(x):\n    return x + 1\n```\n"));
    const code = root.querySelector("pre > code");
    expect(code?.className).toBe("hljs language-python");
    expect(code?.querySelector(".hljs-keyword")?.textContent).toBe("def");
    expect(code?.textContent).toBe("def f(x):\n    return x + 1\n");
  });

  it("knows the usual aliases and falls back to plain text", () => {
    expect(highlightCode("echo $HOME", "sh").html).toContain("hljs-variable");
    expect(highlightCode("let a = 1", "ts").language).toBe("ts");
    expect(highlightCode('{"a": 1}', "json").html).toContain("hljs-attr");
    expect(highlightCode("<b>", "cobol")).toEqual({ html: "&lt;b&gt;", language: null });
    const root = dom(renderMarkdown("```\nplain <b>\n```\n"));
    expect(root.querySelector("pre > code")?.className).toBe("hljs");
    expect(root.querySelector("b")).toBeNull();
  });
});
