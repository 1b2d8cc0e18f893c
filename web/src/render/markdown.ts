// Model text to sanitised HTML. Maths is left as placeholders that `mountMath` renders with
// KaTeX's DOM path afterwards: that path sets styles through the CSSOM, which the page's CSP
// allows, while KaTeX's HTML string relies on inline style attributes, which it forbids.
import { Marked, type Tokens, type TokenizerAndRendererExtension } from "marked";
import DOMPurify from "dompurify";
import katex from "katex";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import plaintext from "highlight.js/lib/languages/plaintext";
import python from "highlight.js/lib/languages/python";
import typescript from "highlight.js/lib/languages/typescript";

// Only the languages tool calls and answers use, to keep the bundle small.
hljs.registerLanguage("python", python);
hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("typescript", typescript);
hljs.registerLanguage("bash", bash);
hljs.registerLanguage("json", json);
hljs.registerLanguage("plaintext", plaintext);
hljs.registerAliases(["shell", "console"], { languageName: "bash" });

export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

/** Highlighted HTML for `code` (escaped plain text when the language is not registered). */
export function highlightCode(code: string, language?: string): { html: string; language: string | null } {
  const name = (language ?? "").trim().toLowerCase();
  if (name && hljs.getLanguage(name)) {
    return { html: hljs.highlight(code, { language: name, ignoreIllegals: true }).value, language: name };
  }
  return { html: escapeHtml(code), language: null };
}

// --- maths -----------------------------------------------------------------------------------

type MathToken = { type: "math"; raw: string; tex: string; display: boolean };

function mathPlaceholder(token: MathToken): string {
  const cls = token.display ? "math-display" : "math-inline";
  // The source stays visible until KaTeX replaces it (and is what a copy of unrendered text gets).
  return `<span class="${cls}" data-tex="${escapeHtml(token.tex)}">${escapeHtml(token.raw)}</span>`;
}

const isSpace = (c: string | undefined) => c === undefined || /\s/.test(c);
const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";

/**
 * `$…$` by pandoc's rule: the opening `$` is followed by a non-space, the closing one is
 * preceded by a non-space and not followed by a digit, and nothing between is an unescaped `$`
 * (so "$5 and $6" stays text).
 */
function singleDollar(src: string): MathToken | undefined {
  if (src[0] !== "$" || isSpace(src[1]) || src[1] === "$") return undefined;
  for (let j = 1; j < src.length; j++) {
    const c = src[j];
    if (c === "\\") {
      j++;
      continue;
    }
    if (c === "\n" && src[j + 1] === "\n") return undefined;
    if (c !== "$") continue;
    if (isSpace(src[j - 1]) || isDigit(src[j + 1])) return undefined;
    return { type: "math", raw: src.slice(0, j + 1), tex: src.slice(1, j), display: false };
  }
  return undefined;
}

/** Between `open` and `close`, not empty; undefined while unclosed (a streaming partial). */
function delimited(src: string, open: string, close: string, display: boolean): MathToken | undefined {
  if (!src.startsWith(open)) return undefined;
  const end = src.indexOf(close, open.length);
  if (end < 0) return undefined;
  const tex = src.slice(open.length, end);
  if (!tex.trim()) return undefined;
  return { type: "math", raw: src.slice(0, end + close.length), tex, display };
}

const inlineMath: TokenizerAndRendererExtension = {
  name: "math",
  level: "inline",
  start(src: string) {
    const m = /\$|\\[([]/.exec(src);
    return m ? m.index : undefined;
  },
  tokenizer(src: string) {
    if (src.startsWith("$$")) {
      // An unclosed `$$` (text still streaming) is text, both dollars of it.
      return delimited(src, "$$", "$$", true) ?? { type: "text", raw: "$$", text: "$$" };
    }
    return singleDollar(src) ?? delimited(src, "\\(", "\\)", false) ?? delimited(src, "\\[", "\\]", true);
  },
  renderer(token) {
    return mathPlaceholder(token as unknown as MathToken);
  },
};

// Display maths on lines of their own, so their content is never read as Markdown blocks.
const BLOCK_MATH = [/^ {0,3}\$\$((?:[^$]|\$(?!\$))+?)\$\$[ \t]*(?:\n+|$)/, /^ {0,3}\\\[((?:[^\\]|\\(?!\]))+?)\\\][ \t]*(?:\n+|$)/];

const blockMath: TokenizerAndRendererExtension = {
  name: "mathBlock",
  level: "block",
  start(src: string) {
    const m = /(?:^|\n) {0,3}(?:\$\$|\\\[)/.exec(src);
    if (!m) return undefined;
    return src[m.index] === "\n" ? m.index + 1 : m.index;
  },
  tokenizer(src: string) {
    for (const re of BLOCK_MATH) {
      const m = re.exec(src);
      if (m && m[1].trim()) return { type: "mathBlock", raw: m[0], tex: m[1].trim(), display: true };
    }
    return undefined;
  },
  renderer(token) {
    const t = token as unknown as MathToken;
    return `<p class="math-block">${mathPlaceholder({ ...t, raw: t.raw.trim() })}</p>\n`;
  },
};

// --- Markdown --------------------------------------------------------------------------------

// Raw HTML in model text is shown as text, except these bare tags (no attributes), which models
// use in tables and formulas' prose. So the sanitiser never even parses an event handler (a
// browser reports a CSP violation for one as soon as it is parsed, even in an inert document).
const BARE_TAG = /^<\/?(?:br|sub|sup|kbd|b|i|u|s|em|strong|mark|small|del|ins)\s*\/?>$/i;

function rawHtml(text: string, block: boolean): string {
  if (!block && BARE_TAG.test(text)) return text.toLowerCase().replace(/\s+/g, "");
  return block ? `<p>${escapeHtml(text.trim())}</p>\n` : escapeHtml(text);
}

const INLINE_ARTIFACT = "/api/v1/artifacts/";

const markdown = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  extensions: [blockMath, inlineMath],
  renderer: {
    code({ text, lang }: Tokens.Code) {
      const { html, language } = highlightCode(text, (lang ?? "").split(/\s/)[0]);
      const cls = language ? `hljs language-${language}` : "hljs";
      return `<pre><code class="${cls}">${html}\n</code></pre>\n`;
    },
    checkbox({ checked }: Tokens.Checkbox) {
      return checked ? "☑ " : "☐ ";
    },
    html({ text, block }: Tokens.HTML | Tokens.Tag) {
      return rawHtml(text, block);
    },
    image({ href, text }: Tokens.Image) {
      // Only the turn's own images load (the page's CSP refuses other origins anyway); any
      // other picture is a link to it.
      if (href.startsWith(INLINE_ARTIFACT)) return `<img src="${escapeHtml(href)}" alt="${escapeHtml(text)}">`;
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
  },
});

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: [
    ...["style", "form", "input", "button", "textarea", "select", "option"],
    ...["iframe", "object", "embed", "base", "link", "meta"],
  ],
  FORBID_ATTR: ["style", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
  ADD_ATTR: ["data-tex"],
  SANITIZE_NAMED_PROPS: true,
};

type Purifier = ReturnType<typeof DOMPurify>;
let purifier: Purifier | null = null;

const SAFE_HREF = /^(?:(?:https?|mailto):|#|\/|\.{0,2}\/|[^:/?#]*(?:[/?#]|$))/i;

/** Our own DOMPurify instance (its hooks are not shared with any other user of the library). */
function purify(): Purifier {
  if (purifier) return purifier;
  const p = DOMPurify(window);
  p.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      const href = node.getAttribute("href");
      if (href !== null && !SAFE_HREF.test(href.trim())) node.removeAttribute("href");
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  // Set once: passing the config to every call would rebuild the allowlists each time.
  p.setConfig(PURIFY_CONFIG);
  purifier = p;
  return p;
}

/**
 * Markdown to sanitised HTML with maths as `<span class="math-inline|math-display"
 * data-tex="…">` placeholders and code highlighted (classes only: no style attribute).
 */
export function renderMarkdown(text: string): string {
  return purify().sanitize(markdownToHtml(text));
}

/** Markdown to HTML before sanitising (raw HTML already reduced to text and bare tags). */
export function markdownToHtml(text: string): string {
  return markdown.parse(text) as string;
}

// Formulas already drawn, by mode and source: streamed text re-renders its whole block every
// frame, and a clone is far cheaper than KaTeX (clones keep their CSSOM styles under the CSP).
const drawn = new Map<string, Node[]>();
const DRAWN_MAX = 500;

function draw(el: HTMLElement, tex: string, displayMode: boolean): void {
  const key = `${displayMode ? "D" : "I"}${tex}`;
  const hit = drawn.get(key);
  if (hit) {
    el.replaceChildren(...hit.map((n) => n.cloneNode(true)));
    return;
  }
  katex.render(tex, el, { displayMode, throwOnError: false, trust: false, strict: "ignore", maxSize: 50, maxExpand: 1000 });
  if (drawn.size >= DRAWN_MAX) {
    const oldest = drawn.keys().next().value;
    if (oldest !== undefined) drawn.delete(oldest);
  }
  drawn.set(key, Array.from(el.childNodes, (n) => n.cloneNode(true)));
}

/** Render every maths placeholder under `root` with KaTeX (once each). */
export function mountMath(root: ParentNode): void {
  for (const el of Array.from(root.querySelectorAll<HTMLElement>("span.math-inline, span.math-display"))) {
    if (el.hasAttribute("data-mounted")) continue;
    try {
      draw(el, el.getAttribute("data-tex") ?? "", el.classList.contains("math-display"));
      el.setAttribute("data-mounted", "");
    } catch {
      // Left as its source text: a formula that cannot be drawn is still readable.
    }
  }
}
