// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { render } from "preact";
import { act } from "preact/test-utils";
import { CodeBlock, Markdown } from "./Markdown";

function mount(vnode: preact.ComponentChild): HTMLElement {
  const root = document.createElement("div");
  document.body.append(root);
  act(() => render(vnode, root));
  return root;
}

describe("Markdown", () => {
  it("inserts sanitised HTML and draws the maths", () => {
    const root = mount(<Markdown text={"**x** is $\\sqrt{2}$ <img src=x onerror=alert(1)>"} class="answer" />);
    const div = root.firstElementChild as HTMLElement;
    expect(div.className).toBe("markdown answer");
    expect(div.querySelector("strong")?.textContent).toBe("x");
    expect(div.querySelector(".katex")).not.toBeNull();
    expect(div.querySelector("img")).toBeNull();
    expect(div.textContent).toContain("<img src=x onerror=alert(1)>");
  });

  it("re-renders as streamed text grows, maths included", () => {
    const root = document.createElement("div");
    act(() => render(<Markdown text={"so $$\\frac{1}{"} />, root));
    expect(root.querySelector(".katex")).toBeNull();
    expect(root.textContent).toContain("$$\\frac{1}{");
    act(() => render(<Markdown text={"so $$\\frac{1}{2}$$"} />, root));
    expect(root.querySelectorAll(".katex").length).toBe(1);
  });
});

describe("CodeBlock", () => {
  it("highlights arguments as JSON", () => {
    const root = mount(<CodeBlock code={JSON.stringify({ code: "print(1)" }, null, 2)} language="json" />);
    expect(root.querySelector("pre.code-block > code.hljs.language-json .hljs-attr")?.textContent).toBe('"code"');
  });

  it("escapes what it does not know", () => {
    const root = mount(<CodeBlock code={"<script>alert(1)</script>"} />);
    expect(root.querySelector("script")).toBeNull();
    expect(root.querySelector("code")?.textContent).toBe("<script>alert(1)</script>");
  });
});

describe("Markdown with citations", () => {
  const citations = { sources: [{ n: 1, title: "lecture.pdf", page: 2 }], scope: "t1", pageLabel: (n: number) => `p. ${n}` };

  it("links the markers; Escape puts a card away until the marker is left", () => {
    const root = mount(<Markdown text="By [1]." citations={citations} />);
    const link = root.querySelector<HTMLAnchorElement>("a.cite-link");
    const cite = root.querySelector(".cite");
    expect(link?.textContent).toBe("[1]");
    link?.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(cite?.hasAttribute("data-dismissed")).toBe(true);
    link?.dispatchEvent(new FocusEvent("focusout", { bubbles: true, relatedTarget: null }));
    expect(cite?.hasAttribute("data-dismissed")).toBe(false);
  });
});
