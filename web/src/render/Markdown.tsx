// Sanitised Markdown with KaTeX maths, and highlighted code for tool arguments.
import { useId, useLayoutEffect, useMemo, useRef } from "preact/hooks";
import type { JSX } from "preact";
import "katex/dist/katex.min.css";
import { highlightCode, mountMath, renderMarkdown, type Citations } from "./markdown";

/**
 * Model text as Markdown; maths is drawn by KaTeX once the sanitised HTML is in place. With
 * `citations`, the answer's `[n]` markers link to their sources, each with a hover/focus card.
 */
export function Markdown(props: { text: string; class?: string; citations?: Citations }): JSX.Element {
  // Card ids unique on the page, whichever of the turn's texts cite the same source.
  const uid = useId().replace(/[^\w-]/g, "");
  const html = useMemo(() => {
    const c = props.citations;
    return renderMarkdown(props.text, c && { ...c, cardScope: `${c.cardScope ?? c.scope}-${uid}` });
  }, [props.text, props.citations, uid]);
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    if (ref.current) mountMath(ref.current);
  }, [html]);
  const cls = `markdown${props.citations ? " citing" : ""}${props.class ? ` ${props.class}` : ""}`;
  if (!props.citations) return <div ref={ref} class={cls} dangerouslySetInnerHTML={{ __html: html }} />;
  return (
    <div
      ref={ref}
      class={cls}
      dangerouslySetInnerHTML={{ __html: html }}
      onKeyDown={dismissCard}
      onFocusOut={restoreCard}
      onMouseOut={restoreCard}
    />
  );
}

// A citation's card can be put away with Escape without moving the focus (as for any tooltip);
// it comes back the next time the marker is focused or hovered.
function dismissCard(event: KeyboardEvent): void {
  if (event.key !== "Escape") return;
  const cite = (event.target as Element | null)?.closest?.(".cite");
  if (cite) cite.setAttribute("data-dismissed", "");
}

function restoreCard(event: Event): void {
  const cite = (event.target as Element | null)?.closest?.(".cite");
  if (cite && !cite.contains((event as FocusEvent).relatedTarget as Node | null)) cite.removeAttribute("data-dismissed");
}

/** Code (e.g. a tool call's arguments), highlighted when its language is known. */
export function CodeBlock(props: { code: string; language?: string }): JSX.Element {
  // highlight.js escapes the code; its output is markup of its own (class names only).
  const { html, language } = useMemo(() => highlightCode(props.code, props.language), [props.code, props.language]);
  const cls = language ? `hljs language-${language}` : "hljs";
  return (
    <pre class="code-block">
      <code class={cls} dangerouslySetInnerHTML={{ __html: html }} />
    </pre>
  );
}
