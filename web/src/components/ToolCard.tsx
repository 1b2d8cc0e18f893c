// One tool call: its name, arguments (code highlighted), output as plain text, status and
// duration, its progress while it runs (code's output as it prints), and the files it made
// (images and our own figures inline, others as downloads).
import { useContext, useState } from "preact/hooks";
import { inlineImageUrl } from "../api";
import { formatBytes, formatDuration } from "../format";
import { useI18n } from "../i18n";
import type { Artifact, ArtifactView } from "../protocol";
import { CodeBlock } from "../render/Markdown";
import type { ToolCardView } from "../state/view";
import { ArtifactsContext, findStored, isInlineImage, isOurFigure } from "./artifacts";

/** The solve's own tools: the checklist already shows what they did, so their cards stay folded. */
const SPINE_TOOLS = new Set(["solve_plan", "solve_finish_step", "solve_replan"]);

/** The code the call's event says to show first, with its language; else none (JSON is shown). */
function codeArgument(card: ToolCardView): { code: string; language: string } | null {
  const { args, shown } = card;
  if (!shown?.language || typeof args !== "object" || args === null) return null;
  const value = (args as Record<string, unknown>)[shown.name];
  return typeof value === "string" ? { code: value, language: shown.language } : null;
}

function compactJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "";
  } catch {
    return String(value);
  }
}

export function ToolCard(props: { card: ToolCardView }) {
  const { card } = props;
  if (SPINE_TOOLS.has(card.name)) return <SpineCard card={card} />;
  const code = codeArgument(card);
  return (
    <article class={`tool-card ${card.status}`} data-testid="tool-card" data-status={card.status}>
      <ToolHead card={card} />
      <div class="tool-args">
        {code ? <CodeBlock code={code.code} language={code.language} /> : <pre class="json">{compactJson(card.args)}</pre>}
      </div>
      {card.status === "running" && <ToolProgress lines={card.progress} />}
      <ToolOutput card={card} />
      <ToolFiles files={card.artifacts} />
    </article>
  );
}

function SpineCard(props: { card: ToolCardView }) {
  const { t } = useI18n();
  const { card } = props;
  return (
    <details class={`tool-card spine ${card.status}`} data-testid="tool-card" data-status={card.status}>
      <summary>
        <ToolHead card={card} />
      </summary>
      <div class="tool-args">
        <pre class="json">{compactJson(card.args)}</pre>
      </div>
      {card.content !== null && (
        <div class="tool-output">
          <span class="tool-section">{t("tool.output")}</span>
          <pre>{card.content}</pre>
        </div>
      )}
    </details>
  );
}

function ToolHead(props: { card: ToolCardView }) {
  const { t, lang } = useI18n();
  const { card } = props;
  const statusText = t(card.status === "running" ? "tool.running" : card.status === "ok" ? "tool.ok" : "tool.error");
  return (
    <div class="tool-head">
      <code class="tool-name">{card.name}</code>
      <span class={`tool-status ${card.status}`}>
        <span class="tool-status-icon" aria-hidden="true">
          {card.status === "ok" ? "✓" : card.status === "error" ? "✕" : ""}
        </span>
        {statusText}
      </span>
      {card.durationMs !== null && <span class="tool-duration muted">{formatDuration(lang, card.durationMs)}</span>}
    </div>
  );
}

function ToolProgress(props: { lines: string[] }) {
  const { t } = useI18n();
  if (props.lines.length === 0) return null;
  return (
    <div class="tool-progress">
      <span class="tool-section">{t("tool.progress")}</span>
      <pre data-testid="tool-progress">{props.lines.join("\n")}</pre>
    </div>
  );
}

function ToolOutput(props: { card: ToolCardView }) {
  const { t } = useI18n();
  const { card } = props;
  if (card.content === null) return null;
  return (
    <div class="tool-output">
      <span class="tool-section">{t("tool.output")}</span>
      <pre>{card.content || t("tool.noOutput")}</pre>
    </div>
  );
}

function ToolFiles(props: { files: Artifact[] }) {
  const { t } = useI18n();
  const stored = useContext(ArtifactsContext);
  if (props.files.length === 0) return null;
  const images = [];
  const others = [];
  for (const file of props.files) {
    const view = findStored(stored, file);
    if (view && isInlineImage(file.mime)) {
      images.push(<InlineImage key={file.path} file={file} view={view} />);
    } else if (view && isOurFigure(file)) {
      images.push(<InlineImage key={file.path} file={file} view={view} inlineOnly />);
    } else if (view) {
      others.push(
        <li key={file.path}>
          <DownloadChip file={file} view={view} />
        </li>,
      );
    } else {
      others.push(
        <li key={file.path}>
          <span class="chip pending">{t("tool.pendingFile", { name: file.path })}</span>
        </li>,
      );
    }
  }
  return (
    <div class="tool-files">
      <span class="tool-section">{t("tool.files")}</span>
      {images}
      {others.length > 0 && <ul class="chips">{others}</ul>}
    </div>
  );
}

function DownloadChip(props: { file: Artifact; view: ArtifactView }) {
  const { t } = useI18n();
  const { file, view } = props;
  return (
    <a class="chip" href={view.url} download={view.name} aria-label={t("tool.download", { name: file.path })}>
      <span aria-hidden="true">⤓</span> {file.path} <span class="muted">{formatBytes(file.size)}</span>
    </a>
  );
}

/**
 * An image the server verified as one (its inline URL). A server without that route still
 * serves the bytes as a download, which an <img> shows just the same; after both, a chip.
 * `inlineOnly` (our SVG figures): only the verified inline URL, never the download.
 */
function InlineImage(props: { file: Artifact; view: ArtifactView; inlineOnly?: boolean }) {
  const [attempt, setAttempt] = useState<"inline" | "download" | "failed">("inline");
  const { file, view } = props;
  if (attempt === "failed") return <DownloadChip file={file} view={view} />;
  const src = attempt === "inline" ? inlineImageUrl(view.id) : view.url;
  const next = attempt === "inline" && !props.inlineOnly ? "download" : "failed";
  return (
    <figure class="tool-image" data-testid={props.inlineOnly ? "figure" : undefined}>
      <img
        src={src}
        alt={file.path}
        loading="lazy"
        onError={() => setAttempt(next)}
      />
      <figcaption>
        <a href={view.url} download={view.name}>
          {file.path}
        </a>
      </figcaption>
    </figure>
  );
}
