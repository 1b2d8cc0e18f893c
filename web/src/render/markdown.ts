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
import { sourcePlace, type CitedSource } from "../kb";

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

// --- citations -------------------------------------------------------------------------------

/** How an answer's `[n]` markers become links with a card: its sources and the labels to use. */
export type Citations = {
  sources: CitedSource[];
  /** Unique on the page (the turn id): card ids and the Sources list's anchors start with it. */
  scope: string;
  /** Where the card ids start, when the same scope is rendered in more than one place. */
  cardScope?: string;
  /** "p. 12" in the page's language. */
  pageLabel: (page: number) => string;
};

/** DOMPurify prefixes every `id` it keeps with this (so model text cannot clobber the page's). */
export const ID_PREFIX = "user-content-";

/** The anchor of source `n` in the Sources list under the answer. */
export function sourceAnchor(scope: string, n: number): string {
  return `src-${scope}-${n}`;
}

type CiteToken = { type: "cite"; raw: string; numbers: number[] };

// `[1]`, `[1, 3]`, `[1–3]` (also "-" and "—"); `[1][2]` is two markers in a row.
const CITE = /^\[(\d{1,4}(?:\s*[,，–—-]\s*\d{1,4})*)\]/;
const RANGE_MAX = 50;

/** The numbers a marker's inside names, ranges expanded (a backwards or huge range is its ends). */
export function citedNumbers(inside: string): number[] {
  const out: number[] = [];
  const parts = inside.split(/\s*[,，]\s*/);
  for (const part of parts) {
    const range = /^(\d+)\s*[–—-]\s*(\d+)$/.exec(part);
    if (range) {
      const [a, b] = [Number(range[1]), Number(range[2])];
      if (b >= a && b - a <= RANGE_MAX) for (let n = a; n <= b; n++) out.push(n);
      else out.push(a, b);
    } else if (/^\d+$/.test(part)) out.push(Number(part));
  }
  return out;
}

// The citations of the text being rendered: set only around one synchronous parse.
let citing: { byN: Map<number, CitedSource>; options: Citations; count: number } | null = null;

const EXCERPT_MAX = 320;

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return [...flat].length > max ? `${[...flat].slice(0, max - 1).join("").trimEnd()}…` : flat;
}

function citeHtml(source: CitedSource, options: Citations, occurrence: number): string {
  const cardId = `cite-${options.cardScope ?? options.scope}-${source.n}-${occurrence}`;
  const place = sourcePlace(source, options.pageLabel);
  const parts = [`<span class="cite-title">${escapeHtml(source.title)}</span>`];
  if (place) parts.push(`<span class="cite-place">${escapeHtml(place)}</span>`);
  if (source.excerpt) parts.push(`<span class="cite-excerpt">${escapeHtml(clip(source.excerpt, EXCERPT_MAX))}</span>`);
  const href = `#${sourceAnchor(options.scope, source.n)}`;
  return (
    `<span class="cite">` +
    `<a class="cite-link" href="${escapeHtml(href)}" data-cite="${source.n}" aria-describedby="${escapeHtml(ID_PREFIX + cardId)}">[${source.n}]</a>` +
    `<span class="cite-card" role="tooltip" id="${escapeHtml(cardId)}">${parts.join("")}</span>` +
    `</span>`
  );
}

const citation: TokenizerAndRendererExtension = {
  name: "cite",
  level: "inline",
  start(src: string) {
    if (!citing) return undefined;
    const at = src.search(/\[\d/);
    return at >= 0 ? at : undefined;
  },
  tokenizer(src: string) {
    if (!citing) return undefined;
    const m = CITE.exec(src);
    // `[1](url)` is a link the model wrote, not a citation.
    if (!m || src[m[0].length] === "(") return undefined;
    const numbers = citedNumbers(m[1]);
    const byN = citing.byN;
    // A marker none of whose numbers resolves is left as the model wrote it.
    if (!numbers.some((n) => byN.has(n))) return undefined;
    return { type: "cite", raw: m[0], numbers };
  },
  renderer(token) {
    const t = token as unknown as CiteToken;
    const state = citing;
    if (!state) return escapeHtml(t.raw);
    return t.numbers
      .map((n) => {
        const source = state.byN.get(n);
        if (!source) return `[${n}]`;
        state.count += 1;
        return citeHtml(source, state.options, state.count);
      })
      .join("");
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
  extensions: [blockMath, inlineMath, citation],
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
  ADD_ATTR: ["data-tex", "data-cite"],
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
      node.setAttribute("rel", "noopener noreferrer");
      // A link within the page (a citation to its source below) stays in this tab.
      if (!href?.trim().startsWith("#")) node.setAttribute("target", "_blank");
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
export function renderMarkdown(text: string, citations?: Citations): string {
  return purify().sanitize(markdownToHtml(text, citations));
}

/**
 * Markdown to HTML before sanitising (raw HTML already reduced to text and bare tags). With
 * `citations`, each `[n]` that names one of them is a link to it with a card.
 */
export function markdownToHtml(text: string, citations?: Citations): string {
  if (!citations || citations.sources.length === 0) return markdown.parse(text) as string;
  citing = { byN: new Map(citations.sources.map((s) => [s.n, s])), options: citations, count: 0 };
  try {
    return markdown.parse(text) as string;
  } finally {
    citing = null;
  }
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
