// Sanitised Markdown with KaTeX maths, and highlighted code for tool arguments.
import { useLayoutEffect, useMemo, useRef } from "preact/hooks";
import type { JSX } from "preact";
import "katex/dist/katex.min.css";
import { mountMath, renderMarkdown } from "./markdown";

export function Markdown(props: { text: string; class?: string }): JSX.Element {
  const html = useMemo(() => renderMarkdown(props.text), [props.text]);
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    if (ref.current) mountMath(ref.current);
  }, [html]);
  return <div ref={ref} class={props.class ? `markdown ${props.class}` : "markdown"} dangerouslySetInnerHTML={{ __html: html }} />;
}

export function CodeBlock(props: { code: string; language?: string }): JSX.Element {
  return (
    <pre class="code-block">
      <code>{props.code}</code>
    </pre>
  );
}
