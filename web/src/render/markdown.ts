// Model text to sanitised HTML. Maths is left as placeholders (`mountMath` renders them with
// KaTeX's DOM path, which sets styles through the CSSOM: the page's CSP forbids inline style
// attributes, and KaTeX's HTML string relies on them).
import { marked } from "marked";
import DOMPurify from "dompurify";
import katex from "katex";

export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true, breaks: false });
  return DOMPurify.sanitize(html, { FORBID_ATTR: ["style"] });
}

export function mountMath(root: HTMLElement): void {
  for (const el of Array.from(root.querySelectorAll<HTMLElement>("span.math-inline, span.math-display"))) {
    const tex = el.dataset.tex ?? "";
    katex.render(tex, el, { displayMode: el.classList.contains("math-display"), throwOnError: false, trust: false });
  }
}
